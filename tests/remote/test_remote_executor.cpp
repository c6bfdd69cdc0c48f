// remote_executor over the executor protocol (remote_executor.hpp,
// server/executor_api.hpp): what holds only because the executor is remote —
// byte-exact output over JSON, a local stop or timeout killing the command on
// the server with the first cause reported, progress, sessions fenced from
// each other, repeated requests answered once, a connection dropped in the
// middle of a run and of reads survived with nothing lost or repeated, a
// server that is gone or refuses surfacing as infrastructure_error within
// the configured bounds, idle sessions and server shutdown killing their
// commands. The server is the library's own (mcp_http_server with
// executor_api) on loopback; the contract suites run over it across a
// network namespace in the remote/ lane (test_foreground, test_background).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <bashexec/local_executor.hpp>
#include <bashexec/remote_executor.hpp>
#include <bashexec/server/executor_api.hpp>
#include <bashexec/server/mcp_http_server.hpp>

#include "executor_test_support.hpp"

using namespace bashexec;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr std::string_view test_token = "remote-executor-test-token-0123456789";

/// An executor protocol server on a free loopback port, over a
/// local_executor, served on a thread of its own.
struct loopback_server {
  explicit loopback_server(server::executor_api_options api_options = {},
                           executor_config config = test_support::fast_config(),
                           std::vector<std::string> allowed_hosts = {}, bool refuse_own_commands = false)
      : executor(std::move(config)), api(server::executor_api(executor, api_options)),
        http(make(api, std::move(allowed_hosts), refuse_own_commands)),
        serving([this] { http->serve(); }) {}
  ~loopback_server() { stop(); }

  void stop() {
    if (!http) return;
    http->stop();
    if (serving.joinable()) serving.join();
    http.reset();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/exec/v1"; }

  remote_executor_config client(std::string at = {}) const {
    remote_executor_config config;
    config.url = at.empty() ? url() : std::move(at);
    config.token = std::string(test_token);
    config.reconnect_timeout = 2s;
    config.connect_timeout = 1s;
    config.error_sink = [](std::string_view) {};
    return config;
  }

  std::unique_ptr<server::mcp_http_server> make(std::shared_ptr<server::executor_api_backend> backend,
                                                std::vector<std::string> allowed_hosts, bool refuse_own_commands) {
    server::mcp_http_options options;
    options.allowed_hosts = std::move(allowed_hosts);
    // Off unless a case asks: the client is this very process, whose
    // sockets a command being spawned holds for an instant (until its exec
    // closes them), and the own-command check would see that command as
    // the peer. A real client is another process, elsewhere (the remote/
    // lane runs it so).
    options.refuse_own_commands = refuse_own_commands;
    options.token = std::string(test_token);
    options.executor_api = std::move(backend);
    auto made = std::make_unique<server::mcp_http_server>(server::http_session_factory{}, std::move(options));
    port = made->port();
    return made;
  }

  local_executor executor;
  std::shared_ptr<server::executor_api_backend> api;
  std::uint16_t port = 0;
  std::unique_ptr<server::mcp_http_server> http;
  std::thread serving;
};

/// A TCP relay between a client and a server on loopback whose connections
/// the test can cut at any moment: a dropped connection, as a flaky network
/// or a restarted proxy makes it.
class tcp_relay {
 public:
  /// Relays to the port `set_target` names.
  tcp_relay() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in at = loopback(0);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
    REQUIRE(::listen(listener_, 64) == 0);
    socklen_t size = sizeof at;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&at), &size);
    port_ = ntohs(at.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~tcp_relay() {
    stopping_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
    drop_all();
    for (auto& pump : pumps_) pump.join();
  }

  std::uint16_t port() const { return port_; }
  void set_target(std::uint16_t target) { target_ = target; }
  /// Cuts every connection open now; new ones are relayed as before.
  void drop_all() {
    std::lock_guard lock(mutex_);
    for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
    ++drops_;
  }
  int drops() const { return drops_; }

 private:
  static sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(port);
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return at;
  }

  void run() {
    while (!stopping_) {
      const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) return;
      const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in at = loopback(target_);
      if (::connect(server, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
        ::close(client);
        ::close(server);
        continue;
      }
      std::lock_guard lock(mutex_);
      open_.insert(client);
      open_.insert(server);
      pumps_.emplace_back([this, client, server] { pump(client, server); });
    }
  }

  void pump(int a, int b) {
    char buffer[65536];
    pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    for (bool open = true; open;) {
      if (::poll(fds, 2, 200) < 0) break;
      if (stopping_) break;
      for (int i = 0; i < 2 && open; ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const ssize_t n = ::recv(fds[i].fd, buffer, sizeof buffer, 0);
        if (n <= 0 || ::send(fds[1 - i].fd, buffer, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) open = false;
      }
    }
    std::lock_guard lock(mutex_);
    open_.erase(a);
    open_.erase(b);
    ::close(a);
    ::close(b);
  }

  std::atomic<std::uint16_t> target_{0};
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> drops_{0};
  std::mutex mutex_;
  std::set<int> open_;
  std::vector<std::thread> pumps_;
  std::thread thread_;
};

/// One raw request of the executor protocol, as a client of another
/// implementation would send it.
json post(const loopback_server& at, const json& request, unsigned* status = nullptr) {
  remote::detail::http_connection connection(remote::detail::endpoint::parse(at.url()));
  const auto reply = connection.post(request.dump(), std::string(test_token), 1s, 30s);
  if (status) *status = reply.status;
  return json::parse(reply.body);
}

bool process_alive(const fs::path& pid_file) {
  std::ifstream in(pid_file);
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0;
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return condition();
}

struct temp_dir {
  temp_dir() : path(fs::temp_directory_path() / ("bashexec-remote-test-" + std::to_string(::getpid()) + "-" +
                                                 std::to_string(counter++))) {
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  static inline std::atomic<int> counter{0};
  fs::path path;
};

}  // namespace

static_assert(executor<remote_executor>);

TEST_CASE("remote_executor runs a command on the server and brings back its bytes exactly", "[remote]") {
  loopback_server server;
  remote_executor remote(server.client());
  CHECK(remote.default_mode() == std::nullopt);  // the server's executor never confines
  CHECK(remote.spill_directory() == server.executor.spill_directory());
  // Invalid UTF-8, a NUL and a lone continuation byte: no repair, no loss.
  const auto result = remote.run(remote.resolve({.command = R"(printf 'a\377b\000c\200'; printf 'err\376' >&2; exit 3)"}));
  CHECK(result.exit_code == 3);
  CHECK(result.out.text == std::string("a\xff" "b\0c\x80", 6));
  CHECK(result.err.text == "err\xfe");
  CHECK_FALSE(result.timed_out);
  CHECK_FALSE(result.aborted);
  // The command and stdin travel exactly too.
  const auto echoed = remote.run(remote.resolve({.command = "cat; printf '\\n%s' \"$X\"", .stdin_data = std::string("in\xff\0", 4),
                                                 .env = std::map<std::string, std::string>{{"X", "v\xe9"}}}));
  CHECK(echoed.out.text == std::string("in\xff\0\nv\xe9", 7));
}

TEST_CASE("remote_executor resolves on the server: its defaults, and its refusals naming the field", "[remote]") {
  executor_config config = test_support::fast_config();
  temp_dir dir;
  config.cwd = dir.path;
  config.default_timeout = 7000ms;
  loopback_server server({}, config);
  remote_executor remote(server.client());
  const auto spec = remote.resolve({.command = "pwd"});
  CHECK(spec.workdir == dir.path);
  CHECK(spec.timeout == 7000ms);
  try {
    (void)remote.resolve({.command = "true", .timeout = 0ms});
    FAIL("accepted");
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("timeout"));
  }
}

TEST_CASE("remote_executor carries a shell state as request data: unset names go, the final state comes back",
          "[remote][shell-state]") {
  // Two names of the server's host environment (set before its threads
  // start): a carried state unsets one, the command the other.
  ::setenv("REMOTE_STATE_GONE", "1", 1);
  ::setenv("REMOTE_STATE_KEPT", "2", 1);
  executor_config config = test_support::fast_config();
  temp_dir dir;
  fs::create_directories(dir.path / "sub");
  config.cwd = dir.path;
  loopback_server server({}, config);
  remote_executor remote(server.client());
  exec_request request{
      .command = "printf '[%s]' \"${REMOTE_STATE_GONE-unset}\"; cd sub; export MADE=$'v\\xff'; unset REMOTE_STATE_KEPT"};
  request.env_unset = {"REMOTE_STATE_GONE"};
  request.capture_state = true;
  const auto spec = remote.resolve(std::move(request));
  CHECK(spec.capture_state);
  CHECK(spec.env_unset == std::vector<std::string>{"REMOTE_STATE_GONE"});
  const auto result = remote.run(spec);
  CHECK(result.out.text == "[unset]");
  REQUIRE(result.final_state);
  CHECK(result.final_state->cwd == fs::canonical(dir.path / "sub"));
  CHECK(result.final_state->env.at("MADE") == "v\xff");  // bytes exact, as everything on this wire
  CHECK(std::find(result.final_state->unset.begin(), result.final_state->unset.end(), "REMOTE_STATE_KEPT") !=
        result.final_state->unset.end());
  CHECK_FALSE(result.state_notice);
  // Without capture_state nothing comes back, as locally.
  const auto plain = remote.run(remote.resolve({.command = "cd sub"}));
  CHECK_FALSE(plain.final_state);
  server.stop();
  ::unsetenv("REMOTE_STATE_GONE");
  ::unsetenv("REMOTE_STATE_KEPT");
}

TEST_CASE("remote_executor: the server's timeout kills the command there and the result says timed out",
          "[remote]") {
  loopback_server server;
  remote_executor remote(server.client());
  temp_dir dir;
  const auto pid_file = dir.path / "pid";
  const auto result = remote.run(remote.resolve({.command = "echo $$ > " + pid_file.string() + "; sleep 30", .timeout = 500ms}));
  CHECK(result.timed_out);
  CHECK_FALSE(result.aborted);
  CHECK(result.signal == SIGTERM);
  CHECK_FALSE(process_alive(pid_file));
}

TEST_CASE("remote_executor: a local stop kills the command on the server, reported as aborted, and a stop "
          "before the spawn runs nothing", "[remote]") {
  loopback_server server;
  remote_executor remote(server.client());
  temp_dir dir;
  const auto pid_file = dir.path / "pid";
  std::stop_source stop;
  std::thread stopper([&] {
    eventually([&] { return fs::exists(pid_file) && fs::file_size(pid_file) > 0; });
    stop.request_stop();
  });
  const auto started = std::chrono::steady_clock::now();
  const auto result = remote.run(remote.resolve({.command = "echo $$ > " + pid_file.string() + "; sleep 30", .stop = stop.get_token()}));
  stopper.join();
  CHECK(result.aborted);
  CHECK_FALSE(result.timed_out);
  CHECK(std::chrono::steady_clock::now() - started < 10s);
  CHECK_FALSE(process_alive(pid_file));

  std::stop_source already;
  already.request_stop();
  CHECK_THROWS_AS(remote.run(remote.resolve({.command = "touch " + (dir.path / "ran").string(), .stop = already.get_token()})),
                  infrastructure_error);
  CHECK_THROWS_AS(remote.start(remote.resolve({.command = "touch " + (dir.path / "ran").string(), .stop = already.get_token()})),
                  infrastructure_error);
  CHECK_FALSE(fs::exists(dir.path / "ran"));
}

TEST_CASE("remote_executor: a run's progress counts the output as the server reads it", "[remote]") {
  loopback_server server;
  auto config = server.client();
  config.poll_wait = 200ms;  // answers between the waits carry the counts
  remote_executor remote(config);
  auto progress = std::make_shared<run_progress>();
  std::atomic<std::uint64_t> seen{0};
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done) {
      seen = std::max<std::uint64_t>(seen, progress->stdout_bytes.load());
      std::this_thread::sleep_for(20ms);
    }
  });
  const auto result = remote.run(remote.resolve({.command = "printf 12345; sleep 1.5; printf 678", .progress = progress}));
  done = true;
  watcher.join();
  CHECK(result.out.text == "12345678");
  CHECK(seen >= 5);  // seen while it ran
}

TEST_CASE("remote_executor: background tasks, reads, waits, kills and listeners keep their local meaning",
          "[remote]") {
  loopback_server server;
  std::mutex mutex;
  std::vector<task_snapshot> heard;
  std::vector<std::string> reported;
  auto config = server.client();
  config.error_sink = [&](std::string_view what) {
    std::lock_guard lock(mutex);
    reported.emplace_back(what);
  };
  remote_executor remote(config);
  auto subscription = remote.on_task_done([&](const task_snapshot& task) {
    std::lock_guard lock(mutex);
    heard.push_back(task);
  });
  const auto first = remote.start(remote.resolve({.command = "printf 'one\\377'; sleep 0.3; printf two; exit 4", .owner = owner_token("alice")}));
  const auto second = remote.start(remote.resolve({.command = "sleep 30"}));
  CHECK(first.value() == "bash-1");
  CHECK(second.value() == "bash-2");
  CHECK(remote.owner_of(first) == owner_token("alice"));
  CHECK(remote.may_access(first, owner_token("alice")));
  CHECK_FALSE(remote.may_access(first, owner_token("bob")));
  CHECK(remote.may_access(second, owner_token("bob")));  // ownerless: open to all

  std::string seen;
  while (seen.size() < 4) seen += remote.read_output(first).delta;
  CHECK(seen == "one\xff");
  const auto done = remote.wait(first);
  CHECK(done.id == first);
  CHECK(done.status == task_status::completed);
  CHECK(done.exit_code == 4);
  const auto rest = remote.read_output(first);
  CHECK(rest.delta == "two");
  CHECK(remote.read_output(first).delta.empty());  // never repeated

  CHECK_FALSE(remote.wait_for(second, 100ms));
  CHECK(remote.kill(second));
  CHECK(remote.wait(second).status == task_status::killed);
  CHECK_FALSE(remote.kill(second));  // finished already
  const auto listed = remote.list();
  CHECK(listed.size() == 2);
  CHECK_THROWS_AS(remote.get(task_id("bash-99")), unknown_task);

  REQUIRE(eventually([&] {
    std::lock_guard lock(mutex);
    return heard.size() >= 2;
  }));
  std::this_thread::sleep_for(200ms);
  std::lock_guard lock(mutex);
  CHECK(heard.size() == 2);  // exactly once each
  std::set<std::string> ids;
  for (const auto& task : heard) ids.insert(task.id.value());
  CHECK(ids == std::set<std::string>{"bash-1", "bash-2"});
  CHECK(reported.empty());
}

TEST_CASE("remote_executor: a task's stop token stops it on the server", "[remote]") {
  loopback_server server;
  remote_executor remote(server.client());
  std::stop_source stop;
  const auto id = remote.start(remote.resolve({.command = "sleep 30", .stop = stop.get_token()}));
  stop.request_stop();
  const auto done = remote.wait_for(id, 10s);
  REQUIRE(done);
  CHECK(done->status == task_status::killed);
}

TEST_CASE("remote_executor: destroying it ends its session, and the server kills and reaps its commands",
          "[remote]") {
  loopback_server server;
  temp_dir dir;
  const auto pid_file = dir.path / "pid";
  {
    remote_executor remote(server.client());
    remote.start(remote.resolve({.command = "echo $$ > " + pid_file.string() + "; exec sleep 30"}));
    REQUIRE(eventually([&] { return process_alive(pid_file); }));
  }
  CHECK_FALSE(process_alive(pid_file));
  CHECK(server.executor.list().front().status == task_status::killed);
}

TEST_CASE("executor protocol: a session sees only its own tasks, and a repeated request is done once",
          "[remote]") {
  loopback_server server;
  const json opened = post(server, {{"op", "open"}, {"version", remote::wire::protocol_version}});
  const json other = post(server, {{"op", "open"}, {"version", remote::wire::protocol_version}});
  const std::string mine = opened["session"];
  const std::string theirs = other["session"];
  const auto spec = remote::wire::to_wire(server.executor.resolve({.command = "sleep 30"}));
  const json start{{"op", "start"}, {"session", mine}, {"seq", 7}, {"spec", spec}};
  const json first = post(server, start);
  const json again = post(server, start);  // the same request, as after a dropped connection
  CHECK(first["task"] == again["task"]);
  CHECK(server.executor.list().size() == 1);
  unsigned status = 0;
  const json foreign = post(server, {{"op", "kill"}, {"session", theirs}, {"seq", 1}, {"task", first["task"]}}, &status);
  CHECK(status == 404);
  CHECK(foreign["error"] == "unknown_task");
  CHECK(server.executor.list().front().status == task_status::running);
  const json unknown = post(server, {{"op", "list"}, {"session", "no-such-session"}}, &status);
  CHECK(status == 404);
  CHECK(unknown["error"] == "unknown_session");
  const json old = post(server, {{"op", "open"}, {"version", 99}}, &status);
  CHECK(status == 400);
  CHECK_THAT(old["message"].get<std::string>(), Catch::Contains("version"));
  post(server, {{"op", "close"}, {"session", mine}});
  CHECK(server.executor.list().front().status == task_status::killed);
  post(server, {{"op", "close"}, {"session", theirs}});
}

TEST_CASE("remote_executor survives dropped connections: a run completes, reads lose and repeat nothing, "
          "listeners hear of each task once",
          "[remote]") {
  tcp_relay relay;
  // The client names the relay's address in its Host header.
  loopback_server server({}, test_support::fast_config(), {"127.0.0.1:" + std::to_string(relay.port())});
  relay.set_target(server.port);
  auto config = server.client("http://127.0.0.1:" + std::to_string(relay.port()) + "/exec/v1");
  config.poll_wait = 300ms;
  remote_executor remote(config);
  std::mutex mutex;
  std::map<std::string, int> heard;
  auto subscription = remote.on_task_done([&](const task_snapshot& task) {
    std::lock_guard lock(mutex);
    ++heard[task.id.value()];
  });
  std::atomic<bool> done{false};
  std::thread cutter([&] {
    while (!done) {
      std::this_thread::sleep_for(150ms);
      relay.drop_all();
    }
  });
  const auto result = remote.run(remote.resolve({.command = "for i in $(seq 1 10); do echo line$i; sleep 0.1; done"}));
  std::string expected;
  for (int i = 1; i <= 10; ++i) expected += "line" + std::to_string(i) + "\n";
  CHECK(result.exit_code == 0);
  CHECK(result.out.text == expected);

  const auto id = remote.start(remote.resolve({.command = "for i in $(seq 1 20); do echo l$i; sleep 0.05; done"}));
  std::string read;
  while (remote.get(id).status == task_status::running) read += remote.read_output(id).delta;
  read += remote.read_output(id).delta;
  // Short tasks settling while the connections are cut.
  for (int i = 0; i < 8; ++i) remote.start(remote.resolve({.command = "sleep 0.0" + std::to_string(i)}));
  REQUIRE(eventually([&] {
    std::lock_guard lock(mutex);
    return heard.size() == 9;
  }));
  std::this_thread::sleep_for(500ms);  // time for a repeated event to arrive, were there one
  done = true;
  cutter.join();
  std::string lines;
  for (int i = 1; i <= 20; ++i) lines += "l" + std::to_string(i) + "\n";
  CHECK(read == lines);
  CHECK(relay.drops() >= 3);
  std::lock_guard lock(mutex);
  CHECK(heard.size() == 9);
  for (const auto& [task, times] : heard) {
    INFO(task);
    CHECK(times == 1);
  }
}

TEST_CASE("remote_executor: a server that is gone or refuses is an infrastructure_error within the bounds, "
          "never a hang", "[remote]") {
  std::optional<loopback_server> server(std::in_place);
  {
    auto wrong = server->client();
    wrong.token = "not-the-token-at-all-0000";
    try {
      remote_executor refused(wrong);
      FAIL("opened");
    } catch (const infrastructure_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("bearer token"));
    }
  }
  remote_executor_config https;
  https.url = "https://example.invalid/exec/v1";
  CHECK_THROWS_AS(remote_executor(https), std::invalid_argument);
  auto config = server->client();
  remote_executor remote(config);
  const auto id = remote.start(remote.resolve({.command = "sleep 30"}));
  server->stop();  // the server's stop kills its commands
  CHECK(server->executor.wait_for(task_id("bash-1"), 10s));
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(remote.get(id), infrastructure_error);
  CHECK_THROWS_WITH(remote.run({.command = "true", .workdir = "/", .timeout = 1000ms, .stdout_max_bytes = 100}),
                    Catch::Contains("cannot be reached"));
  CHECK(std::chrono::steady_clock::now() - started < 4 * config.reconnect_timeout + 2s);
  // Never reachable at all: the constructor says so.
  const auto unreachable = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(remote_executor(config), infrastructure_error);
  CHECK(std::chrono::steady_clock::now() - unreachable < config.reconnect_timeout + 2s);
}

TEST_CASE("executor protocol: an idle session expires and its commands are killed", "[remote]") {
  server::executor_api_options options;
  options.idle_timeout = 500ms;
  loopback_server server(options);
  const json opened = post(server, {{"op", "open"}, {"version", remote::wire::protocol_version}});
  const auto spec = remote::wire::to_wire(server.executor.resolve({.command = "sleep 30"}));
  post(server, {{"op", "start"}, {"session", opened["session"]}, {"seq", 1}, {"spec", spec}});
  REQUIRE(eventually([&] { return server.executor.list().front().status == task_status::killed; }, 5s));
  unsigned status = 0;
  post(server, {{"op", "list"}, {"session", opened["session"]}}, &status);
  CHECK(status == 404);
}

TEST_CASE("executor protocol: the answers kept for repeats are bounded, and a repeat past them is refused, not redone",
          "[remote]") {
  server::executor_api_options options;
  options.replay_answers = 2;
  loopback_server server(options);
  const json opened = post(server, {{"op", "open"}, {"version", remote::wire::protocol_version}});
  const auto spec = remote::wire::to_wire(server.executor.resolve({.command = "true"}));
  for (int seq = 1; seq <= 3; ++seq)
    post(server, {{"op", "start"}, {"session", opened["session"]}, {"seq", seq}, {"spec", spec}});
  unsigned status = 0;
  const json old = post(server, {{"op", "start"}, {"session", opened["session"]}, {"seq", 1}, {"spec", spec}}, &status);
  CHECK(status == 409);
  CHECK_THAT(old["message"].get<std::string>(), Catch::Contains("seq"));
  const json kept = post(server, {{"op", "start"}, {"session", opened["session"]}, {"seq", 3}, {"spec", spec}}, &status);
  CHECK(status == 200);
  CHECK(kept["task"] == "bash-3");
  CHECK(server.executor.list().size() == 3);  // nothing started twice
  // Runs are kept by sequence number the same way: a forgotten one is
  // refused, not run again.
  temp_dir dir;
  const auto runs_log = dir.path / "runs";
  const auto counted = remote::wire::to_wire(server.executor.resolve({.command = "echo x >> " + runs_log.string()}));
  for (int seq = 4; seq <= 6; ++seq)
    post(server, {{"op", "run"}, {"session", opened["session"]}, {"seq", seq}, {"spec", counted}, {"wait_ms", 5000}});
  const json old_run =
      post(server, {{"op", "run"}, {"session", opened["session"]}, {"seq", 4}, {"spec", counted}, {"wait_ms", 5000}}, &status);
  CHECK(status == 409);
  CHECK_THAT(old_run["message"].get<std::string>(), Catch::Contains("seq"));
  const json kept_run =
      post(server, {{"op", "run"}, {"session", opened["session"]}, {"seq", 6}, {"spec", counted}, {"wait_ms", 5000}}, &status);
  CHECK(status == 200);
  CHECK(kept_run["done"] == true);
  std::ifstream log(runs_log);
  const std::string ran((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  CHECK(ran == "x\nx\nx\n");  // three runs, each once
  post(server, {{"op", "close"}, {"session", opened["session"]}});
}

TEST_CASE("executor protocol: a command the server runs cannot use its server's executor protocol (403 before a "
          "byte is read)", "[remote]") {
  loopback_server server({}, test_support::fast_config(), {}, /*refuse_own_commands=*/true);
  const std::string port = std::to_string(server.port);
  // bash's /dev/tcp, a POST with the right Host and no token: refused for
  // who it is before the token is even looked at.
  const std::string command = "exec 3<>/dev/tcp/127.0.0.1/" + port +
                              "; printf 'POST /exec/v1 HTTP/1.1\r\nHost: 127.0.0.1:" + port +
                              "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}' >&3; "
                              "head -n 1 <&3";
  const auto direct = server.executor.run(server.executor.resolve({.command = command}));
  CHECK_THAT(direct.out.text, Catch::StartsWith("HTTP/1.1 403"));
  // From a new session too (setsid): still a descendant of the server.
  const auto detached = server.executor.run(server.executor.resolve(
      {.command = "setsid -w bash -c \"$CMD\"", .env = std::map<std::string, std::string>{{"CMD", command}}}));
  CHECK_THAT(detached.out.text, Catch::StartsWith("HTTP/1.1 403"));
}

TEST_CASE("executor protocol: a server's ceiling refuses a wider mode and network grants, naming the field",
          "[remote]") {
  server::executor_api_options options;
  options.max_mode = sandbox_mode::read_only;  // what `bashexec mcp --approve never` sets
  options.allow_network_grants = false;
  loopback_server server(options);
  remote_executor remote(server.client());
  temp_dir dir;
  const auto marker = dir.path / "ran";
  // Refused at resolve, and again at the call for a spec made without the
  // server's resolve.
  try {
    (void)remote.resolve({.command = "touch " + marker.string(), .mode = sandbox_mode::danger_full_access});
    FAIL("resolved");
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("mode:"));
  }
  const auto refused = [&](exec_spec spec, const std::string& field) {
    CHECK_THROWS_WITH(remote.run(spec), Catch::StartsWith(field + ":"));
    CHECK_THROWS_WITH(remote.start(spec), Catch::StartsWith(field + ":"));
  };
  exec_spec wider = server.executor.resolve({.command = "touch " + marker.string()});
  wider.mode = sandbox_mode::workspace_write;
  refused(wider, "mode");
  exec_spec granted = server.executor.resolve({.command = "touch " + marker.string()});
  granted.network_grants = {"example.org"};
  refused(granted, "network_grants");
  CHECK_FALSE(fs::exists(marker));
  CHECK(remote.run(remote.resolve({.command = "true", .mode = sandbox_mode::read_only})).exit_code == 0);
}

TEST_CASE("executor protocol: malformed requests are refused 400 with the field named, and the server serves on",
          "[remote]") {
  loopback_server server;
  const json opened = post(server, {{"op", "open"}, {"version", remote::wire::protocol_version}});
  const std::string session = opened["session"];
  const auto raw = [&](const std::string& body, unsigned& status) {
    remote::detail::http_connection connection(remote::detail::endpoint::parse(server.url()));
    const auto reply = connection.post(body, std::string(test_token), 1s, 30s);
    status = reply.status;
    return json::parse(reply.body);
  };
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"({"op":"read","session":")" + session + R"(","seq":"one","task":"bash-1"})", "seq"},
      {R"({"op":"events","session":")" + session + R"(","wait_ms":10})", "after"},
      {R"({"op":"run_wait","session":")" + session + R"("})", "run"},
      {R"({"op":"start","session":")" + session + R"(","seq":1,"spec":{"command":"%%%"}})", "command"},
      {R"({"op":"bogus","session":")" + session + R"("})", "op"},
      {R"({"session":")" + session + R"("})", "op"},
      {"[1,2,3]", ""},
      {"not json", ""},
      {std::string(100, '[') + std::string(100, ']'), ""},
      {"{\"op\":\"open\",\"version\":1,\"x\":\"\xff\"}", ""}};
  for (const auto& [body, field] : cases) {
    INFO(body.substr(0, 120));
    unsigned status = 0;
    const json refused = raw(body, status);
    CHECK(status == 400);
    CHECK(refused["ok"] == false);
    if (!field.empty()) CHECK_THAT(refused["message"].get<std::string>(), Catch::Contains(field));
  }
  // Still serving, the session intact.
  remote_executor remote(server.client());
  CHECK(remote.run(remote.resolve({.command = "echo fine"})).out.text == "fine\n");
  post(server, {{"op", "close"}, {"session", session}});
}

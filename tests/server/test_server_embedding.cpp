// The tool servers embedded in a C++ host (docs/embedding-server.md): a
// json_lines_server and an mcp_server over an executor the host owns, fed
// request lines through a pipe, their responses read from another — the
// same objects `bashexec serve` and `bashexec mcp` run — and mcp_http_server
// over real loopback sockets: its options refused with the field named, a
// session served, stop() ending every session and killing its background
// commands, and sessions that share one executor but hear only of their own
// tasks. (One unit: the MCP layer is compiled once for both transports. The
// CLI's HTTP behaviour is tests/mcp/mcp_http_test.py, the SDK's
// tests/mcp/mcp_sdk_test.mjs --http.)
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "executor_test_support.hpp"
#include "../../docs/examples/extending/audited_executor.hpp"

#include <bashexec/bashexec.hpp>
#include <bashexec/server/http_sessions.hpp>
#include <bashexec/server/json_lines_server.hpp>
#include <bashexec/server/mcp_http_server.hpp>
#include <bashexec/server/mcp_server.hpp>

using namespace bashexec;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

/// The host's side of a server: a pipe it writes requests into and a pipe
/// it reads responses from, each line parsed as JSON.
class host_pipes {
 public:
  host_pipes() {
    int in[2];
    int out[2];
    REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    server_in_ = detail::unique_fd(in[0]);
    requests_ = detail::unique_fd(in[1]);
    responses_ = detail::unique_fd(out[0]);
    server_out_ = detail::unique_fd(out[1]);
    reader_.emplace(responses_.get(), gave_up_, std::size_t{1} << 20);
  }

  int server_in() const { return server_in_.get(); }
  int server_out() const { return server_out_.get(); }

  void send(const json& request) {
    const std::string line = request.dump() + "\n";
    REQUIRE(::write(requests_.get(), line.data(), line.size()) == static_cast<ssize_t>(line.size()));
  }

  /// End of input: the server stops reading and returns from `serve`.
  void close_requests() { requests_.reset(); }

  /// The MCP handshake at `version`: initialize, its response (returned),
  /// then notifications/initialized.
  json initialize_mcp(const std::string& version) {
    send({{"jsonrpc", "2.0"},
          {"id", "init"},
          {"method", "initialize"},
          {"params", {{"protocolVersion", version}, {"capabilities", json::object()}}}});
    json response = next([](const json& j) { return j.contains("id") && j["id"] == "init"; });
    send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    return response;
  }

  /// The first line the server wrote that `wanted` accepts; the others are
  /// kept for later calls (a background task's notice may come before the
  /// response that started it). Fails the test once the host has waited 30 s
  /// in all.
  template <class Pred>
  json next(Pred wanted) {
    for (auto kept = unclaimed_.begin(); kept != unclaimed_.end(); ++kept)
      if (wanted(*kept)) {
        json found = std::move(*kept);
        unclaimed_.erase(kept);
        return found;
      }
    std::string line;
    for (;;) {
      const auto status = reader_->next(line);
      REQUIRE(status == server::line_reader::status::ok);
      json parsed = json::parse(line);
      if (wanted(parsed)) return parsed;
      unclaimed_.push_back(std::move(parsed));
    }
  }

 private:
  detail::unique_fd server_in_, requests_, responses_, server_out_;
  server::closing_flag gave_up_;
  std::optional<server::line_reader> reader_;  // once `responses_` is open
  std::deque<json> unclaimed_;
  // Declared last, so stopped first: ends a read that would wait forever.
  std::jthread watchdog_{[this](std::stop_token stop) {
    std::mutex mutex;
    std::condition_variable_any never;
    std::unique_lock lock(mutex);
    if (!never.wait_for(lock, stop, 30s, [] { return false; }) && !stop.stop_requested()) gave_up_.set();
  }};
};

}  // namespace

TEST_CASE("a C++ host embeds the JSON-lines server over its own executor and descriptors", "[server][embedding]") {
  test_support::temp_dir work;
  executor_config config;
  config.cwd = work.path();
  local_executor executor(config);  // the host's: it outlives the server
  host_pipes pipes;

  server::server_options options;
  options.workdir = work.path();  // session_dir left empty: the sessions' logs stay in memory
  server::json_lines_server server(executor, options, pipes.server_in(), pipes.server_out());
  std::thread serving([&] { server.serve(); });

  pipes.send({{"id", 1}, {"op", "tools"}});
  const json tools = pipes.next([](const json& j) { return j.contains("id") && j["id"] == 1; });
  CHECK(tools["tools"].size() == 4);  // bash_input too: local_executor takes input

  pipes.send({{"id", 2}, {"tool", "bash"}, {"session", "s1"}, {"args", {{"command", "echo hello; pwd"}, {"description", "greet"}}}});
  const json ran = pipes.next([](const json& j) { return j.contains("id") && j["id"] == 2; });
  CHECK(ran["text"] == "hello\n" + work.path().string() + "\n");
  CHECK(ran["is_error"] == false);

  pipes.send({{"id", 3},
              {"tool", "bash"},
              {"session", "s1"},
              {"args", {{"command", "echo later"}, {"description", "bg"}, {"run_in_background", true}}}});
  CHECK(pipes.next([](const json& j) { return j.contains("id") && j["id"] == 3; })["text"] ==
        "started background task bash-1");
  const json notice = pipes.next([](const json& j) { return j.contains("notice"); });
  CHECK(notice["session"] == "s1");
  pipes.send({{"id", 4}, {"tool", "bash_output"}, {"session", "s2"}, {"args", {{"task_id", "bash-1"}}}});
  CHECK(pipes.next([](const json& j) { return j.contains("id") && j["id"] == 4; })["text"] ==
        "task bash-1 belongs to another session");

  pipes.close_requests();
  serving.join();
  CHECK_FALSE(server.output_lost());
}

TEST_CASE("a C++ host embeds the MCP server over its own executor and descriptors", "[server][embedding][mcp]") {
  test_support::temp_dir work;
  executor_config config;
  config.cwd = work.path();
  local_executor executor(config);
  host_pipes pipes;

  server::mcp_server_options options;
  options.workdir = work.path();
  options.session = "host";
  server::mcp_server server(executor, options, pipes.server_in(), pipes.server_out());
  std::thread serving([&] { server.serve(); });

  CHECK(pipes.initialize_mcp("2025-06-18")["result"]["protocolVersion"] == "2025-06-18");
  const json arguments = {{"command", "echo hi; exit 3"}, {"description", "d"}};
  pipes.send({{"jsonrpc", "2.0"},
              {"id", 2},
              {"method", "tools/call"},
              {"params", {{"name", "bash"}, {"arguments", arguments}}}});
  const json called = pipes.next([](const json& j) { return j.contains("id") && j["id"] == 2; });
  CHECK(called["result"]["content"][0]["text"] == "hi\n[exit code: 3]");
  CHECK(called["result"]["isError"] == false);
  CHECK(called["result"]["structuredContent"]["exit_code"] == 3);

  pipes.close_requests();
  serving.join();
  CHECK_FALSE(server.output_lost());
}

namespace {

using audited_local = example::audited_executor<local_executor>;

/// An audited executor with `wait` taken away: still enough for the tools,
/// no longer an executor.
struct without_wait : audited_local {
  using audited_local::audited_local;
  task_snapshot wait(const task_id&) = delete;
};

/// The audit lines, from any of a server's threads.
struct audit_log {
  std::mutex mutex;
  std::vector<std::string> lines;
  auto sink() {
    return [this](const std::string& what) {
      std::lock_guard lock(mutex);
      lines.push_back(what);
    };
  }
  std::vector<std::string> taken() {
    std::lock_guard lock(mutex);
    return lines;
  }
};

}  // namespace

static_assert(executor<local_executor> && executor<sandbox_executor> && executor<audited_local>);
static_assert(tool_executor<without_wait> && !executor<without_wait>);
static_assert(!executor<int> && !tool_executor<int>);

TEST_CASE("an executor of the host's own (an auditing decorator) is served by both servers like a shipped one",
          "[server][embedding][executor]") {
  test_support::temp_dir work;
  executor_config config;
  config.cwd = work.path();
  local_executor inner(config);
  audit_log audit;
  audited_local executor(inner, audit.sink());

  SECTION("mcp_server: a call, a background task read to its end, and the audit saw both") {
    host_pipes pipes;
    server::mcp_server_options options;
    options.workdir = work.path();
    options.session = "host";
    server::mcp_server server(executor, options, pipes.server_in(), pipes.server_out());
    std::thread serving([&] { server.serve(); });
    pipes.initialize_mcp("2025-11-25");
    auto call = [&](int id, const json& arguments, const char* tool = "bash") {
      pipes.send({{"jsonrpc", "2.0"},
                  {"id", id},
                  {"method", "tools/call"},
                  {"params", {{"name", tool}, {"arguments", arguments}}}});
      return pipes.next([id](const json& j) { return j.contains("id") && j["id"] == id; })["result"];
    };
    CHECK(call(2, {{"command", "echo through"}, {"description", "d"}})["content"][0]["text"] == "through\n");
    const json started = call(3, {{"command", "echo later"}, {"description", "bg"}, {"run_in_background", true}});
    const std::string id = started["structuredContent"]["task_id"];
    inner.wait(task_id(id));
    const std::string read = call(4, {{"task_id", id}}, "bash_output")["content"][0]["text"];
    CHECK(read.find("later\n") != std::string::npos);
    pipes.close_requests();
    serving.join();
    CHECK(audit.taken() == std::vector<std::string>{"run echo through", "start echo later"});
  }

  SECTION("json_lines_server: a call answered, the audit saw it") {
    host_pipes pipes;
    server::server_options options;
    options.workdir = work.path();
    server::json_lines_server server(executor, options, pipes.server_in(), pipes.server_out());
    std::thread serving([&] { server.serve(); });
    pipes.send({{"id", 1}, {"tool", "bash"}, {"session", "s"}, {"args", {{"command", "echo lines"}, {"description", "d"}}}});
    CHECK(pipes.next([](const json& j) { return j.contains("id") && j["id"] == 1; })["text"] == "lines\n");
    pipes.close_requests();
    serving.join();
    CHECK(audit.taken() == std::vector<std::string>{"run echo lines"});
  }
}

TEST_CASE("at end of input the JSON-lines server answers the calls in flight before serve returns (issue 25)",
          "[server][embedding][eof]") {
  local_executor executor;
  host_pipes pipes;
  server::json_lines_server server(executor, server::server_options{}, pipes.server_in(), pipes.server_out());
  std::thread serving([&] { server.serve(); });
  pipes.send({{"id", 1}, {"tool", "bash"}, {"args", {{"command", "sleep 0.5; echo late"}, {"description", "d"}}}});
  pipes.send({{"id", 2}, {"op", "tools"}});
  pipes.next([](const json& j) { return j.contains("id") && j["id"] == 2; });  // the call was read
  pipes.close_requests();
  const json late = pipes.next([](const json& j) { return j.contains("id") && j["id"] == 1; });
  CHECK(late["text"] == "late\n");  // before: "[aborted]"
  CHECK(late["is_error"] == false);
  serving.join();
  CHECK_FALSE(server.output_lost());
}

namespace {

/// Two slots, and half a second for a response to find a reader.
template <class Options>
Options impatient(Options options) {
  options.max_in_flight = 2;
  options.write_timeout = 500ms;
  return options;
}

/// Ends the host's requests and never reads a response: whether `server`'s
/// `serve` returns on its own within 15 s (else it is stopped, so the test
/// ends either way) and counts its output as lost.
template <class Server>
bool returns_when_the_host_stops_reading(Server& server, host_pipes& pipes) {
  std::atomic<bool> returned{false};
  std::thread serving([&] {
    server.serve();
    returned = true;
  });
  pipes.close_requests();
  const bool on_its_own = test_support::eventually([&] { return returned.load(); }, 15s);
  if (!on_its_own) server.stop();  // the old deadlock, ended: closing writers give up after 2 s
  serving.join();
  return on_its_own && server.output_lost();
}

}  // namespace

TEST_CASE("a host that stops reading cannot hold a server: past write_timeout its answers are dropped and serve returns",
          "[server][embedding][eof]") {
  local_executor executor;
  host_pipes pipes;  // its response end is never read here
  // Answers of 360 KB (60000 NULs as \u0000) against a 64 KiB pipe, more
  // calls than slots: the writers block and the reader waits for a slot.
  const json command = {{"command", "head -c 60000 /dev/zero"}, {"description", "d"}};
  SECTION("a write_timeout that is not positive is refused naming the field") {
    server::server_options options;
    options.write_timeout = 0ms;
    CHECK_THROWS_WITH(server::json_lines_server(executor, options, pipes.server_in(), pipes.server_out()),
                      Catch::Contains("write_timeout"));
  }
  SECTION("json_lines_server") {
    server::json_lines_server server(executor, impatient(server::server_options{}), pipes.server_in(),
                                     pipes.server_out());
    for (int id = 0; id < 6; ++id) pipes.send({{"id", id}, {"tool", "bash"}, {"args", command}});
    CHECK(returns_when_the_host_stops_reading(server, pipes));
  }
  SECTION("mcp_server") {
    server::mcp_server server(executor, impatient(server::mcp_server_options{}), pipes.server_in(),
                              pipes.server_out());
    pipes.send({{"jsonrpc", "2.0"}, {"id", "init"}, {"method", "initialize"},
                {"params", {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()}}}});
    pipes.send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    for (int id = 0; id < 6; ++id)
      pipes.send({{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"},
                  {"params", {{"name", "bash"}, {"arguments", command}}}});
    CHECK(returns_when_the_host_stops_reading(server, pipes));
  }
}

// ---- the MCP server over HTTP -------------------------------------------------

namespace {
namespace over_http {

/// One HTTP/1.1 connection to 127.0.0.1:port, read with a deadline.
class connection {
 public:
  explicit connection(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd_.get() >= 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(port);
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_.get(), reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
  }

  void send(const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::send(fd_.get(), text.data() + done, text.size() - done, MSG_NOSIGNAL);
      REQUIRE(n > 0);
      done += static_cast<std::size_t>(n);
    }
  }

  /// Reads until `until` appears in what was read, the peer closes, or the
  /// deadline; returns everything read so far.
  const std::string& read_until(const std::string& until, std::chrono::milliseconds patience = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (received_.find(until) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buffer[4096];
      const ssize_t n = ::recv(fd_.get(), buffer, sizeof buffer, 0);
      if (n <= 0) break;
      received_.append(buffer, static_cast<std::size_t>(n));
    }
    return received_;
  }

 private:
  detail::unique_fd fd_;
  std::string received_;
};

std::string post(std::uint16_t port, const json& message, const std::optional<std::string>& session) {
  const std::string body = message.dump();
  std::string request = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                        "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n";
  if (session) request += "Mcp-Session-Id: " + *session + "\r\nMCP-Protocol-Version: 2025-11-25\r\n";
  request += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  connection c(port);
  c.send(request);
  return c.read_until("\r\n0\r\n\r\n");  // the end of a chunked SSE answer (or the close)
}

/// The JSON of the first `data:` event in `answer` that has `"id"`.
json response_in(const std::string& answer) {
  std::size_t at = 0;
  while ((at = answer.find("data: ", at)) != std::string::npos) {
    const std::size_t end = answer.find('\n', at);
    const json message = json::parse(answer.substr(at + 6, end - at - 6), nullptr, false);
    if (message.is_object() && message.contains("id")) return message;
    at = end;
  }
  return json();
}

std::string session_of(const std::string& answer) {
  const auto at = answer.find("Mcp-Session-Id: ");
  REQUIRE(at != std::string::npos);
  return answer.substr(at + 16, 32);
}

std::string open_session(std::uint16_t port) {
  const std::string answer = post(
      port,
      {{"jsonrpc", "2.0"}, {"id", 0}, {"method", "initialize"},
       {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()},
                   {"clientInfo", {{"name", "test"}, {"version", "1"}}}}}},
      std::nullopt);
  REQUIRE(answer.starts_with("HTTP/1.1 200"));
  const std::string session = session_of(answer);
  const std::string ready = post(port, {{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, session);
  REQUIRE(ready.starts_with("HTTP/1.1 202"));
  return session;
}

json bash_call(int id, const std::string& command, bool background) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"},
          {"params", {{"name", "bash"},
                      {"arguments", {{"command", command}, {"description", "test"}, {"run_in_background", background}}}}}};
}

/// A server on any free loopback port, served on a thread of its own.
struct running_server {
  explicit running_server(local_executor& executor)
      : server(server::mcp_sessions(executor, {}), server::mcp_http_options{}),
        serving([this] { server.serve(); }) {}
  ~running_server() {
    server.stop();
    if (serving.joinable()) serving.join();
  }
  server::mcp_http_server server;
  std::thread serving;
};

}  // namespace over_http
}  // namespace

TEST_CASE("mcp_http_server refuses options that cannot serve, naming the field", "[http][server]") {
  using namespace over_http;
  local_executor executor;
  const auto sessions = server::mcp_sessions(executor, {});
  const auto refused = [&](server::mcp_http_options options, const std::string& field) {
    try {
      server::mcp_http_server server(sessions, std::move(options));
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).starts_with(field + ":"));
    }
  };
  server::mcp_http_options open;
  open.address = "0.0.0.0";
  refused(open, "token");  // any host that reaches it could run commands
  server::mcp_http_options named;
  named.address = "localhost";
  refused(named, "address");
  server::mcp_http_options relative;
  relative.path = "mcp";
  refused(relative, "path");
  server::mcp_http_options probe;
  probe.path = "/readyz";  // the health probes' own
  refused(probe, "path");
  CHECK_THROWS_AS(server::mcp_http_server(server::http_session_factory{}, {}), std::invalid_argument);
}

TEST_CASE("mcp_http_server serves a session over a socket, and stop ends it and kills its background commands",
          "[http][server]") {
  using namespace over_http;
  local_executor executor;
  std::optional<running_server> running(std::in_place, executor);
  const std::uint16_t port = running->server.port();
  CHECK(running->server.url() == "http://127.0.0.1:" + std::to_string(port) + "/mcp");
  const std::string session = open_session(port);

  const json echoed = response_in(post(port, bash_call(1, "echo over-http", false), session));
  REQUIRE(echoed.contains("result"));
  CHECK(echoed["result"]["content"][0]["text"].get<std::string>().find("over-http") != std::string::npos);

  const json started = response_in(post(port, bash_call(2, "sleep 60", true), session));
  REQUIRE(started["result"]["structuredContent"]["task_id"].is_string());
  const task_id id(started["result"]["structuredContent"]["task_id"].get<std::string>());
  CHECK(executor.get(id).status == task_status::running);

  running.reset();  // stop(), and serve() returned: every session ended
  const auto settled = executor.wait_for(id, 20s);
  REQUIRE(settled);
  CHECK(settled->status == task_status::killed);
}

TEST_CASE("sessions share one executor, and each hears of its own tasks only", "[http][server]") {
  using namespace over_http;
  local_executor executor;
  running_server running(executor);
  const std::uint16_t port = running.server.port();
  const std::string mine = open_session(port);
  const std::string theirs = open_session(port);
  const auto listen = [port](const std::string& session) {
    auto stream = std::make_unique<connection>(port);
    stream->send("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                 "\r\nAccept: text/event-stream\r\nMcp-Session-Id: " + session +
                 "\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n");
    REQUIRE(stream->read_until("retry: ").starts_with("HTTP/1.1 200"));
    return stream;
  };
  auto my_stream = listen(mine);
  auto their_stream = listen(theirs);

  const json started = response_in(post(port, bash_call(1, "echo secret-of-theirs", true), theirs));
  REQUIRE(started["result"]["structuredContent"]["task_id"].is_string());
  const task_id id(started["result"]["structuredContent"]["task_id"].get<std::string>());
  CHECK(their_stream->read_until("notifications/message").find("notifications/message") != std::string::npos);
  // Announced to both at the same moment, had it been: by now it would be here.
  CHECK(my_stream->read_until("notifications/message", 500ms).find("notifications/message") == std::string::npos);

  // The owner fence between them: their task is not mine to read.
  const json read = response_in(post(
      port,
      {{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/call"},
       {"params", {{"name", "bash_output"}, {"arguments", {{"task_id", id.value()}}}}}},
      mine));
  CHECK(read["result"]["isError"] == true);
}

TEST_CASE("a stream resumed past its replay bound is told so, then gets what is kept and its end",
          "[http][server]") {
  using namespace over_http;
  local_executor executor;
  server::mcp_server_options per_session;
  per_session.progress_interval = 20ms;  // many events for a short call
  server::mcp_http_options http;
  http.replay_events = 3;
  server::mcp_http_server served(server::mcp_sessions(executor, per_session), http);
  std::thread serving([&] { served.serve(); });
  const std::uint16_t port = served.port();
  const std::string session = open_session(port);

  json call = bash_call(7, "sleep 1; echo finished-after-the-drop", false);
  call["params"]["_meta"] = {{"progressToken", "p"}};
  const std::string body = call.dump();
  std::string stream_id;
  {
    connection dropped(port);
    dropped.send("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                 "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                 "Mcp-Session-Id: " + session + "\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: " +
                 std::to_string(body.size()) + "\r\n\r\n" + body);
    const std::string& first = dropped.read_until(".0\n");
    const auto at = first.find("id: ");
    REQUIRE(at != std::string::npos);
    stream_id = first.substr(at + 4, first.find(".0\n", at) - at - 4);
  }  // the connection drops after the priming event; the call runs on
  // Its progress overflows the three events kept while nobody reads.
  std::this_thread::sleep_for(1500ms);
  connection resumed(port);
  resumed.send("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
               "\r\nAccept: text/event-stream\r\nMcp-Session-Id: " + session +
               "\r\nMCP-Protocol-Version: 2025-11-25\r\nLast-Event-ID: " + stream_id + ".0\r\n\r\n");
  const std::string& got = resumed.read_until("\r\n0\r\n\r\n");
  CHECK(got.starts_with("HTTP/1.1 200"));
  const auto warned = got.find("were dropped from the replay buffer");
  const auto answered = got.find("finished-after-the-drop");
  CHECK(warned != std::string::npos);
  CHECK(answered != std::string::npos);
  CHECK(warned < answered);  // said first, then what is kept
  served.stop();
  serving.join();
}

TEST_CASE("requests POSTed at once on many connections each reach the session whole and are answered",
          "[http][server]") {
  using namespace over_http;
  local_executor executor;
  running_server running(executor);
  const std::uint16_t port = running.server.port();
  const std::string session = open_session(port);
  // Each connection sends all its requests at once (pipelined), and all
  // connections start together: many messages for the session arrive in
  // the same turn of the server's loop, and each must reach it once.
  constexpr int clients = 16;
  constexpr int each = 25;
  std::vector<std::unique_ptr<connection>> connections;
  std::vector<std::string> batches(clients);
  for (int c = 0; c < clients; ++c) {
    connections.push_back(std::make_unique<connection>(port));
    for (int i = 0; i < each; ++i) {
      const std::string body = json{{"jsonrpc", "2.0"}, {"id", 1000 + c * each + i}, {"method", "ping"}}.dump();
      batches[c] += "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                    "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                    "Mcp-Session-Id: " + session + "\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body;
    }
  }
  for (int c = 0; c < clients; ++c) connections[c]->send(batches[c]);
  int answered = 0;
  for (int c = 0; c < clients; ++c) {
    const std::string last = "\"id\":" + std::to_string(1000 + c * each + each - 1) + ",";
    const std::string& got = connections[c]->read_until(last);
    for (int i = 0; i < each; ++i)
      if (got.find("\"id\":" + std::to_string(1000 + c * each + i) + ",\"jsonrpc\":\"2.0\",\"result\":{}") !=
          std::string::npos)
        ++answered;
  }
  CHECK(answered == clients * each);
}

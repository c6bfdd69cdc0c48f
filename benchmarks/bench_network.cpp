// bench_network: what network by name costs (issue 28; docs/network.md).
// Every figure is a ratio to a floor measured in the same iterations:
//
//   network/true/<backend>:read-only[,20ms_apart|,1s_apart]
//       run("true") with sandbox.network = allowlist (the egress namespace
//       step, the listener handed back, a proxy opened and closed per call)
//       against the same backend with network = none, rotating with the raw
//       posix_spawn floor. `ratio` = allowlist / none (target <= 1.15).
//       Spaced like bench_spawn's cases (issue 27): read the spaced rows.
//   network/download/<subject>
//       1 GiB (BASHEXEC_BENCH_SCALE divides it) from a server on a "remote
//       host" (below) read by curl to /dev/null. Subject: `<backend>` — a
//       command under allowlist through a CONNECT tunnel of the executor's
//       proxy (curl --proxytunnel to the host's name); `proxy_alone` — the
//       same egress_proxy on a loopback listener of the benchmark's, curl
//       spawned raw in the host's namespace (no sandbox, no executor).
//       Floor: the same curl, raw, straight to the remote address.
//       `ratio` = subject throughput / floor throughput (target >= 0.9).
//   network/first_byte/<subject>
//       Time to the first byte of a tiny response. `<backend>`: curl's
//       time_starttransfer for a GET through HTTP_PROXY inside a command
//       under allowlist, against the same curl loop run raw straight to the
//       remote address (only the requests are timed, not the spawns).
//       `proxy_alone`: timed here, a socket that connects, sends the request
//       and reads the first byte, through an egress_proxy on a loopback
//       listener against straight to the server. `ratio` = proxied / direct.
//
// The remote host is a network namespace joined to the host's by a veth
// pair (as tests/remote_host_support.hpp, without Catch2) with one python3
// server in it: a port that answers any request with the bulk body of zeros,
// and one that answers with a 27-byte file. No packet goes to an address
// outside the namespaces made here. Needs root; every case skips otherwise.
#include <bashexec/basic_executor.hpp>
#include <bashexec/confinement/bwrap.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/detail/trust/find_program.hpp>
#include <bashexec/network/egress_proxy.hpp>
#include <bashexec/spawn/fork_exec.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "bench_common.hpp"

namespace bench {
namespace {

using namespace std::chrono_literals;

using bwrap_executor = bashexec::basic_executor<
    bashexec::policies<bashexec::spawn_with<bashexec::fork_exec>, bashexec::confine_with<bashexec::bwrap>>>;
using landlock_executor = bashexec::basic_executor<
    bashexec::policies<bashexec::spawn_with<bashexec::fork_exec>, bashexec::confine_with<bashexec::landlock>>>;

constexpr std::uint16_t bulk_port = 9000;
constexpr std::uint16_t tiny_port = 8080;
constexpr std::string_view tiny_body = "hello from the remote host\n";

/// Why nothing here can run; empty when it can.
std::optional<std::string> host_unavailable() {
  if (::geteuid() != 0) return "needs root (a network namespace and a veth pair for the remote host)";
  if (::access("/usr/sbin/ip", X_OK) != 0) return "iproute2's ip is not installed";
  if (::access("/usr/bin/python3", X_OK) != 0) return "/usr/bin/python3 (the remote host's server) is missing";
  if (::access("/usr/bin/curl", X_OK) != 0) return "/usr/bin/curl (the reader) is missing";
  return std::nullopt;
}

/// Why `Executor`'s backend cannot confine the network here; empty when it can.
template <class Executor>
std::optional<std::string> backend_missing() {
  if constexpr (std::is_same_v<typename Executor::confinement_type, bashexec::bwrap>) {
    auto program = bashexec::detail::find_program("bwrap");
    if (!program) return "bwrap is not installed";
    const std::string probe =
        program->string() + " --ro-bind / / --dev /dev --proc /proc --unshare-net true >/dev/null 2>&1";
    if (std::system(probe.c_str()) != 0) return "bwrap cannot create a sandbox here";
  } else {
    const int abi = bashexec::landlock::abi();
    if (abi < 0) return fmt::format("Landlock is not available: {}", std::strerror(-abi));
    if (!bashexec::landlock::network_level(abi)) return "Landlock cannot confine the network here";
  }
  return std::nullopt;
}

template <class Executor>
constexpr const char* backend_name() {
  return std::is_same_v<typename Executor::confinement_type, bashexec::bwrap> ? "bwrap" : "landlock";
}

/// The remote host: a namespace, a veth pair, one server process. The
/// destructor (and a constructor that fails half-way) removes all three.
class remote_host {
 public:
  explicit remote_host(std::uint64_t bulk_bytes) {
    const long id = static_cast<long>(::getpid());
    subnet_ = std::to_string(20 + id % 200);
    namespace_ = "bxbn" + std::to_string(id);
    host_end_ = "bxbh" + std::to_string(id);
    remote_end_ = "bxbr" + std::to_string(id);
    dir_ = scratch_dir() / ("bashexec-bench-remote-" + std::to_string(id));
    try {
      std::filesystem::create_directories(dir_);
      std::ofstream(dir_ / "server.py") << server_script;
      run(fmt::format(
          "ip netns add {ns} && ip link add {h} type veth peer name {r} && ip link set {r} netns {ns} && "
          "ip addr add {p}1/24 dev {h} && ip link set {h} up && ip -n {ns} addr add {p}2/24 dev {r} && "
          "ip -n {ns} link set {r} up && ip -n {ns} link set lo up",
          fmt::arg("ns", namespace_), fmt::arg("h", host_end_), fmt::arg("r", remote_end_), fmt::arg("p", prefix())));
      run(fmt::format("ip netns exec {} /usr/bin/python3 {} {} {} {} {} {} </dev/null >/dev/null 2>{} &", namespace_,
                      (dir_ / "server.py").string(), address(), bulk_port, tiny_port, bulk_bytes,
                      (dir_ / "pid").string(), (dir_ / "server.err").string()));
      for (std::uint16_t port : {bulk_port, tiny_port})
        if (!wait_listening(port)) throw std::runtime_error(fmt::format("the remote server never listened on {}", port));
    } catch (...) {
      clean_up();
      throw;
    }
  }
  remote_host(const remote_host&) = delete;
  remote_host& operator=(const remote_host&) = delete;
  ~remote_host() { clean_up(); }

  std::string address() const { return prefix() + "2"; }
  std::string range() const { return prefix() + "0/24"; }

 private:
  static constexpr const char* server_script = R"(import os, socket, sys, threading
address, bulk_port, tiny_port, bulk_bytes, pidfile = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
block = memoryview(bytes(1 << 20))
tiny = b"hello from the remote host\n"
def header(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return False
        data += chunk
    return True
def bulk(conn):
    with conn:
        if not header(conn):
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % bulk_bytes)
        left = bulk_bytes
        while left > 0:
            n = min(left, len(block))
            conn.sendall(block[:n])
            left -= n
def listener(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((address, port))
    s.listen(128)
    return s
def serve_bulk(s):
    while True:
        conn, _ = s.accept()
        threading.Thread(target=bulk, args=(conn,), daemon=True).start()
bulk_listener, tiny_listener = listener(bulk_port), listener(tiny_port)
threading.Thread(target=serve_bulk, args=(bulk_listener,), daemon=True).start()
with open(pidfile, "w") as f:
    f.write(str(os.getpid()))
while True:  # tiny answers inline: no thread start on the measured path
    conn, _ = tiny_listener.accept()
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if header(conn):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(tiny), tiny))
)";

  std::string prefix() const { return "10.204." + subnet_ + "."; }

  static void run(const std::string& command) {
    if (std::system(command.c_str()) != 0) throw std::runtime_error("remote host: failed: " + command);
  }

  void clean_up() noexcept {
    const std::string command =
        fmt::format("f={}; [ -s \"$f\" ] && kill \"$(cat \"$f\")\" 2>/dev/null; ip link del {} 2>/dev/null; "
                    "ip netns del {} 2>/dev/null; true",
                    (dir_ / "pid").string(), host_end_, namespace_);
    [[maybe_unused]] int ignored_status = std::system(command.c_str());
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  bool wait_listening(std::uint16_t port) const {
    for (int attempt = 0; attempt < 100; ++attempt) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in target{};
      target.sin_family = AF_INET;
      target.sin_port = htons(port);
      ::inet_pton(AF_INET, address().c_str(), &target.sin_addr);
      const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof target) == 0;
      ::close(fd);
      if (up) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  std::string subnet_, namespace_, host_end_, remote_end_;
  std::filesystem::path dir_;
};

/// The policy every case uses: the remote host by two names, its /24 ranged,
/// nothing through the machine's resolver.
bashexec::network_policy remote_policy(const remote_host& remote) {
  bashexec::network_policy policy;
  policy.allowed_domains = {"bulk.test", "files.test"};
  policy.allowed_ranges = {remote.range()};
  policy.host_map = {{"bulk.test", remote.address()}, {"files.test", remote.address()}};
  policy.system_dns = false;
  return policy;
}

/// An empty directory outside /tmp (workspace-write grants or replaces
/// /tmp), removed with the object.
class workspace {
 public:
  workspace() {
    std::string pattern = "/var/tmp/bashexec-bench-network-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) fail("mkdtemp");
    path_ = pattern;
  }
  workspace(const workspace&) = delete;
  workspace& operator=(const workspace&) = delete;
  ~workspace() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

bashexec::executor_config base_config(const workspace& ws, bashexec::network_access network,
                                      const bashexec::network_policy& policy) {
  bashexec::executor_config config;
  config.cwd = ws.path();
  config.sandbox.workspace_root = ws.path();
  config.sandbox.network = network;
  if (network == bashexec::network_access::allowlist) {
    config.sandbox.egress = policy;
    config.sandbox.gateway = std::make_shared<bashexec::network::asio_egress_gateway>();
  }
  return config;
}

template <class Executor>
bashexec::exec_spec spec_for(Executor& executor, std::string command) {
  bashexec::exec_request request;
  request.command = std::move(command);
  request.mode = bashexec::sandbox_mode::read_only;
  request.timeout = std::chrono::seconds(300);
  return executor.resolve(std::move(request));
}

/// Runs `spec`, which must exit 0; returns its stdout and the seconds it took.
template <class Executor>
std::pair<std::string, double> run_checked(Executor& executor, const bashexec::exec_spec& spec) {
  const auto start = clock::now();
  auto result = executor.run(spec);
  const double elapsed = seconds_since(start);
  if (result.exit_code != 0)
    throw std::runtime_error(fmt::format("`{}` failed: exit {}, stderr {}", spec.command, result.exit_code.value_or(-1),
                                         result.err.text));
  return {std::move(result.out.text), elapsed};
}

/// Runs `bash -c command` raw (no executor), stdout captured; must exit 0.
std::pair<std::string, double> raw_checked(const std::string& command) {
  const auto start = clock::now();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) fail("pipe2");
  const pid_t pid = raw_spawn(command, fds[1]);
  ::close(fds[1]);
  std::string out;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(fds[0]);
  const int status = raw_wait(pid);
  const double elapsed = seconds_since(start);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error(fmt::format("`{}` failed: status {:#x}", command, status));
  return {std::move(out), elapsed};
}

double raw_true() {
  const auto start = clock::now();
  const int status = raw_wait(raw_spawn("true", -1));
  const double elapsed = seconds_since(start);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("raw bash -c true failed");
  return elapsed;
}

/// A listening socket on 127.0.0.1, port chosen by the kernel, for a proxy
/// the benchmark serves itself in the host's namespace.
std::pair<bashexec::unique_fd, std::uint16_t> loopback_listener() {
  bashexec::unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) fail("socket");
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) fail("bind");
  if (::listen(fd.get(), 128) != 0) fail("listen");
  socklen_t size = sizeof local;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &size) != 0) fail("getsockname");
  return {std::move(fd), ntohs(local.sin_port)};
}

// --- 1. run("true"): allowlist against none -----------------------------------------

template <std::size_t N>
struct rotation_totals {
  std::array<double, N> seconds{};
  std::uint64_t calls = 0;
  double mean_us(std::size_t i) const { return seconds[i] / static_cast<double>(calls) * 1e6; }
};

/// bench_spawn's rotation: each measurement once per iteration, starting one
/// further along each time; `subject`'s time is the iteration's.
template <std::size_t N>
rotation_totals<N> rotate(benchmark::State& state, std::size_t subject,
                          const std::array<std::function<double()>, N>& measures) {
  rotation_totals<N> totals;
  unsigned rotation = 0;
  for (auto _ : state) {
    std::array<double, N> took{};
    const std::size_t first = rotation++ % N;
    for (std::size_t k = 0; k < N; ++k) {
      const std::size_t i = (first + k) % N;
      took[i] = measures[i]();
    }
    for (std::size_t i = 0; i < N; ++i) totals.seconds[i] += took[i];
    ++totals.calls;
    state.SetIterationTime(took[subject]);
  }
  return totals;
}

template <class Measure>
std::function<double()> after_idle(std::chrono::milliseconds gap, Measure measure) {
  return [gap, measure] {
    if (gap.count() > 0) std::this_thread::sleep_for(gap);
    return measure();
  };
}

template <class Executor>
void true_case(benchmark::State& state, std::chrono::milliseconds gap) {
  if (auto reason = host_unavailable()) return state.SkipWithError(reason->c_str());
  if (auto reason = backend_missing<Executor>()) return state.SkipWithError(reason->c_str());
  rotation_totals<3> totals;
  try {
    const workspace ws;
    // No remote host is needed: `true` opens no connection. The policy is
    // the same shape the other cases use.
    bashexec::network_policy policy;
    policy.allowed_domains = {"files.test"};
    policy.host_map = {{"files.test", "10.204.0.2"}};
    policy.allowed_ranges = {"10.204.0.0/24"};
    policy.system_dns = false;
    Executor none(base_config(ws, bashexec::network_access::none, policy));
    Executor allowlist(base_config(ws, bashexec::network_access::allowlist, policy));
    const auto none_spec = spec_for(none, "true");
    const auto allowlist_spec = spec_for(allowlist, "true");
    run_checked(none, none_spec);  // warm-up
    run_checked(allowlist, allowlist_spec);
    raw_true();
    totals = rotate<3>(state, 2,
                       {after_idle(gap, [] { return raw_true(); }),
                        after_idle(gap, [&] { return run_checked(none, none_spec).second; }),
                        after_idle(gap, [&] { return run_checked(allowlist, allowlist_spec).second; })});
  } catch (const std::exception& e) {
    return state.SkipWithError(e.what());
  }
  state.counters["us"] = totals.mean_us(2);
  state.counters["floor_us"] = totals.mean_us(1);  // network = none, same backend
  state.counters["raw_us"] = totals.mean_us(0);
  state.counters["ratio"] = totals.seconds[2] / totals.seconds[1];
  state.counters["ratio_raw"] = totals.seconds[2] / totals.seconds[0];
}

// --- 2. a 1 GiB download through a CONNECT tunnel ------------------------------

std::uint64_t bulk_bytes() { return stream_bytes(stream::zeros); }

/// curl reading the bulk body to /dev/null; prints the bytes it read.
std::string curl_bulk(const std::string& options, const std::string& url) {
  return fmt::format("/usr/bin/curl -sS --fail --max-time 240 {} -o /dev/null -w '%{{size_download}}' {}", options,
                     url);
}

void check_size(const std::string& printed, std::uint64_t bytes) {
  if (printed != std::to_string(bytes))
    throw std::runtime_error(fmt::format("curl read {} bytes, not {}", printed, bytes));
}

/// The floor of every download and first-byte case: the same curl, raw, in
/// the host's namespace, straight to the remote address.
std::function<double()> direct_download(const remote_host& remote) {
  const std::string command =
      curl_bulk("--noproxy '*'", fmt::format("http://{}:{}/zeros", remote.address(), bulk_port));
  return [command] {
    auto [printed, seconds] = raw_checked(command);
    check_size(printed, bulk_bytes());
    return seconds;
  };
}

void report_download(benchmark::State& state, const paired_totals& totals) {
  report_throughput(state, totals, bulk_bytes());
  if (totals.pairs == 0) return;
  state.counters["floor_seconds"] = totals.floor_seconds / static_cast<double>(totals.pairs);
  state.counters["seconds"] = totals.subject_seconds / static_cast<double>(totals.pairs);
}

template <class Executor>
void download_case(benchmark::State& state) {
  if (auto reason = host_unavailable()) return state.SkipWithError(reason->c_str());
  if (auto reason = backend_missing<Executor>()) return state.SkipWithError(reason->c_str());
  paired_totals totals;
  try {
    const remote_host remote(bulk_bytes());
    const workspace ws;
    Executor executor(base_config(ws, bashexec::network_access::allowlist, remote_policy(remote)));
    const auto spec = spec_for(
        executor, curl_bulk("--proxytunnel -x \"$HTTPS_PROXY\"", fmt::format("http://bulk.test:{}/zeros", bulk_port)));
    const auto direct = direct_download(remote);
    auto subject = [&] {
      const auto start = clock::now();
      auto result = executor.run(spec);
      const double elapsed = seconds_since(start);
      if (result.exit_code != 0)
        throw std::runtime_error(fmt::format("download under allowlist: exit {}, stderr {}",
                                             result.exit_code.value_or(-1), result.err.text));
      check_size(result.out.text, bulk_bytes());
      // Proof the bytes came through the tunnel: one allowed CONNECT carried them.
      if (!result.network || result.network->attempts.size() != 1 ||
          result.network->attempts[0].method != "CONNECT" ||
          result.network->attempts[0].bytes_down < bulk_bytes())
        throw std::runtime_error("the download did not go through one CONNECT tunnel of the proxy");
      return elapsed;
    };
    run_paired(state, direct, subject, totals);
  } catch (const std::exception& e) {
    return state.SkipWithError(e.what());
  }
  report_download(state, totals);
}

void download_proxy_alone_case(benchmark::State& state) {
  if (auto reason = host_unavailable()) return state.SkipWithError(reason->c_str());
  paired_totals totals;
  try {
    const remote_host remote(bulk_bytes());
    auto [listener, port] = loopback_listener();
    bashexec::network::egress_proxy proxy(std::move(listener), remote_policy(remote));
    const std::string command = curl_bulk(fmt::format("--noproxy '' --proxytunnel -x http://127.0.0.1:{}", port),
                                          fmt::format("http://bulk.test:{}/zeros", bulk_port));
    const auto direct = direct_download(remote);
    auto subject = [&] {
      auto [printed, seconds] = raw_checked(command);
      check_size(printed, bulk_bytes());
      return seconds;
    };
    run_paired(state, direct, subject, totals);
    const auto report = proxy.snapshot();
    if (report.attempts.empty() || report.attempts.back().method != "CONNECT")
      throw std::runtime_error("the proxy saw no CONNECT");
  } catch (const std::exception& e) {
    return state.SkipWithError(e.what());
  }
  report_download(state, totals);
}

// --- 3. first byte of a tiny response ------------------------------------------

constexpr int requests_per_command = 20;

/// A bash loop of curl GETs printing time_starttransfer (seconds) per request.
std::string curl_first_byte_loop(const std::string& options, const std::string& url) {
  return fmt::format(
      "for i in $(seq {}); do /usr/bin/curl -sS --fail --max-time 10 {} -o /dev/null -w '%{{time_starttransfer}}\\n' "
      "{} || exit 1; done",
      requests_per_command, options, url);
}

/// The sum of the loop's printed times.
double summed_times(const std::string& printed) {
  std::istringstream in(printed);
  double sum = 0, value = 0;
  int count = 0;
  while (in >> value) {
    sum += value;
    ++count;
  }
  if (count != requests_per_command) throw std::runtime_error("curl printed an unexpected timing list: " + printed);
  return sum;
}

template <class Executor>
void first_byte_case(benchmark::State& state) {
  if (auto reason = host_unavailable()) return state.SkipWithError(reason->c_str());
  if (auto reason = backend_missing<Executor>()) return state.SkipWithError(reason->c_str());
  paired_totals totals;
  try {
    const remote_host remote(bulk_bytes());
    const workspace ws;
    Executor executor(base_config(ws, bashexec::network_access::allowlist, remote_policy(remote)));
    // Plain HTTP through HTTP_PROXY (curl reads http_proxy, which is set too).
    const auto spec = spec_for(executor, curl_first_byte_loop("", fmt::format("http://files.test:{}/tiny.txt", tiny_port)));
    const std::string direct_command = curl_first_byte_loop(
        "--noproxy '*'", fmt::format("http://{}:{}/tiny.txt", remote.address(), tiny_port));
    auto subject = [&] { return summed_times(run_checked(executor, spec).first) / requests_per_command; };
    auto direct = [&] { return summed_times(raw_checked(direct_command).first) / requests_per_command; };
    subject();  // warm-up: curl and its libraries in the page cache
    direct();
    run_paired(state, direct, subject, totals);
  } catch (const std::exception& e) {
    return state.SkipWithError(e.what());
  }
  report_latency(state, totals);
}

/// Connects to `to`, sends `request`, reads the first byte of the answer
/// (timed), then the rest to EOF (untimed). Returns the seconds to the first byte.
double first_byte(const sockaddr_in& to, const std::string& request) {
  bashexec::unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) fail("socket");
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const auto start = clock::now();
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) fail("connect");
  if (::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size()))
    fail("send");
  char buffer[4096];
  ssize_t n = ::recv(fd.get(), buffer, sizeof buffer, 0);
  const double elapsed = seconds_since(start);
  if (n <= 0) fail("recv (first byte)");
  std::string answer(buffer, static_cast<std::size_t>(n));
  while ((n = ::recv(fd.get(), buffer, sizeof buffer, 0)) > 0) answer.append(buffer, static_cast<std::size_t>(n));
  if (!answer.starts_with("HTTP/1.1 200") || !answer.ends_with(tiny_body))
    throw std::runtime_error("unexpected answer: " + answer.substr(0, 200));
  return elapsed;
}

void first_byte_proxy_alone_case(benchmark::State& state) {
  if (auto reason = host_unavailable()) return state.SkipWithError(reason->c_str());
  paired_totals totals;
  try {
    const remote_host remote(bulk_bytes());
    auto [listener, port] = loopback_listener();
    bashexec::network::egress_proxy proxy(std::move(listener), remote_policy(remote));
    sockaddr_in to_proxy{}, to_server{};
    to_proxy.sin_family = to_server.sin_family = AF_INET;
    to_proxy.sin_port = htons(port);
    to_proxy.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to_server.sin_port = htons(tiny_port);
    ::inet_pton(AF_INET, remote.address().c_str(), &to_server.sin_addr);
    const std::string proxied = fmt::format(
        "GET http://files.test:{0}/tiny.txt HTTP/1.1\r\nHost: files.test:{0}\r\nConnection: close\r\n\r\n", tiny_port);
    const std::string direct = fmt::format(
        "GET /tiny.txt HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\n\r\n", remote.address(), tiny_port);
    first_byte(to_proxy, proxied);
    first_byte(to_server, direct);
    run_paired(state, [&] { return first_byte(to_server, direct); }, [&] { return first_byte(to_proxy, proxied); },
               totals);
  } catch (const std::exception& e) {
    return state.SkipWithError(e.what());
  }
  report_latency(state, totals);
}

// --- registration ------------------------------------------------------------------

template <class Executor>
void add_true(const std::string& name) {
  struct spacing {
    const char* suffix;
    std::chrono::milliseconds gap;
    int iterations;
  };
  const spacing spacings[] = {{"", 0ms, 60}, {",20ms_apart", 20ms, 30}, {",1s_apart", 1000ms, 6}};
  for (const auto& spaced : spacings)
    benchmark::RegisterBenchmark(fmt::format("{}{}", name, spaced.suffix).c_str(), true_case<Executor>, spaced.gap)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(spaced.iterations);
}

// bench_main.cpp calls each file's register function; this file registers
// itself at static initialisation (before main runs Initialize), so it needs
// no line there.
[[maybe_unused]] const bool registered = [] {
  // Each timed by hand (UseManualTime): `unit` and a fixed iteration count.
  const auto add_manual = [](const char* name, auto function, benchmark::TimeUnit unit, int iterations) {
    benchmark::RegisterBenchmark(name, function)->UseManualTime()->Unit(unit)->Iterations(iterations);
  };
  add_true<bwrap_executor>("network/true/bwrap:read-only");
  add_true<landlock_executor>("network/true/landlock:read-only");
  add_manual("network/download/bwrap:read-only", download_case<bwrap_executor>, benchmark::kMillisecond, 3);
  add_manual("network/download/landlock:read-only", download_case<landlock_executor>, benchmark::kMillisecond, 3);
  add_manual("network/download/proxy_alone", download_proxy_alone_case, benchmark::kMillisecond, 3);
  add_manual("network/first_byte/landlock:read-only", first_byte_case<landlock_executor>, benchmark::kMicrosecond, 10);
  add_manual("network/first_byte/bwrap:read-only", first_byte_case<bwrap_executor>, benchmark::kMicrosecond, 10);
  add_manual("network/first_byte/proxy_alone", first_byte_proxy_alone_case, benchmark::kMicrosecond, 500);
  return true;
}();

}  // namespace
}  // namespace bench

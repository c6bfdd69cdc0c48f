// Network confinement (docs/contract.md "Beyond": an optional network knob,
// orthogonal to the file modes): `sandbox.network` = full | loopback | none,
// applied to every confined call and never to danger-full-access. Each backend
// is driven through basic_executor against listeners this test process opens
// on the host's 127.0.0.1, and the host side is checked independently of what
// the command prints (a connection in the accept queue, a datagram received).
// A capability the machine lacks makes a test WARN "skipped: …" and return.

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <bashexec/basic_executor.hpp>
#include <bashexec/confinement/bwrap.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/confinement/runner_command.hpp>
#include <bashexec/network_access.hpp>
#include <bashexec/sandbox_executor.hpp>
#include <bashexec/spawn/fork_exec.hpp>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "executor_test_support.hpp"
#include "sandbox_test_support.hpp"

namespace fs = std::filesystem;
using namespace bashexec;
using namespace test_support;

namespace {

/// A system python3 (not a pyenv shim that may want to write), if any.
std::optional<fs::path> python3() {
  if (detail::is_executable_file("/usr/bin/python3")) return fs::path("/usr/bin/python3");
  return detail::find_program("python3");
}

/// A non-blocking IPv4 socket of the host bound to 127.0.0.1 on an ephemeral
/// port: a TCP listener or a UDP receiver.
class host_socket {
 public:
  explicit host_socket(int type) : fd_(::socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    if (type == SOCK_STREAM) REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  host_socket(const host_socket&) = delete;
  host_socket& operator=(const host_socket&) = delete;
  ~host_socket() { ::close(fd_); }

  int port() const { return port_; }
  std::string port_text() const { return std::to_string(port_); }

  /// TCP: whether a connection completed since the last call (taken from the
  /// accept queue; the client may have closed it already).
  bool accepted() const {
    int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) return false;
    ::close(conn);
    return true;
  }
  /// UDP: whether a datagram arrived since the last call.
  bool received() const {
    char buffer[64];
    bool any = false;
    while (::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT) >= 0) any = true;
    return any;
  }

 private:
  int fd_;
  int port_ = 0;
};

/// A workspace outside /tmp (workspace-write grants or replaces /tmp).
struct workspace {
  temp_dir dir{"/var/tmp", "bashexec-net-"};
};

executor_config net_config(network_access network, const workspace& ws) {
  executor_config config = fast_config();
  config.sandbox.network = network;
  config.sandbox.workspace_root = ws.dir.path();
  config.cwd = ws.dir.path();
  return config;
}

exec_request command(std::string text, std::map<std::string, std::string> env = {},
                     std::optional<sandbox_mode> mode = std::nullopt) {
  exec_request request;
  request.command = std::move(text);
  request.env = std::move(env);
  request.mode = mode;
  return request;
}

constexpr const char* tcp_connect = "exec 3<>/dev/tcp/127.0.0.1/$PORT && echo connected";

/// `read` the shell's process group from /proc (the group leader may be bwrap).

}  // namespace

// ---------------------------------------------------------------------------
// Vocabulary and profile arguments

TEST_CASE("network_access: spellings round-trip, unknown ones are rejected naming the field, full is the default",
          "[network][vocabulary]") {
  for (auto access : network_accesses) CHECK(parse_network_access(to_string(access)) == access);
  CHECK(to_string(network_access::loopback) == "loopback");
  CHECK(fmt::format("{}", network_access::none) == "none");
  CHECK_FALSE(parse_network_access("off"));
  CHECK_FALSE(parse_network_access("None"));
  CHECK(network_access_from("none", "sandbox.network") == network_access::none);
  try {
    network_access_from("offline", "sandbox.network");
    FAIL("accepted");
  } catch (const std::invalid_argument& error) {
    CHECK_THAT(std::string(error.what()), Catch::Contains("sandbox.network") && Catch::Contains("offline"));
  }
  CHECK(executor_config{}.sandbox.network == network_access::full);
  CHECK_FALSE(confines_network(network_access::full));
  CHECK(confines_network(network_access::loopback));
  CHECK(confines_network(network_access::none));
}

TEST_CASE("network: the bwrap profile (shared with runner_command) ends with --unshare-net for loopback and none only",
          "[network][bwrap][runner_command]") {
  using V = std::vector<std::string>;
  const V base{"--ro-bind", "/",     "/",          "--dev", "/dev",
               "--unshare-pid", "--proc", "/proc", "--cap-drop", "ALL", "--die-with-parent"};
  CHECK(detail::bwrap_profile_args(sandbox_mode::read_only, "/ws", {}, network_access::full) == base);
  CHECK(detail::bwrap_profile_args(sandbox_mode::read_only, "/ws") == base);
  for (auto access : {network_access::loopback, network_access::none}) {
    INFO("network " << to_string(access));
    V expected = base;
    expected.push_back("--unshare-net");
    CHECK(detail::bwrap_profile_args(sandbox_mode::read_only, "/ws", {}, access) == expected);
    const V ws = detail::bwrap_profile_args(sandbox_mode::workspace_write, "/ws", {}, access);
    REQUIRE_FALSE(ws.empty());
    CHECK(ws.back() == "--unshare-net");
    CHECK(std::count(ws.begin(), ws.end(), "--bind") == 1);

    sandbox_config shared;
    shared.network = access;
    runner_command runner(shared, {.argv = {"/bin/true", "--flag"}, .failure_signatures = {"runner: "}});
    launch_plan plan;
    plan.argv = {"/bin/bash", "-c", "true"};
    runner.prepare(sandbox_mode::read_only, "/ws", plan);
    const auto separator = std::find(plan.argv.begin(), plan.argv.end(), "--");
    REQUIRE(separator != plan.argv.end());
    CHECK(std::find(plan.argv.begin(), separator, "--unshare-net") != separator);
  }
  launch_plan plan;
  plan.argv = {"/bin/bash", "-c", "true"};
  runner_command(sandbox_config{}, {.argv = {"/bin/true"}, .failure_signatures = {"runner: "}}).prepare(sandbox_mode::read_only, "/ws", plan);
  CHECK(std::find(plan.argv.begin(), plan.argv.end(), "--unshare-net") == plan.argv.end());
}

TEST_CASE("network: Landlock's network level is full wherever the seccomp filter exists, partial on TCP rights alone",
          "[network][landlock]") {
  if (detail::seccomp_filter_supported) {
    for (int abi : {1, 3, 4, 7}) CHECK(landlock::network_level(abi) == enforcement::full);
  } else {
    CHECK_FALSE(landlock::network_level(3));
    CHECK(landlock::network_level(4) == enforcement::partial);
  }
}

// ---------------------------------------------------------------------------
// Through the executor, for each backend

TEMPLATE_TEST_CASE("network full (the default): a confined command reaches a listener on the host's 127.0.0.1",
                   "[network][executor]",
                   bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>(true));
  workspace ws;
  host_socket listener(SOCK_STREAM);
  executor_config config = net_config(network_access::full, ws);
  TestType exec(config);
  for (auto mode : confined_modes)
    for (via how : both_ways) {
      INFO(to_string(mode) << " via " << name_of(how));
      observed seen = observe(exec, command(tcp_connect, {{"PORT", listener.port_text()}}, mode), how);
      CHECK(seen.exit_code == 0);
      CHECK_THAT(seen.text, Catch::Contains("connected"));
      CHECK(listener.accepted());
      REQUIRE(seen.sandbox);
      CHECK(seen.sandbox->mode == mode);
      CHECK(seen.sandbox->level == expected_level<TestType>(mode, network_access::full));
    }
}

TEMPLATE_TEST_CASE(
    "network none: a confined command cannot reach the host's TCP listener — the failure is a plain non-zero exit, "
    "neither a file denial nor a runner failure, and the level stays honest",
    "[network][executor]", bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>(true));
  workspace ws;
  host_socket listener(SOCK_STREAM);
  TestType exec(net_config(network_access::none, ws));
  for (auto mode : confined_modes)
    for (via how : both_ways) {
      INFO(to_string(mode) << " via " << name_of(how));
      observed seen = observe(exec, command(tcp_connect, {{"PORT", listener.port_text()}}, mode), how);
      INFO(seen.text);
      CHECK(seen.exit_code.has_value());
      CHECK(seen.exit_code != 0);
      CHECK_THAT(seen.text, !Catch::Contains("connected"));
      CHECK_FALSE(listener.accepted());
      REQUIRE(seen.sandbox);
      CHECK(seen.sandbox->mode == mode);
      CHECK_FALSE(seen.sandbox->denied);
      CHECK_FALSE(seen.sandbox->runner_failed);
      CHECK(seen.sandbox->level == expected_level<TestType>(mode, network_access::none));
      // The file mode itself still holds alongside the network setting.
      observed write = observe(exec, command("echo x > \"$PWD/probe\""), how);
      REQUIRE(write.sandbox);
      CHECK(write.sandbox->mode == sandbox_mode::read_only);
      CHECK(write.sandbox->denied);
    }
}

TEMPLATE_TEST_CASE("network none: a UDP datagram never reaches the host (control: it does under full)",
                   "[network][executor]",
                   bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>(true));
  workspace ws;
  host_socket receiver(SOCK_DGRAM);
  const std::map<std::string, std::string> env{{"PORT", receiver.port_text()}};
  const std::string send = "for i in 1 2 3; do echo hi > /dev/udp/127.0.0.1/$PORT; done";
  {
    TestType open_exec(net_config(network_access::full, ws));
    observed seen = observe(open_exec, command(send, env), via::run);
    CHECK(seen.exit_code == 0);
    CHECK(eventually([&] { return receiver.received(); }, 2s));
  }
  TestType exec(net_config(network_access::none, ws));
  observed seen = observe(exec, command(send, env), via::run);
  INFO(seen.text);
  REQUIRE(seen.sandbox);
  CHECK_FALSE(seen.sandbox->denied);
  CHECK_FALSE(seen.sandbox->runner_failed);
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(receiver.received());
}

TEMPLATE_TEST_CASE(
    "network loopback: the host's listener is unreachable — under bwrap the command has a loopback of its own, "
    "under Landlock it has none (enforced as none, stricter than asked)",
    "[network][executor]", bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>(true));
  workspace ws;
  host_socket listener(SOCK_STREAM);
  TestType exec(net_config(network_access::loopback, ws));
  for (auto mode : confined_modes) {
    INFO(to_string(mode));
    observed host = observe(exec, command(tcp_connect, {{"PORT", listener.port_text()}}, mode), via::run);
    INFO(host.text);
    CHECK(host.exit_code != 0);
    CHECK_FALSE(listener.accepted());
    REQUIRE(host.sandbox);
    CHECK_FALSE(host.sandbox->denied);
    CHECK(host.sandbox->level == expected_level<TestType>(mode, network_access::loopback));
    if constexpr (confined_by<TestType, bwrap>) {
      // The sandbox has its own 127.0.0.1 and nobody listens on that port there.
      CHECK_THAT(host.text, Catch::Contains("refused", Catch::CaseSensitive::No));
    } else {
      CHECK_THAT(host.text, Catch::Contains("not permitted", Catch::CaseSensitive::No));
    }
  }

  const auto python = python3();
  if (!python) {
    WARN("skipped the sandbox's own loopback check: python3 is not installed");
    return;
  }
  // A listener started inside the sandbox, reached by bash /dev/tcp inside it.
  const std::string own_loopback =
      "'" + python->string() +
      "' -c 'import socket, subprocess, sys\n"
      "s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(1)\n"
      "port = s.getsockname()[1]\n"
      "r = subprocess.run([\"bash\", \"-c\", \"exec 3<>/dev/tcp/127.0.0.1/%d && echo inside-ok\" % port])\n"
      "c, _ = s.accept(); sys.exit(r.returncode)'";
  observed inside = observe(exec, command(own_loopback), via::run);
  INFO(inside.text);
  REQUIRE(inside.sandbox);
  CHECK_FALSE(inside.sandbox->denied);
  if constexpr (confined_by<TestType, bwrap>) {
    CHECK(inside.exit_code == 0);
    CHECK_THAT(inside.text, Catch::Contains("inside-ok"));
  } else {
    CHECK(inside.exit_code != 0);
    CHECK_THAT(inside.text, Catch::Contains("not permitted", Catch::CaseSensitive::No));
  }
}

TEMPLATE_TEST_CASE("network none: local IPC over unix sockets keeps working", "[network][executor]", bwrap_executor,
                   landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>(true));
  const auto python = python3();
  SKIP_UNLESS(python ? std::nullopt : std::optional<std::string>("python3 is not installed"));
  workspace ws;
  TestType exec(net_config(network_access::none, ws));
  const std::string pair = "'" + python->string() +
                           "' -c 'import socket; a, b = socket.socketpair(); a.send(b\"unix-ok\"); "
                           "print(b.recv(16).decode())'";
  observed seen = observe(exec, command(pair), via::run);
  INFO(seen.text);
  CHECK(seen.exit_code == 0);
  CHECK_THAT(seen.text, Catch::Contains("unix-ok"));
}

TEMPLATE_TEST_CASE(
    "network none: the host's abstract unix sockets are out of reach (a network namespace under bwrap, the "
    "Landlock scope from ABI 6), as under full they are not",
    "[network][executor]", bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>(true));
  if constexpr (confined_by<TestType, landlock>)
    SKIP_UNLESS(landlock::abi() >= detail::landlock_scope_abi
                    ? std::nullopt
                    : std::optional<std::string>("Landlock ABI < 6 cannot scope abstract unix sockets"));
  const auto python = python3();
  SKIP_UNLESS(python ? std::nullopt : std::optional<std::string>("python3 is not installed"));
  const std::string name = "bashexec-net-" + std::to_string(::getpid());
  int server = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(server >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  REQUIRE(::bind(server, reinterpret_cast<sockaddr*>(&addr), len) == 0);
  REQUIRE(::listen(server, 4) == 0);
  const std::string connect = "'" + python->string() +
                              "' -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); "
                              "s.connect(\"\\0\" + sys.argv[1]); print(\"abstract-ok\")' \"$NAME\"";
  workspace ws;
  for (auto access : {network_access::full, network_access::none}) {
    INFO("network " << to_string(access));
    TestType exec(net_config(access, ws));
    observed seen = observe(exec, command(connect, {{"NAME", name}}), via::run);
    INFO(seen.text);
    if (access == network_access::full) {
      CHECK(seen.exit_code == 0);
      CHECK_THAT(seen.text, Catch::Contains("abstract-ok"));
    } else {
      CHECK(seen.exit_code != 0);
      CHECK_THAT(seen.text, !Catch::Contains("abstract-ok"));
    }
  }
  ::close(server);
}

TEST_CASE(
    "network none under Landlock: every non-unix socket family is refused with EPERM and io_uring_setup with "
    "ENOSYS (the seccomp filter), so the network is governed beyond Landlock's TCP rights",
    "[network][landlock][executor]") {
  SKIP_UNLESS(backend_missing<landlock_executor>(true));
  SKIP_UNLESS(detail::seccomp_filter_supported ? std::nullopt
                                               : std::optional<std::string>("no seccomp filter for this architecture"));
  const auto python = python3();
  SKIP_UNLESS(python ? std::nullopt : std::optional<std::string>("python3 is not installed"));
  const std::string probe =
      "'" + python->string() +
      "' -c 'import ctypes, errno, socket\n"
      "def family(f, t):\n"
      "    try:\n"
      "        socket.socket(f, t).close(); return \"ok\"\n"
      "    except OSError as e:\n"
      "        return errno.errorcode.get(e.errno, str(e.errno))\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "params = ctypes.create_string_buffer(120)\n"
      "fd = libc.syscall(425, 1, params)\n"
      "uring = \"ok\" if fd >= 0 else errno.errorcode.get(ctypes.get_errno(), \"?\")\n"
      "print(\"inet\", family(socket.AF_INET, socket.SOCK_STREAM), \"inet6\", family(socket.AF_INET6, "
      "socket.SOCK_DGRAM), \"netlink\", family(socket.AF_NETLINK, socket.SOCK_RAW), \"packet\", "
      "family(socket.AF_PACKET, socket.SOCK_RAW), \"unix\", family(socket.AF_UNIX, socket.SOCK_STREAM), "
      "\"uring\", uring)'";
  workspace ws;
  landlock_executor exec(net_config(network_access::none, ws));
  observed seen = observe(exec, command(probe), via::run);
  INFO(seen.text);
  CHECK(seen.exit_code == 0);
  CHECK_THAT(seen.text, Catch::Contains("inet EPERM inet6 EPERM netlink EPERM packet EPERM unix ok uring ENOSYS"));
}

TEMPLATE_TEST_CASE("network: the knob is ignored for danger-full-access, which stays wholly unconfined",
                   "[network][executor]",
                   bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>(true));
  workspace ws;
  host_socket listener(SOCK_STREAM);
  for (auto access : {network_access::loopback, network_access::none}) {
    INFO("network " << to_string(access));
    TestType exec(net_config(access, ws));
    for (via how : both_ways) {
      INFO("via " << name_of(how));
      observed seen = observe(
          exec, command(tcp_connect, {{"PORT", listener.port_text()}}, sandbox_mode::danger_full_access), how);
      CHECK(seen.exit_code == 0);
      CHECK(listener.accepted());
      REQUIRE(seen.sandbox);
      CHECK(seen.sandbox->mode == sandbox_mode::danger_full_access);
      CHECK_FALSE(seen.sandbox->level);
    }
  }
}

TEMPLATE_TEST_CASE("network none: a foreground timeout still kills the whole process group (contract 4)",
                   "[network][executor][kill]",
                   bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>(true));
  workspace ws;
  TestType exec(net_config(network_access::none, ws));
  const std::string marker = unique_sleep();
  exec_request request = command("sleep " + marker + " & sleep " + marker);
  request.timeout = 300ms;
  const auto started = steady::now();
  run_result result = exec.run(exec.resolve(std::move(request)));
  CHECK(ms_since(started) < 5000);
  CHECK(result.timed_out);
  REQUIRE(result.sandbox);
  CHECK_FALSE(result.sandbox->denied);
  CHECK_FALSE(result.sandbox->runner_failed);
  CHECK(eventually([&] { return processes_with(marker).empty(); }, 5s));
}

TEMPLATE_TEST_CASE("network none: kill() of a background task ends it killed and its group gone (contract 4, 9)",
                   "[network][executor][kill]",
                   bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>(true));
  workspace ws;
  TestType exec(net_config(network_access::none, ws));
  const std::string marker = unique_sleep();
  const task_id id = exec.start(exec.resolve(command("sleep " + marker + " & sleep " + marker)));
  REQUIRE(eventually([&] { return processes_with(marker).size() >= 2; }));
  CHECK(exec.kill(id));
  const task_snapshot done = exec.wait(id);
  CHECK(done.status == task_status::killed);
  REQUIRE(done.sandbox);
  CHECK_FALSE(done.sandbox->runner_failed);
  CHECK(eventually([&] { return processes_with(marker).empty(); }, 5s));
}

TEST_CASE("network none through sandbox_executor: whichever backend the chain selects confines the network",
          "[network][executor][chain]") {
  SKIP_UNLESS(backend_missing<bwrap_executor>(true) && backend_missing<landlock_executor>(true)
                  ? std::optional<std::string>("neither bwrap nor Landlock can confine the network here")
                  : std::nullopt);
  workspace ws;
  host_socket listener(SOCK_STREAM);
  sandbox_executor exec(net_config(network_access::none, ws));
  observed seen = observe(exec, command(tcp_connect, {{"PORT", listener.port_text()}}), via::run);
  INFO(seen.text);
  CHECK(seen.exit_code != 0);
  CHECK_FALSE(listener.accepted());
  REQUIRE(seen.sandbox);
  CHECK_FALSE(seen.sandbox->denied);
  CHECK_FALSE(seen.sandbox->runner_failed);
  CHECK(seen.sandbox->level.has_value());
}

// Tests of detail/kernel/egress_namespace.hpp: the pre-exec step gives the
// command a network namespace of its own with one listener in it, and hands
// that listener to the parent — real clones, real namespaces, real sockets.
// The suite runs again as an ordinary user (tests/extra_tests.cmake), where
// step 1 (a user namespace of its own) is what makes step 2 possible. As root
// each case about the command's namespace runs twice: once with the namespace
// made by the child, once with one made ahead by
// detail/kernel/egress_namespace_pool.hpp, which the child only joins — the
// same facts must hold for both. The pool's own cases follow.

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bashexec/detail/kernel/egress_namespace.hpp>
#include <bashexec/detail/kernel/egress_namespace_pool.hpp>
#include <bashexec/detail/kernel/user_namespace.hpp>
#include <bashexec/spawn/fork_exec.hpp>

#include "pipe_test_support.hpp"

using namespace bashexec;

namespace {

struct egress_run {
  std::string out, err;
  std::optional<exit_facts> exit;
  unique_fd listener;
};

/// Where the command's namespace comes from: the child's step makes it, or
/// a pool made it ahead (root only) and the step joins it.
enum class made { by_the_child, ahead };

/// made::ahead as an ordinary user cannot be: skipped with a printed reason.
bool skip_unless_possible(made how) {
  if (how == made::ahead && ::geteuid() != 0) {
    WARN("SKIP (namespace made ahead): the pool serves only a process with CAP_SYS_ADMIN");
    return true;
  }
  return false;
}

/// Spawns `command` under bash with the egress step; `during` runs in the
/// parent while the command runs, with the listener it sent (or the pool's).
template <class During>
egress_run run_in_egress_namespace(const std::string& command, During during, made how = made::by_the_child) {
  detail::egress_channel channel;
  detail::egress_namespace_context context;
  std::optional<detail::ready_egress_namespace> ready;
  if (how == made::ahead) {
    detail::egress_namespace_pool pool;
    REQUIRE(pool.wait_full(std::chrono::seconds(10)));
    ready = pool.take();
    REQUIRE(ready);
    context.ready_namespace_fd = ready->network.get();
  } else {
    context.channel_fd = channel.child_end();
    context.own_user_namespace = ::geteuid() != 0;
  }
  launch_plan plan;
  plan.argv = {"/bin/bash", "-c", command};
  plan.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"};
  plan.workdir = "/";
  plan.hooks.add({&detail::enter_egress_namespace, &context, "egress namespace"});
  auto out = detail::make_pipe();
  auto err = detail::make_pipe();
  unique_fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  REQUIRE(null);
  plan.stdin_fd = null.get();
  plan.stdout_fd = out.write.get();
  plan.stderr_fd = err.write.get();
  auto child = fork_exec{}.spawn(plan);
  out.write.reset();
  err.write.reset();
  egress_run run;
  run.listener = ready ? std::move(ready->listener) : channel.take_listener();
  ready.reset();  // the parent's copy of the namespace: the command holds it now
  during(run.listener);
  std::tie(run.out, run.err) = test_support::read_both(std::move(out.read), std::move(err.read));
  child.wait_blocking();
  return run;
}

std::string own_net_namespace() { return std::filesystem::read_symlink("/proc/self/ns/net").string(); }

/// A TCP listener of the test's own on the host's loopback, any port.
std::pair<unique_fd, std::uint16_t> host_listener() {
  unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(fd);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(fd.get(), 8) == 0);
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) == 0);
  return {std::move(fd), ntohs(address.sin_port)};
}

bool skip_without_user_namespaces() {
  if (::geteuid() == 0 || detail::user_namespace_available()) return false;
  WARN("SKIP: not root and user namespaces are refused here, so no network namespace can be made");
  return true;
}

}  // namespace

TEST_CASE("the parent receives a listening socket bound to 127.0.0.1:3128 in the command's namespace",
          "[egress-namespace]") {
  if (skip_without_user_namespaces()) return;
  const made how = GENERATE(made::by_the_child, made::ahead);
  if (skip_unless_possible(how)) return;
  const egress_run run = run_in_egress_namespace("readlink /proc/self/ns/net", [](const unique_fd&) {}, how);
  REQUIRE(run.listener);
  int listening = 0;
  socklen_t size = sizeof listening;
  REQUIRE(::getsockopt(run.listener.get(), SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0);
  CHECK(listening == 1);
  sockaddr_in address{};
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(run.listener.get(), reinterpret_cast<sockaddr*>(&address), &length) == 0);
  CHECK(ntohs(address.sin_port) == detail::egress_proxy_port);
  CHECK(ntohl(address.sin_addr.s_addr) == INADDR_LOOPBACK);
  CHECK(::fcntl(run.listener.get(), F_GETFD) & FD_CLOEXEC);
  INFO(run.err);
  CHECK_FALSE(run.out.empty());
  CHECK(run.out != own_net_namespace() + "\n");  // a namespace of its own
}

TEST_CASE("a connection the command makes to 127.0.0.1:3128 arrives on the parent's listener",
          "[egress-namespace]") {
  if (skip_without_user_namespaces()) return;
  const made how = GENERATE(made::by_the_child, made::ahead);
  if (skip_unless_possible(how)) return;
  std::string greeting;
  const egress_run run = run_in_egress_namespace(
      "exec 3<>/dev/tcp/127.0.0.1/3128 && echo hello >&3 && read -r reply <&3 && echo \"got $reply\"",
      [&](const unique_fd& listener) {
        REQUIRE(listener);
        pollfd ready{listener.get(), POLLIN, 0};
        REQUIRE(::poll(&ready, 1, 10000) == 1);
        unique_fd client(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        REQUIRE(client);
        char buffer[16] = {};
        const ssize_t got = ::read(client.get(), buffer, sizeof buffer);
        REQUIRE(got > 0);
        greeting.assign(buffer, static_cast<std::size_t>(got));
        REQUIRE(::write(client.get(), "proxy\n", 6) == 6);
      }, how);
  INFO(run.err);
  CHECK(greeting == "hello\n");
  CHECK(run.out == "got proxy\n");
}

TEST_CASE("the command reaches nothing of the host's network: its loopback, its routes", "[egress-namespace]") {
  if (skip_without_user_namespaces()) return;
  const made how = GENERATE(made::by_the_child, made::ahead);
  if (skip_unless_possible(how)) return;
  auto [server, port] = host_listener();
  const egress_run run = run_in_egress_namespace(
      "if exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) +
          "; then echo reached; else echo refused; fi 2>/dev/null;"
          " tail -n +2 /proc/net/route | wc -l; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
      [](const unique_fd&) {}, how);
  INFO(run.err);
  // Its 127.0.0.1 is its own: the test's server on the host's loopback is
  // not there; no route leads anywhere; `lo` is its only interface.
  CHECK(run.out == "refused\n0\nlo\n");
  pollfd nothing{server.get(), POLLIN, 0};
  CHECK(::poll(&nothing, 1, 0) == 0);
}

TEST_CASE("the command does not hold the listener, the channel or a namespace descriptor", "[egress-namespace]") {
  if (skip_without_user_namespaces()) return;
  const made how = GENERATE(made::by_the_child, made::ahead);
  if (skip_unless_possible(how)) return;
  const egress_run run =
      run_in_egress_namespace("for fd in /proc/$$/fd/*; do readlink \"$fd\"; done | grep -c '^socket:\\|^net:' || true",
                              [](const unique_fd&) {}, how);
  INFO(run.err);
  CHECK(run.out == "0\n");
}

TEST_CASE("no listener comes from a spawn whose step never ran", "[egress-namespace]") {
  detail::egress_channel channel;
  CHECK_FALSE(channel.take_listener());
}

// The pool of namespaces made ahead (detail/kernel/egress_namespace_pool.hpp).

namespace {

std::set<std::string> thread_net_namespaces() {
  std::set<std::string> seen;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::error_code gone;  // a thread that ended meanwhile
    const auto target = std::filesystem::read_symlink(task.path() / "ns/net", gone);
    if (!gone) seen.insert(target.string());
  }
  return seen;
}

std::size_t open_descriptor_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

bool skip_unless_root() {
  if (::geteuid() == 0) return false;
  WARN("SKIP: the pool serves only a process with CAP_SYS_ADMIN; as an ordinary user each child makes its own");
  return true;
}

}  // namespace

TEST_CASE("the pool hands out each namespace once, each a new one with its listener bound", "[egress-namespace][pool]") {
  if (skip_unless_root()) return;
  detail::egress_namespace_pool pool;
  std::set<std::string> namespaces;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(pool.wait_full(std::chrono::seconds(10)));
    auto ready = pool.take();
    pool.replenish();
    REQUIRE(ready);
    const std::string name = std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(ready->network.get()));
    CHECK(name != own_net_namespace());
    namespaces.insert(name);
    sockaddr_in address{};
    socklen_t length = sizeof address;
    REQUIRE(::getsockname(ready->listener.get(), reinterpret_cast<sockaddr*>(&address), &length) == 0);
    CHECK(ntohs(address.sin_port) == detail::egress_proxy_port);
    CHECK(ntohl(address.sin_addr.s_addr) == INADDR_LOOPBACK);
    CHECK(::fcntl(ready->network.get(), F_GETFD) & FD_CLOEXEC);
    CHECK(::fcntl(ready->listener.get(), F_GETFD) & FD_CLOEXEC);
  }
  CHECK(namespaces.size() == 3);  // never the same one twice
  CHECK(pool.broken().empty());
}

TEST_CASE("the pool's worker returns to the host's namespace after each one it makes", "[egress-namespace][pool]") {
  if (skip_unless_root()) return;
  detail::egress_namespace_pool pool;
  REQUIRE(pool.wait_full(std::chrono::seconds(10)));
  pool.take();
  pool.replenish();
  REQUIRE(pool.wait_full(std::chrono::seconds(10)));
  // Every thread of the process, the worker included, is in the host's.
  CHECK(thread_net_namespaces() == std::set<std::string>{own_net_namespace()});
}

TEST_CASE("the pool refills when the call that took one is over, not while it runs", "[egress-namespace][pool]") {
  if (skip_unless_root()) return;
  detail::egress_namespace_pool pool;
  REQUIRE(pool.wait_full(std::chrono::seconds(10)));
  REQUIRE(pool.take());
  // Taking asks for nothing: a namespace made beside the call's spawn costs
  // the call as much as one made in its child.
  CHECK_FALSE(pool.wait_full(std::chrono::milliseconds(300)));
  CHECK_FALSE(pool.take());
  pool.replenish();
  CHECK(pool.wait_full(std::chrono::seconds(10)));
  CHECK(pool.take());
}

TEST_CASE("an empty pool gives nothing and never waits, and a pool's end closes what it held", "[egress-namespace][pool]") {
  if (skip_unless_root()) return;
  const std::size_t before = open_descriptor_count();
  {
    detail::egress_namespace_pool none(0);
    CHECK_FALSE(none.take());
  }
  CHECK(open_descriptor_count() == before);
  {
    detail::egress_namespace_pool two(2);
    REQUIRE(two.wait_full(std::chrono::seconds(10)));
    // Two namespaces and two listeners, and the worker's way home (opened
    // before it made the first: counted once the pool is full).
    CHECK(open_descriptor_count() == before + 4 + 1);
  }
  CHECK(open_descriptor_count() == before);
}

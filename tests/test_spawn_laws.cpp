// The laws every shipped spawn policy keeps (launch.hpp, spawn.hpp), one test
// case per law, iterated at compile time over every shipped policy with
// hana::for_each: a new spawn policy (a pool of prespawned processes) joins
// the list below and must pass the same laws. Driven through launch plans and
// the policy's process_handle directly — no executor — except for the last
// cases, which check what an executor derives from its spawn policy.

#include <catch2/catch.hpp>

#include "executor_test_support.hpp"
#include "pipe_test_support.hpp"
#include "../docs/examples/extending/counting_spawner.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/hana/all_of.hpp>
#include <boost/hana/bool.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include <bashexec/basic_executor.hpp>
#include <bashexec/detail/engine/spawn_step.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/executor_traits.hpp>
#include <bashexec/spawn/fork_exec.hpp>
#include <bashexec/spawn/posix_spawn.hpp>
#include <bashexec/spawn/prespawned.hpp>

namespace fs = std::filesystem;
namespace hana = boost::hana;
using namespace bashexec;
using detail::unique_fd;

namespace {

/// Every spawn policy the library ships, and the one docs/extending.md
/// writes outside the library's tree.
constexpr auto shipped_spawn_policies = hana::tuple_t<posix_spawner, fork_exec, prespawned, counting_spawner>;

static_assert(hana::all_of(shipped_spawn_policies,
                           [](auto policy) { return hana::bool_c<spawn_policy<typename decltype(policy)::type>>; }));

/// The instance an executor would hold (from a default config when `S`
/// takes one), as a prvalue: a policy with an atomic neither moves nor copies.
template <class S>
S make_policy() {
  static const executor_config defaults = test_support::fast_config();
  return detail::make_spawn_policy<S>(defaults);
}

/// Calls `law.template operator()<S>()` for every shipped policy `S`, its
/// name captured for the failure message.
template <class Law>
void for_every_spawn_policy(Law law) {
  hana::for_each(shipped_spawn_policies, [&law](auto policy) {
    using S = typename decltype(policy)::type;
    INFO("spawn policy " << S::name);
    law.template operator()<S>();
  });
}

struct outcome {
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string out;
  std::string err;
};

/// Reads both pipes to EOF, then waits for the handle's pidfd and reaps
/// through the handle (the engine's own path).
outcome collect(process_handle& child, unique_fd out, unique_fd err) {
  outcome result;
  std::tie(result.out, result.err) = test_support::read_both(std::move(out), std::move(err));
  pollfd exit_fd{child.pidfd(), POLLIN, 0};
  REQUIRE(::poll(&exit_fd, 1, 10000) == 1);
  auto facts = child.try_reap();
  REQUIRE(facts);
  CHECK_FALSE(child.unreaped());
  result.exit_code = facts->exit_code;
  result.signal = facts->signal;
  return result;
}

launch_plan plan_for(std::vector<std::string> argv) {
  launch_plan plan;
  plan.argv = std::move(argv);
  plan.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  plan.workdir = "/";
  return plan;
}

launch_plan bash_plan(const std::string& command) { return plan_for({"/bin/bash", "-c", command}); }

/// Spawns `plan` with a const instance of `S`: stdout and stderr to pipes,
/// stdin from `stdin_fd` (-1: left to the policy).
template <class S>
outcome run_plan(launch_plan plan, int stdin_fd = -1) {
  const S spawner = make_policy<S>();
  if constexpr (requires { spawner.wait_until_warm(std::chrono::seconds(5)); }) {
    // A pool: serve this plan from a waiting process, not the cold path.
    // The throwaway spawn makes the key known; its process is reaped here.
    if (plan.hooks.empty() || plan.hook_owner) {
      launch_plan warm_up = plan_for({"/bin/true"});
      warm_up.hooks = plan.hooks;
      warm_up.limits = plan.limits;
      warm_up.hook_owner = plan.hook_owner;
      spawner.spawn(warm_up).wait_blocking();
      REQUIRE(spawner.wait_until_warm(std::chrono::seconds(10)));
    }
  }
  auto out = detail::make_pipe();
  auto err = detail::make_pipe();
  plan.stdin_fd = stdin_fd;
  plan.stdout_fd = out.write.get();
  plan.stderr_fd = err.write.get();
  process_handle child = spawner.spawn(plan);
  REQUIRE(child.pid() > 0);
  REQUIRE(child.pidfd() >= 0);
  out.write.reset();
  err.write.reset();
  return collect(child, std::move(out.read), std::move(err.read));
}

bool no_children_left() {
  return test_support::eventually([] { return test_support::children_of_self().empty(); }, std::chrono::seconds(5));
}

/// Temporarily puts `fd` on descriptor number `slot`, restoring what was there.
class fd_slot {
 public:
  fd_slot(int slot, int fd) : slot_(slot) {
    saved_ = ::fcntl(slot, F_DUPFD_CLOEXEC, 200);  // -1 when the slot was free
    REQUIRE(::dup2(fd, slot) == slot);
  }
  ~fd_slot() {
    if (saved_ >= 0) {
      ::dup2(saved_, slot_);
      ::close(saved_);
    } else {
      ::close(slot_);
    }
  }
  fd_slot(const fd_slot&) = delete;
  fd_slot& operator=(const fd_slot&) = delete;

 private:
  int slot_;
  int saved_;
};

std::string read_all(int fd) {
  std::string text;
  char buffer[256];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
  return text;
}

std::size_t open_fd_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

/// A hook that appends its letter to the pipe named in its context.
struct marker_context {
  int fd;
  char letter;
};
int write_marker(const void* ctx) noexcept {
  const auto* marker = static_cast<const marker_context*>(ctx);
  return ::write(marker->fd, &marker->letter, 1) == 1 ? 0 : errno;
}

}  // namespace

TEST_CASE("spawn laws: the child leads its own session and process group, without a terminal (contract 4)",
          "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    auto result = run_plan<S>(bash_plan("echo $$; cut -d' ' -f5,6 /proc/$$/stat; : < /dev/tty || echo no-tty"));
    REQUIRE(result.exit_code == 0);
    std::istringstream lines(result.out);
    long pid = 0, pgid = 0, sid = 0;
    std::string tty;
    lines >> pid >> pgid >> sid >> tty;
    CHECK(pid > 0);
    CHECK(pgid == pid);
    CHECK(sid == pid);
    CHECK(tty == "no-tty");
  });
}

TEST_CASE("spawn laws: the child gets fds 0-2 and the inherited ones renumbered from 3, nothing else (contract 8)",
          "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    unique_fd leaky(::open("/dev/null", O_RDONLY));  // deliberately not close-on-exec
    REQUIRE(leaky);
    auto first = detail::make_pipe();
    auto second = detail::make_pipe();
    launch_plan plan = bash_plan("ls -1 /proc/$$/fd; echo one >&3; echo two >&4");
    plan.inherited_fds = {first.write.get(), second.write.get()};
    auto result = run_plan<S>(std::move(plan));
    REQUIRE(result.exit_code == 0);
    std::vector<int> fds;
    std::istringstream lines(result.out);
    for (int fd; lines >> fd;) fds.push_back(fd);
    std::sort(fds.begin(), fds.end());
    CHECK(fds == std::vector<int>{0, 1, 2, 3, 4});
    first.write.reset();
    second.write.reset();
    char buffer[16] = {};
    CHECK(::read(first.read.get(), buffer, sizeof buffer) == 4);
    CHECK(std::string(buffer, 4) == "one\n");
    CHECK(::read(second.read.get(), buffer, sizeof buffer) == 4);
    CHECK(std::string(buffer, 4) == "two\n");
  });
}

TEST_CASE("spawn laws: inherited descriptors are renumbered 3, 4, … even when their numbers overlap the targets",
          "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    auto a = detail::make_pipe();
    auto b = detail::make_pipe();
    {
      // Host fd 3 holds A and host fd 4 holds B; the child must get fd 3 = B
      // and fd 4 = A, which a naive dup2 sequence would clobber.
      fd_slot slot3(3, a.write.get());
      fd_slot slot4(4, b.write.get());
      launch_plan plan = bash_plan("printf to-3 >&3; printf to-4 >&4");
      plan.inherited_fds = {4, 3};
      auto result = run_plan<S>(std::move(plan));
      CHECK(result.exit_code == 0);
      CHECK(result.err.empty());
    }
    a.write.reset();
    b.write.reset();
    CHECK(read_all(b.read.get()) == "to-3");
    CHECK(read_all(a.read.get()) == "to-4");
  });
}

TEST_CASE("spawn laws: the parent keeps no descriptor on any path, success or failure (contract 8)",
          "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    const std::size_t before = open_fd_count();
    (void)run_plan<S>(bash_plan("true"));
    launch_plan missing_dir = bash_plan("true");
    missing_dir.workdir = "/nonexistent";
    CHECK_THROWS_AS(run_plan<S>(std::move(missing_dir)), infrastructure_error);
    if constexpr (spawn_can<S, spawn_capability::pre_exec>) {
      launch_plan failing_hook = bash_plan("true");
      failing_hook.hooks.add(pre_exec_hook{[](const void*) noexcept { return EACCES; }, nullptr, "hook"});
      CHECK_THROWS_AS(run_plan<S>(std::move(failing_hook)), pre_exec_failed);
    }
    {
      process_handle child = make_policy<S>().spawn(bash_plan("true"));  // -1 streams: /dev/null opened for the spawn
      child.wait_blocking();
    }
    CHECK(open_fd_count() == before);
    CHECK(no_children_left());
  });
}

TEST_CASE("spawn laws: a missing workdir throws infrastructure_error naming the path, and nothing runs (contract 2)",
          "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    launch_plan plan = bash_plan("true");
    plan.workdir = "/nonexistent/bashexec-workdir";
    try {
      (void)run_plan<S>(std::move(plan));
      FAIL("spawn did not throw");
    } catch (const pre_exec_failed&) {
      FAIL("a chdir failure is not a hook failure");
    } catch (const infrastructure_error& error) {
      CHECK_THAT(error.what(), Catch::Contains("/nonexistent/bashexec-workdir: No such file or directory"));
    }
    CHECK(no_children_left());
  });
}

TEST_CASE("spawn laws: the environment is exactly the plan's, in its order", "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    launch_plan plan = plan_for({"/usr/bin/env"});
    plan.env = {"ZED=last first", "A=1", "EMPTY=", "WITH=equals=inside"};
    auto result = run_plan<S>(std::move(plan));
    REQUIRE(result.exit_code == 0);
    CHECK(result.out == "ZED=last first\nA=1\nEMPTY=\nWITH=equals=inside\n");
  });
}

TEST_CASE("spawn laws: the child starts in the plan's working directory", "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    test_support::temp_dir dir;
    launch_plan plan = plan_for({"/bin/pwd", "-P"});
    plan.workdir = dir.path();
    auto result = run_plan<S>(std::move(plan));
    REQUIRE(result.exit_code == 0);
    CHECK(result.out == fs::canonical(dir.path()).string() + "\n");
  });
}

TEST_CASE("spawn laws: stdin is the plan's descriptor, and /dev/null when the plan leaves it at -1",
          "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    auto input = detail::make_pipe();
    REQUIRE(::write(input.write.get(), "piped\n", 6) == 6);
    input.write.reset();
    auto piped = run_plan<S>(plan_for({"/bin/cat"}), input.read.get());
    CHECK(piped.out == "piped\n");
    auto none = run_plan<S>(plan_for({"/bin/readlink", "/proc/self/fd/0"}));
    CHECK(none.out == "/dev/null\n");
  });
}

TEST_CASE("spawn laws: default signal dispositions and an empty mask, whatever the host set (contract 4)",
          "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    // The host ignores SIGPIPE and blocks another signal; the child must see
    // neither (an ignored SIGPIPE would make `yes | head -1` spin on EPIPE).
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    struct sigaction saved {};
    REQUIRE(::sigaction(SIGPIPE, &ignore, &saved) == 0);
    sigset_t block, old_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGWINCH);
    REQUIRE(::pthread_sigmask(SIG_BLOCK, &block, &old_mask) == 0);
    auto result = run_plan<S>(plan_for({"/bin/grep", "-E", "^Sig(Ign|Blk):", "/proc/self/status"}));
    auto pipeline = run_plan<S>(bash_plan("yes | head -1"));
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    ::sigaction(SIGPIPE, &saved, nullptr);
    CHECK(pipeline.exit_code == 0);
    CHECK(pipeline.out == "y\n");
    CHECK(pipeline.err.empty());
    REQUIRE(result.exit_code == 0);
    CHECK(result.out == "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
  });
}

TEST_CASE("spawn laws: the handle reports exit codes and signal deaths through the pidfd (contract 3)",
          "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    auto exited = run_plan<S>(bash_plan("exit 42"));
    CHECK(exited.exit_code == 42);
    CHECK_FALSE(exited.signal);
    auto killed = run_plan<S>(bash_plan("kill -TERM $$"));
    CHECK_FALSE(killed.exit_code);
    CHECK(killed.signal == SIGTERM);
  });
}

TEST_CASE("spawn laws: signal_group reaches every member of the child's group", "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    {
      // A pool's waiting processes are its children until it goes.
      const S spawner = make_policy<S>();
      auto out = detail::make_pipe();
      launch_plan plan = bash_plan("sleep 30 & echo started; wait");
      plan.stdout_fd = out.write.get();
      process_handle child = spawner.spawn(plan);
      out.write.reset();
      char buffer[8];
      REQUIRE(::read(out.read.get(), buffer, sizeof buffer) > 0);  // the background sleep exists
      child.signal_group(SIGKILL);
      child.wait_blocking();
      CHECK_FALSE(child.unreaped());
      CHECK(test_support::eventually([&] { return test_support::live_group_members(child.pid()).empty(); },
                                     std::chrono::seconds(5)));
    }
    CHECK(no_children_left());
  });
}

TEST_CASE("spawn laws: a plan without argv, or with a missing program, throws and leaves nothing (contract 2)",
          "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    const S spawner = make_policy<S>();
    CHECK_THROWS_AS(spawner.spawn(launch_plan{}), std::invalid_argument);
    try {
      (void)run_plan<S>(plan_for({"/bin/bashexec-no-such-program"}));
      FAIL("spawned a missing program");
    } catch (const infrastructure_error& error) {
      CHECK_THAT(error.what(), Catch::Contains("/bin/bashexec-no-such-program") &&
                                   Catch::Contains("No such file or directory"));
    }
    CHECK(no_children_left());
  });
}

TEST_CASE("spawn laws: a policy refuses a plan that needs a capability it lacks, and runs nothing",
          "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    test_support::temp_dir dir;
    unique_fd some_fd(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    auto needing = [&](auto capability) {
      using tag = typename decltype(capability)::type;
      launch_plan plan = bash_plan("touch ran");
      plan.workdir = dir.path();
      if constexpr (std::is_same_v<tag, spawn_capability::pre_exec>)
        plan.hooks.add(pre_exec_hook{[](const void*) noexcept { return 0; }, nullptr, "no-op"});
      if constexpr (std::is_same_v<tag, spawn_capability::limits>) plan.limits.add({RLIMIT_CORE, 0, 0});
      if constexpr (std::is_same_v<tag, spawn_capability::cgroup>) plan.cgroup_procs_fd = some_fd.get();
      return plan;
    };
    hana::for_each(all_spawn_capabilities, [&](auto capability) {
      using tag = typename decltype(capability)::type;
      if constexpr (!spawn_can<S, tag>) {
        launch_plan plan = needing(capability);
        if (!tag::needed_by(plan)) return;  // no plan field needs it (prespawned)
        INFO("capability " << tag::field);
        try {
          (void)make_policy<S>().spawn(plan);
          FAIL("ran a plan it cannot honour");
        } catch (const std::invalid_argument& e) {
          CHECK_THAT(e.what(), Catch::Contains(std::string(tag::field)) && Catch::Contains(std::string(S::name)));
        }
        CHECK_FALSE(fs::exists(dir.path() / "ran"));
      }
    });
    CHECK(no_children_left());
  });
}

TEST_CASE("spawn laws: hooks run in the order they were added, before the command", "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    if constexpr (spawn_can<S, spawn_capability::pre_exec>) {
      auto marks = detail::make_pipe();
      marker_context a{marks.write.get(), 'a'}, b{marks.write.get(), 'b'}, c{marks.write.get(), 'c'};
      launch_plan plan = bash_plan("true");
      plan.hooks.add({&write_marker, &a, "a"});
      plan.hooks.add({&write_marker, &b, "b"});
      plan.hooks.add({&write_marker, &c, "c"});
      auto result = run_plan<S>(std::move(plan));
      marks.write.reset();
      CHECK(result.exit_code == 0);
      char buffer[8] = {};
      CHECK(::read(marks.read.get(), buffer, sizeof buffer) == 3);
      CHECK(std::string(buffer, 3) == "abc");
    }
  });
}

TEST_CASE("spawn laws: a failing hook names its own stage, and the hooks after it never run", "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    if constexpr (spawn_can<S, spawn_capability::pre_exec>) {
      auto marks = detail::make_pipe();
      marker_context a{marks.write.get(), 'a'}, c{marks.write.get(), 'c'};
      launch_plan plan = bash_plan("echo should-not-run");
      plan.hooks.add({&write_marker, &a, "first"});
      plan.hooks.add({[](const void*) noexcept { return EPERM; }, nullptr, "second-stage"});
      plan.hooks.add({&write_marker, &c, "third"});
      try {
        (void)run_plan<S>(std::move(plan));
        FAIL("spawn did not throw");
      } catch (const pre_exec_failed& error) {
        CHECK(error.stage() == "second-stage");
        CHECK(error.error() == EPERM);
        CHECK(std::string(error.what()) == "second-stage: Operation not permitted");
      }
      marks.write.reset();
      char buffer[8] = {};
      CHECK(::read(marks.read.get(), buffer, sizeof buffer) == 1);
      CHECK(buffer[0] == 'a');
      CHECK(no_children_left());
    }
  });
}

TEST_CASE("spawn laws: the hook array is fixed, and a full one says so instead of dropping a hook",
          "[spawn_laws]") {
  launch_plan plan;
  for (std::size_t i = 0; i < pre_exec_hook_set::capacity; ++i)
    plan.hooks.add({[](const void*) noexcept { return 0; }, nullptr, "hook"});
  CHECK_THROWS_WITH(plan.hooks.add({[](const void*) noexcept { return 0; }, nullptr, "one too many"}),
                    "launch_plan.hooks: more than 4 entries");
  CHECK_THROWS_AS(plan.hooks.add(pre_exec_hook{}), std::invalid_argument);
  CHECK(plan.hooks.size() == pre_exec_hook_set::capacity);
}

TEST_CASE("spawn laws: one const instance spawns from several threads at once", "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    std::atomic<int> succeeded{0};
    {
      const S spawner = make_policy<S>();
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t)
        threads.emplace_back([&spawner, &succeeded] {
          for (int i = 0; i < 8; ++i) {
            launch_plan plan = plan_for({"/bin/true"});
            process_handle child = spawner.spawn(plan);
            pollfd exit_fd{child.pidfd(), POLLIN, 0};
            if (::poll(&exit_fd, 1, 10000) != 1) continue;
            auto facts = child.try_reap();
            if (facts && facts->exit_code == 0) ++succeeded;
          }
        });
      for (auto& thread : threads) thread.join();
    }  // a pool's waiting processes are its children until it goes
    CHECK(succeeded == 32);
    CHECK(no_children_left());
  });
}

TEST_CASE("spawn laws: an executor over each policy runs a command through its one instance", "[spawn_laws]") {
  for_every_spawn_policy([]<class S>() {
    basic_executor<policies<spawn_with<S>>> executor(test_support::fast_config());
    exec_request request;
    request.command = "echo hello; exit 3";
    auto result = executor.run(executor.resolve(request));
    CHECK(result.exit_code == 3);
    CHECK(result.out.text == "hello\n");
  });
}

TEST_CASE("spawn laws: an executor holds one policy instance, built from its config, for run and start alike",
          "[spawn_laws]") {
  auto config = test_support::fast_config();
  config.limits.max_open_files = 512;
  basic_executor<policies<spawn_with<counting_spawner>>> executor(config);
  CHECK(executor.spawner().limited());
  exec_request request;
  request.command = "ulimit -n";
  CHECK(executor.run(executor.resolve(request)).out.text == "512\n");
  CHECK(executor.run(executor.resolve(request)).exit_code == 0);
  auto id = executor.start(executor.resolve(request));
  CHECK(executor.wait(id).exit_code == 0);
  CHECK(executor.spawner().spawned() == 3);
}

// What an executor can do follows from its policies (executor_traits.hpp).
// The default composition (local_executor) spawns with fork_exec, so it can
// contain by cgroup; posix_spawner (posix_spawn_executor) cannot.
using local_policies = policies<>;
using posix_spawn_policies = policies<spawn_with<posix_spawner>>;
using landlock_policies = policies<spawn_with<fork_exec>, confine_with<landlock>>;
static_assert(!executor_can<local_policies, executor_capability::confines>);
static_assert(executor_can<local_policies, spawn_capability::pre_exec>);
static_assert(executor_can<local_policies, spawn_capability::cgroup>);
static_assert(!executor_can<posix_spawn_policies, spawn_capability::pre_exec>);
static_assert(!executor_can<posix_spawn_policies, spawn_capability::cgroup>);
static_assert(executor_can<landlock_policies, executor_capability::confines>);
static_assert(executor_can<landlock_policies, executor_capability::needs_pre_exec>);
static_assert(executor_can<landlock_policies, spawn_capability::pre_exec>);
static_assert(executor_can<landlock_policies, spawn_capability::limits>);
static_assert(!executor_can<landlock_policies, spawn_capability::prespawned>);

TEST_CASE("spawn laws: an executor describes what its policies let it do", "[spawn_laws]") {
  CHECK(describe_executor<posix_spawn_policies>() ==
        "confines commands: no, its confinement needs pre-exec hooks: no, run pre-exec hooks in the child: no, "
        "apply resource limits in the child before exec: no, join a cgroup in the child before exec: no, hand "
        "out processes started ahead of the call: no");
  CHECK_THAT(describe_executor<landlock_policies>(),
             Catch::StartsWith("confines commands: yes, its confinement needs pre-exec hooks: yes, run pre-exec "
                               "hooks in the child: yes"));
}

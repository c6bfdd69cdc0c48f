// The prespawned spawn policy (spawn/prespawned.hpp): a command served by a
// waiting process of the pool behaves byte for byte like the same command
// spawned cold by fork_exec (issue 14), unconfined and under Landlock; the
// pool's processes are used once, hold nothing of the host or of each other,
// and are gone with the policy.

#include <catch2/catch.hpp>

#include "executor_test_support.hpp"
#include "sandbox_test_support.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bashexec/basic_executor.hpp>
#include <bashexec/confinement/bwrap.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/spawn/fork_exec.hpp>
#include <bashexec/spawn/detail/warm_process.hpp>
#include <bashexec/spawn/prespawned.hpp>

namespace fs = std::filesystem;
using namespace bashexec;
using namespace std::chrono_literals;

namespace {

struct probe {
  std::string command;
  std::optional<std::string> stdin_data{};
  std::optional<std::chrono::milliseconds> timeout{};
  bool abort_after_start = false;
};

/// What the equivalence compares: everything a caller sees of a run.
std::string describe(const run_result& r) {
  std::string text = "exit=" + (r.exit_code ? std::to_string(*r.exit_code) : "-") +
                     " signal=" + (r.signal ? std::to_string(*r.signal) : "-") +
                     " timed_out=" + std::to_string(r.timed_out) + " aborted=" + std::to_string(r.aborted) +
                     " leftovers_killed=" + std::to_string(r.leftovers_killed) +
                     " containment=" + std::string(to_string(r.containment)) + "\n";
  if (r.sandbox)
    text += "sandbox mode=" + std::string(to_string(r.sandbox->mode)) + " denied=" + std::to_string(r.sandbox->denied) +
            " runner_failed=" + std::to_string(r.sandbox->runner_failed) + "\n";
  text += "--- stdout (truncated=" + std::to_string(r.out.truncated) + ")\n" + r.out.text;
  text += "--- stderr (truncated=" + std::to_string(r.err.truncated) + ")\n" + r.err.text;
  return text;
}

template <class Executor>
run_result run_probe(Executor& executor, const probe& p, std::optional<sandbox_mode> mode) {
  exec_request request;
  request.command = p.command;
  request.stdin_data = p.stdin_data;
  request.timeout = p.timeout;
  request.mode = mode;
  std::stop_source stop;
  request.stop = stop.get_token();
  std::thread stopper;
  if (p.abort_after_start)
    stopper = std::thread([&stop] {
      std::this_thread::sleep_for(300ms);
      stop.request_stop();
    });
  auto result = executor.run(executor.resolve(std::move(request)));
  if (stopper.joinable()) stopper.join();
  return result;
}

/// The cold-vs-warm list (issue 14, "The semantics are exactly a cold
/// `bash -c`"). $$ is never printed: it is the one thing that must differ.
std::vector<probe> probes() {
  return {
      {"echo out; echo err >&2; bashexec_no_such_command; exit 3"},
      {"echo 'never closed"},
      {"echo \"$0\"; echo \"$BASH_EXECUTION_STRING\"; echo ppid=$PPID; "
       "[ \"$(cut -d' ' -f6 /proc/$$/stat)\" = $$ ] && echo leads-its-session"},
      {"env | sort"},
      {"pwd; umask"},
      {"trap -p; grep -E '^Sig(Blk|Ign|Pnd|Cgt)|^(NoNewPrivs|Seccomp|Cap(Inh|Prm|Eff|Bnd|Amb)):' /proc/self/status"},
      {"ulimit -a"},
      {"ls /proc/$$/fd; readlink /proc/$$/fd/0"},
      {"cat; echo; wc -c < /dev/stdin", std::string("hello\nworld")},
      {"readlink /proc/self/fd/0; cat | wc -c"},
      {"kill -TERM $$"},
      {"exit 42"},
      // In a cgroup of its own below the executor's while it runs. The names
      // differ: the executor's between the two executors, and the call's
      // (spawn-N cold, prespawn-N warm: born there, see the cgroup cases).
      {"grep '^0::' /proc/self/cgroup | sed 's#/bashexec-[^/]*/[a-z]*-[0-9]*$#/EXECUTOR/CALL#'"},
      {"echo x > /etc/bashexec-prespawn-probe; echo status=$?"},
      {"echo before; sleep 30", std::nullopt, 300ms},
      // A leftover holding the output open after the shell exited.
      {"sleep 30 & echo started"},
      {"echo before; sleep 30", std::nullopt, std::nullopt, true},
  };
}

/// Runs every probe cold and warm and compares; `mode` empty: unconfined.
template <class ColdPolicies, class WarmPolicies>
void check_equivalence(std::optional<sandbox_mode> mode) {
  auto config = test_support::fast_config();
  basic_executor<ColdPolicies> cold(config);
  basic_executor<WarmPolicies> warm(config);
  // The first call makes the key known (served cold); the pool fills after it.
  REQUIRE(run_probe(warm, {"true"}, mode).exit_code == 0);
  for (const auto& p : probes()) {
    INFO("command: " << p.command);
    const run_result expected = run_probe(cold, p, mode);
    REQUIRE(warm.spawner().wait_until_warm(10s));
    const auto before = warm.spawner().stats();
    const run_result got = run_probe(warm, p, mode);
    const auto after = warm.spawner().stats();
    CHECK(after.warm == before.warm + 1);  // served by a waiting process, not the cold path
    CHECK(after.cold == before.cold);
    CHECK(describe(got) == describe(expected));
  }
}

using cold_unconfined = policies<spawn_with<fork_exec>>;
using warm_unconfined = policies<spawn_with<prespawned>>;
using cold_landlock = policies<spawn_with<fork_exec>, confine_with<landlock>>;
using warm_landlock = policies<spawn_with<prespawned>, confine_with<landlock>>;
using cold_bwrap = policies<spawn_with<fork_exec>, confine_with<bwrap>>;
using warm_bwrap = policies<spawn_with<prespawned>, confine_with<bwrap>>;

bool no_children_left() {
  return test_support::eventually([] { return test_support::children_of_self().empty(); }, 5s);
}

std::size_t open_fd_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

launch_plan true_plan() {
  launch_plan plan;
  plan.argv = {"/bin/true"};
  plan.env = {"PATH=/usr/bin:/bin"};
  plan.workdir = "/";
  return plan;
}

}  // namespace

TEST_CASE("prespawned: an unconfined command from the pool runs byte for byte like a cold bash -c (contract 2-8)",
          "[prespawned]") {
  check_equivalence<cold_unconfined, warm_unconfined>(std::nullopt);
}

TEST_CASE("prespawned: a Landlock read-only command from the pool runs byte for byte like a cold one (contract 13-16)",
          "[prespawned]") {
  if (landlock::abi() < 1) {
    WARN("skipped: no Landlock on this kernel (" << landlock::remedy << ")");
    return;
  }
  check_equivalence<cold_landlock, warm_landlock>(sandbox_mode::read_only);
}

TEST_CASE("prespawned: a bwrap read-only command from the pool runs byte for byte like a cold one (contract 13-16)",
          "[prespawned]") {
  SKIP_UNLESS(test_support::backend_missing<test_support::bwrap_executor>());
  check_equivalence<cold_bwrap, warm_bwrap>(sandbox_mode::read_only);
}

TEST_CASE("prespawned: a waiting process holds one descriptor, its own socket, and nothing of the host (contract 8)",
          "[prespawned]") {
  {
    const prespawned pool(prespawned::config{.per_key = 3});
    pool.spawn(true_plan()).wait_blocking();  // makes the key known
    REQUIRE(pool.wait_until_warm(10s));
    const auto waiting = test_support::children_of_self();
    CHECK(waiting.size() == 3);
    for (long pid : waiting) {
      std::vector<std::string> fds;
      for (const auto& entry : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
        fds.push_back(fs::read_symlink(entry.path()).string());
      INFO("waiting process " << pid);
      REQUIRE(fds.size() == 1);
      CHECK(fds.front().starts_with("socket:"));
      // Its own process group (and session): a command's kill of its group cannot reach it.
      const auto stat = test_support::read_stat(std::to_string(pid));
      REQUIRE(stat);
      CHECK(stat->pgrp == pid);
    }
  }
  CHECK(no_children_left());
}

TEST_CASE("prespawned: the policy's end kills and reaps every waiting process and leaves no descriptor (contract 12)",
          "[prespawned]") {
  const std::size_t fds_before = open_fd_count();
  {
    const prespawned pool(prespawned::config{.per_key = 4});
    pool.spawn(true_plan()).wait_blocking();
    launch_plan second = true_plan();
    second.read_only_paths = {"/tmp"};  // a second key
    pool.spawn(second).wait_blocking();
    REQUIRE(pool.wait_until_warm(10s));
    CHECK(test_support::children_of_self().size() == 8);
    CHECK(open_fd_count() == fds_before + 8 * 2);  // a pidfd and a socket each
  }
  CHECK(test_support::children_of_self().empty());  // reaped by the destructor, not eventually
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("prespawned: a pooled process runs one command and is never handed out again", "[prespawned]") {
  const prespawned pool(prespawned::config{.per_key = 2});
  pool.spawn(true_plan()).wait_blocking();
  std::set<pid_t> pids;
  for (int i = 0; i < 6; ++i) {
    REQUIRE(pool.wait_until_warm(10s));
    process_handle child = pool.spawn(true_plan());
    CHECK(pids.insert(child.pid()).second);
    child.wait_blocking();
  }
  CHECK(pool.stats().warm == 6);
  CHECK(pids.size() == 6);
}

TEST_CASE("prespawned: a key nobody asks for loses its processes after the idle time", "[prespawned]") {
  {
    const prespawned pool(prespawned::config{.per_key = 2, .idle_timeout = 200ms});
    pool.spawn(true_plan()).wait_blocking();
    CHECK(pool.wait_until_warm(10s));
    CHECK(no_children_left());
  }
}

TEST_CASE("prespawned: a waiting process killed by a command is skipped, and the call is served", "[prespawned]") {
  const prespawned pool(prespawned::config{.per_key = 2});
  pool.spawn(true_plan()).wait_blocking();
  REQUIRE(pool.wait_until_warm(10s));
  for (long pid : test_support::children_of_self()) ::kill(static_cast<pid_t>(pid), SIGKILL);  // `kill -9 -1`
  process_handle child = pool.spawn(true_plan());
  child.wait_blocking();
  CHECK(pool.stats().lost >= 1);
}

TEST_CASE("prespawned: a plan whose hooks live only for the call is served cold, never pooled",
          "[prespawned]") {
  const prespawned pool;
  launch_plan plan = true_plan();
  plan.hooks.add({[](const void*) noexcept { return 0; }, nullptr, "call-scoped"});
  pool.spawn(plan).wait_blocking();
  pool.spawn(plan).wait_blocking();
  CHECK(pool.stats().cold == 2);
  CHECK(pool.stats().started == 0);
}

TEST_CASE("prespawned: config values out of range are refused naming the field", "[prespawned]") {
  CHECK_THROWS_WITH(prespawned(prespawned::config{.per_key = 0}), Catch::Contains("prespawn.per_key"));
  CHECK_THROWS_WITH(prespawned(prespawned::config{.idle_timeout = 0ms}), Catch::Contains("prespawn.idle_timeout"));
  CHECK_THROWS_WITH(prespawned(prespawned::config{.max_keys = 0}), Catch::Contains("prespawn.max_keys"));
}

namespace {

/// Everything readable from `fd` until end of file.
std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  return text;
}

}  // namespace

TEST_CASE("prespawned: a call's limits are applied at the call, so calls with and without them share a key",
          "[prespawned]") {
  const prespawned pool(prespawned::config{.per_key = 1});
  pool.spawn(true_plan()).wait_blocking();  // makes the key known
  REQUIRE(pool.wait_until_warm(10s));
  detail::pipe_pair out = detail::make_pipe();
  launch_plan plan;
  plan.argv = {"/bin/bash", "-c", "ulimit -n"};
  plan.env = {"PATH=/usr/bin:/bin"};
  plan.workdir = "/";
  plan.stdout_fd = out.write.get();
  plan.limits.add({RLIMIT_NOFILE, 77, 77});
  process_handle child = pool.spawn(plan);
  out.write.reset();
  child.wait_blocking();
  CHECK(read_all(out.read.get()) == "77\n");
  CHECK(pool.stats().warm == 1);
}

TEST_CASE("prespawned: a hook that fails is reported as a cold spawn reports it, and its key is served cold",
          "[prespawned]") {
  const prespawned pool(prespawned::config{.per_key = 1});
  static const int context = 0;
  launch_plan plan = true_plan();
  plan.hooks.add({[](const void*) noexcept { return EACCES; }, &context, "always refuses"});
  plan.hook_owner = std::shared_ptr<const void>(&context, [](const void*) {});
  for (int i = 0; i < 3; ++i) {
    INFO("call " << i);
    try {
      pool.spawn(plan);
      FAIL("the hook's failure did not reach the caller");
    } catch (const pre_exec_failed& e) {
      CHECK_THAT(e.what(), Catch::Contains("always refuses"));
    }
    std::this_thread::sleep_for(50ms);  // the refill tries, and fails, meanwhile
  }
  CHECK(pool.stats().warm == 0);
  CHECK(pool.stats().cold == 3);
  CHECK(no_children_left());
}

TEST_CASE("prespawned: waiting processes exit on their own when the host dies by SIGKILL (Beyond: no orphans)",
          "[prespawned]") {
  detail::pipe_pair report = detail::make_pipe();
  const pid_t host = ::fork();
  REQUIRE(host >= 0);
  if (host == 0) {
    report.read.reset();
    {
      const prespawned pool(prespawned::config{.per_key = 3});
      pool.spawn(true_plan()).wait_blocking();
      pool.wait_until_warm(10s);
      std::string pids;
      for (long pid : test_support::children_of_self()) pids += std::to_string(pid) + "\n";
      (void)!::write(report.write.get(), pids.data(), pids.size());
      report.write.reset();
      ::pause();  // SIGKILLed here, pool and all
    }
    ::_exit(1);
  }
  report.write.reset();
  const std::string text = read_all(report.read.get());
  ::kill(host, SIGKILL);
  ::waitpid(host, nullptr, 0);
  std::vector<long> waiting;
  for (std::size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1)
    waiting.push_back(std::stol(text.substr(at, end - at)));
  REQUIRE(waiting.size() == 3);
  CHECK(test_support::eventually([&] {
    return std::none_of(waiting.begin(), waiting.end(), [](long pid) { return test_support::pid_alive(pid); });
  }, 5s));
}

TEST_CASE("prespawned: a stopped waiting process is dropped after the claim's patience, never waited on forever",
          "[prespawned]") {
  {
    detail::warm_process process = detail::warm_process::start(true_plan());
    const pid_t pid = process.pid();
    REQUIRE(::kill(pid, SIGSTOP) == 0);
    REQUIRE(test_support::eventually([&] {
      const auto stat = test_support::read_stat(std::to_string(pid));
      return stat && stat->state == 'T';
    }, 5s));
    const auto start = std::chrono::steady_clock::now();
    CHECK_FALSE(std::move(process).claim(true_plan(), 300).has_value());
    CHECK(std::chrono::steady_clock::now() - start < 5s);
  }  // dropped: killed and reaped
  CHECK(test_support::children_of_self().empty());
}

TEST_CASE("prespawned: stopped waiting processes are dropped when found and delay no call (issue 25, item 10)",
          "[prespawned]") {
  {
    const prespawned pool(prespawned::config{.per_key = 3});
    pool.spawn(true_plan()).wait_blocking();
    REQUIRE(pool.wait_until_warm(10s));
    // What an unconfined command of the host's user can do: `kill -STOP` them all.
    const auto waiting = test_support::children_of_self();
    REQUIRE(waiting.size() == 3);
    for (long pid : waiting) REQUIRE(::kill(static_cast<pid_t>(pid), SIGSTOP) == 0);
    REQUIRE(test_support::eventually([&] {
      return std::all_of(waiting.begin(), waiting.end(), [](long pid) {
        const auto stat = test_support::read_stat(std::to_string(pid));
        return stat && stat->state == 'T';
      });
    }, 5s));
    for (int call = 0; call < 3; ++call) {
      INFO("call " << call);
      launch_plan plan = true_plan();
      plan.deadline = std::chrono::steady_clock::now() + 1s;  // a call with `timeout: 1000`
      const auto start = std::chrono::steady_clock::now();
      pool.spawn(plan).wait_blocking();
      // Before: each call waited the claim's 10 s patience for one of them.
      CHECK(std::chrono::steady_clock::now() - start < 900ms);
    }
    CHECK(pool.stats().lost == 3);  // each found once, by the first call
    CHECK(std::none_of(waiting.begin(), waiting.end(), [](long pid) { return test_support::pid_alive(pid); }));
  }
  CHECK(test_support::children_of_self().empty());
}

namespace {

/// The cgroup v2 path of `pid` below the mount, from /proc/PID/cgroup.
std::string cgroup_of(long pid) {
  const std::string text = test_support::read_proc("/proc/" + std::to_string(pid) + "/cgroup");
  const auto at = text.find("0::");
  if (at == std::string::npos) return {};
  return text.substr(at + 3, text.find('\n', at) - at - 3);
}

/// The directory of cgroup `relative` (as /proc/PID/cgroup names it) where
/// cgroup v2 is mounted here; empty when it is not found.
fs::path cgroup_directory(const std::string& relative) {
  for (const char* mount : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"})
    if (fs::path dir = fs::path(mount) / fs::path(relative).relative_path(); fs::exists(dir / "cgroup.procs"))
      return dir;
  return {};
}

/// A spawn policy that says it placed its process in `target`: what a
/// broken or hostile third-party policy could hand the engine.
struct misplacing_spawn : fork_exec {
  static constexpr std::string_view name = "misplacing";
  static inline std::string target;
  process_handle spawn(const launch_plan& plan) const {
    process_handle handle = fork_exec::spawn(plan);
    handle.place_in_cgroup(target);
    return handle;
  }
};

}  // namespace

TEST_CASE("prespawned: under cgroup containment a waiting process is born in a cgroup of its own and its call runs "
          "there, so no call moves a process (issue 27)",
          "[prespawned][cgroup]") {
  basic_executor<warm_unconfined> executor(test_support::fast_config());
  const auto host_children = test_support::children_of_self();  // the cgroup guardian
  const run_result first = executor.run(executor.resolve({.command = "true"}));
  if (first.containment != containment_mechanism::cgroup) {
    WARN("skipped: no cgroup containment here (" << executor.containment_fallback() << ")");
    return;
  }
  // Each waiting process sits alone in a prespawn-N cgroup beside the
  // executor's spawn-N ones before any call took it; a warm call runs in
  // the cgroup its process was born in, and that cgroup contains the call
  // (a leftover is killed with it).
  for (int call = 0; call < 3; ++call) {
    INFO("call " << call);
    REQUIRE(executor.spawner().wait_until_warm(10s));
    std::set<std::string> homes;
    std::size_t waiting = 0;
    for (long pid : test_support::children_of_self()) {
      if (std::find(host_children.begin(), host_children.end(), pid) != host_children.end()) continue;
      const std::string home = cgroup_of(pid);
      INFO("waiting process " << pid << " in " << home);
      CHECK(fs::path(home).filename().string().starts_with("prespawn-"));
      homes.insert(home);
      ++waiting;
    }
    REQUIRE(waiting > 0);
    CHECK(homes.size() == waiting);
    const auto before = executor.spawner().stats();
    const run_result r =
        executor.run(executor.resolve({.command = "sed -n 's/^0:://p' /proc/self/cgroup; setsid sleep 30 & echo"}));
    CHECK(executor.spawner().stats().warm == before.warm + 1);
    CHECK(r.containment == containment_mechanism::cgroup);
    const std::string ran_in = r.out.text.substr(0, r.out.text.find('\n'));
    CHECK(homes.count(ran_in) == 1);
    CHECK(r.leftovers_killed);
  }
}

TEST_CASE("prespawned: a spawn policy naming a cgroup that is not its own beside the plan's is refused and its "
          "process killed, never left uncontained",
          "[prespawned][cgroup]") {
  basic_executor<policies<spawn_with<misplacing_spawn>>> executor(test_support::fast_config());
  const auto host_children = test_support::children_of_self();  // the cgroup guardian
  misplacing_spawn::target.clear();
  const run_result first = executor.run(executor.resolve({.command = "true"}));
  if (first.containment != containment_mechanism::cgroup) {
    WARN("skipped: no cgroup containment here (" << executor.containment_fallback() << ")");
    return;
  }
  const run_result own = executor.run(executor.resolve({.command = "sed -n 's/^0:://p' /proc/self/cgroup"}));
  const fs::path spawn_cgroup = cgroup_directory(own.out.text.substr(0, own.out.text.find('\n')));
  REQUIRE(spawn_cgroup.filename().string().starts_with("spawn-"));
  const fs::path executor_cgroup = spawn_cgroup.parent_path();
  for (const fs::path& target : {executor_cgroup, executor_cgroup.parent_path(), executor_cgroup / "nonexistent",
                                 executor_cgroup / "prespawn-1" / ".."}) {
    INFO("placed in " << target);
    misplacing_spawn::target = target.string();
    CHECK_THROWS_AS(executor.run(executor.resolve({.command = "sleep 30"})), infrastructure_error);
    CHECK(test_support::children_of_self() == host_children);
  }
  // One of the executor's own per-spawn cgroups: its name is refused.
  misplacing_spawn::target = spawn_cgroup.string();
  try {
    executor.run(executor.resolve({.command = "sleep 30"}));
    FAIL("a spawn- cgroup was adopted");
  } catch (const infrastructure_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("not a cgroup of its own"));
  }
  CHECK(test_support::children_of_self() == host_children);
  misplacing_spawn::target.clear();
  CHECK(executor.run(executor.resolve({.command = "echo still"})).out.text == "still\n");
}

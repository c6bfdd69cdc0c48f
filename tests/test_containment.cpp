// cgroup containment (docs/contract.md "Beyond": no orphans, ever; issue 10 point
// 4): with cgroup containment — the default (`automatic`) of an executor
// over fork_exec wherever cgroup v2 works — a command that calls setsid,
// nohup, double-forks or daemonizes is still stopped by the foreground
// leftover rule, a timeout, an abort, kill() and disposal; the death of the
// executor's process by SIGKILL kills it too (the guardian); every result
// says which mechanism contained it; and no cgroup directory outlives the
// executor. A machine without a usable cgroup v2 hierarchy makes a test
// WARN "skipped: …" and return, so a skip is always visible.
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <seccomp.h>

#include <catch2/catch.hpp>

#include <bashexec/basic_executor.hpp>
#include <bashexec/confinement/bwrap.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/detail/kernel/cgroup.hpp>
#include <bashexec/detail/kernel/clone_into_cgroup.hpp>
#include <bashexec/local_executor.hpp>
#include <bashexec/spawn/fork_exec.hpp>
#include <bashexec/spawn/prespawned.hpp>

#include "executor_test_support.hpp"
#include "prespawn_test_support.hpp"

namespace fs = std::filesystem;
using namespace bashexec;
using namespace std::chrono_literals;
using namespace test_support;

using fork_executor = basic_executor<policies<spawn_with<fork_exec>>>;
using bwrap_executor = basic_executor<policies<spawn_with<fork_exec>, confine_with<bwrap>>>;
using landlock_executor = basic_executor<policies<spawn_with<fork_exec>, confine_with<landlock>>>;
using prespawned_landlock_executor = warm_executor<policies<spawn_with<prespawned>, confine_with<landlock>>>;

namespace {

#define SKIP_UNLESS(missing_reason)          \
  if (auto skip_reason = (missing_reason)) { \
    WARN("skipped: " << *skip_reason);       \
    return;                                  \
  }

/// The parent cgroup an executor would use here, or why there is none.
struct cgroup_probe {
  std::optional<fs::path> parent;
  std::string missing;
};

const cgroup_probe& probe_cgroup() {
  static const cgroup_probe probe = [] {
    try {
      return cgroup_probe{detail::resolve_cgroup_parent(std::nullopt), {}};
    } catch (const std::exception& e) {
      return cgroup_probe{std::nullopt, std::string("cgroup v2 containment is not usable: ") + e.what()};
    }
  }();
  return probe;
}

std::optional<std::string> cgroup_missing() {
  if (probe_cgroup().parent) return std::nullopt;
  return probe_cgroup().missing;
}

executor_config contained_config() {
  auto config = fast_config();
  config.containment = process_containment::cgroup;
  return config;
}

/// Starts `sleep 100` in a new session (out of the shell's process group),
/// waits until it has left the group, then prints its pid and runs `rest`.
std::string escape_then(const std::string& rest = "") {
  return "setsid sleep 100 >/dev/null 2>&1 </dev/null & p=$!; "
         "while [ \"$(cut -d' ' -f5 /proc/$p/stat)\" = \"$$\" ]; do sleep 0.01; done; echo $p; " +
         rest;
}

/// This process's executor cgroups left under `parent` (one per live
/// executor; each holds that executor's per-spawn cgroups).
std::vector<std::string> our_cgroups(const fs::path& parent) {
  const std::string prefix = "bashexec-" + std::to_string(::getpid()) + "-";
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec))
    if (entry.path().filename().string().rfind(prefix, 0) == 0) found.push_back(entry.path().filename().string());
  return found;
}

/// The v2 cgroup of `pid` ("0::<path>" of /proc/<pid>/cgroup).
std::string cgroup_of(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return {};
}

/// The executor cgroup holding `pid` (the parent of its per-spawn cgroup),
/// as a path under the cgroup2 mount; empty when it is in none of ours.
fs::path executor_cgroup_of(long pid) {
  const std::string own = cgroup_of(pid);
  const auto spawn = own.rfind("/spawn-");
  if (spawn == std::string::npos) return {};
  auto mount = detail::find_cgroup2_mount();
  if (!mount) return {};
  std::string relative = own.substr(0, spawn);
  if (mount->root != "/") relative.erase(0, mount->root.size());
  return mount->point / fs::path(relative).relative_path();
}

/// "populated 1" in `dir`/cgroup.events.
bool cgroup_populated(const fs::path& dir) {
  return slurp(dir / "cgroup.events").find("populated 1") != std::string::npos;
}

/// The per-spawn cgroups (sub-directories) of an executor cgroup.
std::size_t spawn_cgroup_count(const fs::path& dir) {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_directory()) ++n;
  return n;
}

/// This process's children running the cgroup guardian.
std::vector<long> guardians_of_self() {
  std::vector<long> found;
  for (long pid : children_of_self())
    if (read_proc("/proc/" + std::to_string(pid) + "/cmdline").find("bashexec-guardian") != std::string::npos)
      found.push_back(pid);
  return found;
}

/// A marker no other process's command line contains: the commands below
/// export its first part and name the escapee "$M-x", and wait for it with
/// the pattern "$M-[x]", which does not match itself.
std::string fresh_marker() {
  static int counter = 0;
  return "bashexec-orphan-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

/// The escapes of issue 10 point 4; each runs `exec -a "$M-x" sleep 300`.
struct escape_form {
  const char* name;
  const char* shape;  // {} is the escapee's bash -c script
};

const escape_form escape_forms[] = {
    {"setsid", "setsid bash -c {} </dev/null >/dev/null 2>&1 &"},
    {"nohup", "nohup bash -c {} </dev/null >/dev/null 2>&1 &"},
    {"double fork", "( (bash -c {} </dev/null >/dev/null 2>&1 &) & )"},
    {"setsid double fork", "( (setsid bash -c {} </dev/null >/dev/null 2>&1 &) & )"},
    {"daemon that closes its stdio", "setsid bash -c 'exec 0<&- 1>&- 2>&-; '{} &"},
};

/// `export M=<marker>; <escape>` newline `<wait until it runs>; echo seen; rest`.
std::string escape_command(const escape_form& form, const std::string& marker, const std::string& rest = "") {
  std::string shape = form.shape;
  shape.replace(shape.find("{}"), 2, "'exec -a \"$M-x\" sleep 300'");
  return "export M=" + marker + "; " + shape +
         "\n until grep -qs -- \"$M-[x]\" /proc/[0-9]*/cmdline; do sleep 0.01; done; echo seen; " + rest;
}

template <class Executor>
task_id start(Executor& executor, std::string command) {
  return executor.start(executor.resolve({.command = std::move(command)}));
}

/// Reads a background task's output until its first line is complete.
template <class Executor>
long first_pid_of(Executor& executor, const task_id& id) {
  std::string seen;
  eventually([&] {
    seen += executor.read_output(id).delta;
    return seen.find('\n') != std::string::npos;
  });
  return first_pid(seen);
}

}  // namespace

TEST_CASE("containment: a setsid escapee of a foreground run is dead when run returns", "[containment]") {
  SKIP_UNLESS(cgroup_missing());
  const fs::path parent = *probe_cgroup().parent;
  {
    fork_executor executor(contained_config());
    const run_result result = executor.run(executor.resolve({.command = escape_then()}));
    CHECK(result.exit_code == 0);
    const long pid = first_pid(result.out.text);
    REQUIRE(pid > 1);
    CHECK_FALSE(pid_alive(pid));
    CHECK(result.leftovers_killed);
    CHECK(result.containment == containment_mechanism::cgroup);
    CHECK(our_cgroups(parent).size() == 1);  // the executor's own, holding idle per-spawn cgroups
  }
  CHECK(our_cgroups(parent).empty());
}

TEST_CASE("containment: under process_group containment a setsid escapee survives run", "[containment]") {
  // The control case: it shows the escape is real. No cgroup needed.
  auto config = fast_config();
  config.containment = process_containment::process_group;
  fork_executor executor(config);
  CHECK(executor.containment() == containment_mechanism::process_group);
  CHECK(executor.containment_fallback().empty());
  const run_result result = executor.run(executor.resolve({.command = escape_then()}));
  CHECK(result.containment == containment_mechanism::process_group);
  const long pid = first_pid(result.out.text);
  REQUIRE(pid > 1);
  CHECK(pid_alive(pid));
  CHECK_FALSE(result.leftovers_killed);
  ::kill(static_cast<pid_t>(pid), SIGKILL);
  CHECK(eventually([&] { return !pid_alive(pid); }, 2s));
}

TEST_CASE("containment: a double fork into a new session is stopped too", "[containment]") {
  SKIP_UNLESS(cgroup_missing());
  fork_executor executor(contained_config());
  // setsid's child forks again and exits: the sleep is an orphan in its own session.
  const run_result result = executor.run(executor.resolve(
      {.command = "setsid sh -c 'sleep 100 >/dev/null 2>&1 </dev/null & echo $!' </dev/null; sleep 0.1"}));
  const long pid = first_pid(result.out.text);
  REQUIRE(pid > 1);
  CHECK_FALSE(pid_alive(pid));
}

TEST_CASE("containment: a timeout kills a setsid escapee", "[containment]") {
  SKIP_UNLESS(cgroup_missing());
  fork_executor executor(contained_config());
  const auto begin = steady::now();
  // 2 s: on a loaded machine the escapee must have printed its pid first.
  const run_result result = executor.run(executor.resolve({.command = escape_then("sleep 30"), .timeout = 2s}));
  CHECK(ms_since(begin) < 10000);
  CHECK(result.timed_out);
  const long pid = first_pid(result.out.text);
  REQUIRE(pid > 1);
  CHECK_FALSE(pid_alive(pid));
}

TEST_CASE("containment: kill() of a background task kills its setsid escapee", "[containment]") {
  SKIP_UNLESS(cgroup_missing());
  fork_executor executor(contained_config());
  const task_id id = start(executor, escape_then("sleep 100"));
  const long pid = first_pid_of(executor, id);
  REQUIRE(pid > 1);
  CHECK(pid_alive(pid));
  CHECK(cgroup_of(pid).find("/bashexec-" + std::to_string(::getpid()) + "-") != std::string::npos);
  const fs::path mine = executor_cgroup_of(pid);
  REQUIRE_FALSE(mine.empty());
  CHECK(executor.kill(id));
  const task_snapshot facts = executor.wait(id);
  CHECK(facts.status == task_status::killed);
  CHECK(facts.containment == containment_mechanism::cgroup);
  CHECK_FALSE(pid_alive(pid));
  CHECK_FALSE(cgroup_populated(mine));  // its cgroup is empty, back in the free list
}

TEST_CASE("containment: disposal kills the escapees of running and settled tasks and leaves no cgroup",
          "[containment]") {
  SKIP_UNLESS(cgroup_missing());
  const fs::path parent = *probe_cgroup().parent;
  long running_escapee = 0, settled_escapee = 0;
  {
    fork_executor executor(contained_config());
    const task_id running = start(executor, escape_then("sleep 100"));
    const task_id settled = start(executor, escape_then());
    running_escapee = first_pid_of(executor, running);
    settled_escapee = first_pid_of(executor, settled);
    REQUIRE(running_escapee > 1);
    REQUIRE(settled_escapee > 1);
    CHECK(executor.wait(settled).status == task_status::completed);
    // A background task leaves detached members alone until disposal.
    CHECK(pid_alive(settled_escapee));
    CHECK(our_cgroups(parent).size() == 1);
    CHECK(cgroup_populated(executor_cgroup_of(settled_escapee)));
  }
  CHECK_FALSE(pid_alive(running_escapee));
  CHECK_FALSE(pid_alive(settled_escapee));
  CHECK(our_cgroups(parent).empty());
}

TEST_CASE("containment: a configured cgroup_parent holds the per-spawn cgroups and is empty afterwards",
          "[containment]") {
  SKIP_UNLESS(cgroup_missing());
  const fs::path parent = *probe_cgroup().parent / ("bashexec-test-" + std::to_string(::getpid()));
  REQUIRE(::mkdir(parent.c_str(), 0755) == 0);
  {
    auto config = contained_config();
    config.cgroup_parent = parent;
    fork_executor executor(config);
    const run_result result = executor.run(executor.resolve({.command = "cat /proc/self/cgroup"}));
    CHECK(result.out.text.find("/bashexec-test-" + std::to_string(::getpid()) + "/bashexec-") !=
          std::string::npos);
    const task_id id = start(executor, escape_then("sleep 100"));
    CHECK(first_pid_of(executor, id) > 1);
    CHECK(our_cgroups(parent).size() == 1);
  }
  CHECK(our_cgroups(parent).empty());
  CHECK(::rmdir(parent.c_str()) == 0);
}

TEST_CASE("containment: many short runs reuse one per-spawn cgroup and leave no child but the guardian",
          "[containment]") {
  SKIP_UNLESS(cgroup_missing());
  const fs::path parent = *probe_cgroup().parent;
  {
    fork_executor executor(contained_config());
    for (int i = 0; i < 20; ++i) CHECK(executor.run(executor.resolve({.command = "true"})).exit_code == 0);
    const auto mine = our_cgroups(parent);
    REQUIRE(mine.size() == 1);
    // Steady state makes no cgroup: the one created at construction is reused.
    CHECK(spawn_cgroup_count(parent / mine.front()) == 1);
    CHECK(children_of_self() == guardians_of_self());
    CHECK(guardians_of_self().size() == 1);
  }
  CHECK(our_cgroups(parent).empty());
  CHECK(children_of_self().empty());  // the guardian is reaped at disposal
}

TEST_CASE("containment: posix_spawner cannot join a cgroup before exec, so the executor refuses it",
          "[containment][config]") {
  try {
    posix_spawn_executor executor(contained_config());
    FAIL("posix_spawn_executor accepted cgroup containment it cannot apply");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK(what.find("containment") != std::string::npos);
    CHECK(what.find("fork_exec") != std::string::npos);
  }
}

TEST_CASE("containment: validation rejects a relative cgroup_parent, or one without cgroup containment",
          "[containment][config]") {
  auto config = contained_config();
  config.cgroup_parent = "relative/dir";
  CHECK_THROWS_WITH(fork_executor(config), Catch::Contains("cgroup_parent"));
  config = fast_config();
  config.containment = process_containment::process_group;
  config.cgroup_parent = "/sys/fs/cgroup";
  CHECK_THROWS_WITH(fork_executor(config), Catch::Contains("cgroup_parent"));
}

TEST_CASE("containment: validation rejects a containment outside the enum", "[containment][config]") {
  auto config = fast_config();
  config.containment = static_cast<process_containment>(7);
  CHECK_THROWS_WITH(fork_executor(config), Catch::Contains("containment must be automatic, process_group or cgroup"));
}

TEST_CASE("containment: a cgroup_parent that is not on cgroup2 fails loudly at construction",
          "[containment][config]") {
  auto config = contained_config();
  config.cgroup_parent = fs::temp_directory_path();
  CHECK_THROWS_WITH(fork_executor(config), Catch::Contains("cgroup2"));
}

// Landlock only: the escapee reports its pid from inside, which under bwrap
// is a pid of its own namespace (bwrap's containment — the end of that
// namespace — is proven in test_hardening.cpp).
TEMPLATE_TEST_CASE("containment: a confined run is contained too: its setsid escapee dies with it",
                   "[containment][sandbox]", landlock_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(cgroup_missing());
  if constexpr (std::is_same_v<typename TestType::confinement_type, landlock>) {
    if (landlock::abi() < 0) {
      WARN("skipped: Landlock is not available");
      return;
    }
  } else {
    auto program = detail::find_program("bwrap");
    const std::string probe =
        program ? program->string() + " --ro-bind / / --dev /dev --proc /proc true >/dev/null 2>&1" : "";
    if (!program || std::system(probe.c_str()) != 0) {
      WARN("skipped: bwrap cannot create a sandbox here");
      return;
    }
  }
  const fs::path parent = *probe_cgroup().parent;
  {
    TestType executor(contained_config());
    const run_result result = executor.run(executor.resolve({.command = escape_then()}));
    REQUIRE(result.sandbox);
    CHECK(result.sandbox->mode == sandbox_mode::read_only);
    const long pid = first_pid(result.out.text);
    REQUIRE(pid > 1);
    CHECK_FALSE(pid_alive(pid));

    const task_id id = start(executor, escape_then("sleep 100"));
    const long escapee = first_pid_of(executor, id);
    REQUIRE(escapee > 1);
    CHECK(cgroup_of(escapee).find("/bashexec-" + std::to_string(::getpid()) + "-") != std::string::npos);
    CHECK(executor.kill(id));
    CHECK(executor.wait(id).status == task_status::killed);
    CHECK_FALSE(pid_alive(escapee));
  }
  CHECK(our_cgroups(parent).empty());
}

// ---- issue 10 point 4: zero orphans by default ----

TEST_CASE("containment: the default config of a fork_exec executor contains with a cgroup and says so on every result",
          "[containment][default]") {
  SKIP_UNLESS(cgroup_missing());
  fork_executor executor(fast_config());
  CHECK(executor.config().containment == process_containment::automatic);
  CHECK(executor.containment() == containment_mechanism::cgroup);
  CHECK(executor.containment_fallback().empty());
  const run_result result = executor.run(executor.resolve({.command = "cat /proc/self/cgroup"}));
  CHECK(result.containment == containment_mechanism::cgroup);
  CHECK(result.out.text.find("/bashexec-" + std::to_string(::getpid()) + "-") != std::string::npos);
  CHECK(result.out.text.find("/spawn-") != std::string::npos);
  const task_id id = start(executor, "sleep 0.05");
  CHECK(executor.get(id).containment == containment_mechanism::cgroup);
  CHECK(executor.wait(id).containment == containment_mechanism::cgroup);
}

TEST_CASE("containment: over posix_spawner an executor falls back to the process group (no hook) and says so",
          "[containment][default]") {
  posix_spawn_executor executor(fast_config());
  CHECK(executor.containment() == containment_mechanism::process_group);
  CHECK(executor.containment_fallback().find("posix_spawn") != std::string::npos);
  CHECK(executor.run(executor.resolve({.command = "true"})).containment == containment_mechanism::process_group);
  const task_id id = start(executor, "true");
  CHECK(executor.wait(id).containment == containment_mechanism::process_group);
}

TEST_CASE("containment: the default local_executor contains: a setsid daemon of a foreground run is gone after it",
          "[containment][default]") {
  SKIP_UNLESS(cgroup_missing());
  local_executor executor(fast_config());
  CHECK(executor.containment() == containment_mechanism::cgroup);
  const std::string marker = fresh_marker();
  const run_result result = executor.run(executor.resolve({.command = escape_command(escape_forms[0], marker)}));
  CHECK(result.out.text.find("seen") != std::string::npos);
  CHECK(result.containment == containment_mechanism::cgroup);
  CHECK(processes_with(marker + "-x").empty());
}

TEST_CASE("containment: automatic containment never throws: an unusable cgroup_parent falls back to the process group",
          "[containment][default]") {
  auto config = fast_config();
  config.cgroup_parent = fs::temp_directory_path();  // not a cgroup2 directory
  fork_executor executor(config);
  CHECK(executor.containment() == containment_mechanism::process_group);
  CHECK(executor.containment_fallback().find("cgroup2") != std::string::npos);
  CHECK(executor.run(executor.resolve({.command = "true"})).containment == containment_mechanism::process_group);
  CHECK(guardians_of_self().empty());  // no guardian without a cgroup
}

namespace {

/// One way a command's life ends, driven to the end for an escape command
/// whose escapee carries `marker`; checks what the ending itself promises.
struct ending {
  const char* name;
  void (*drive)(fork_executor&, const escape_form&, const std::string& marker);
};

const ending endings[] = {
    {"the foreground run returns",
     [](fork_executor& executor, const escape_form& form, const std::string& marker) {
       const run_result result = executor.run(executor.resolve({.command = escape_command(form, marker)}));
       CHECK(result.out.text.find("seen") != std::string::npos);
       CHECK(result.containment == containment_mechanism::cgroup);
     }},
    {"a timeout",
     [](fork_executor& executor, const escape_form& form, const std::string& marker) {
       const run_result result =
           executor.run(executor.resolve({.command = escape_command(form, marker, "sleep 300"), .timeout = 3s}));
       CHECK(result.timed_out);
       CHECK(result.out.text.find("seen") != std::string::npos);  // the escapee ran before the timeout
     }},
    {"an abort",
     [](fork_executor& executor, const escape_form& form, const std::string& marker) {
       std::stop_source source;
       std::atomic<bool> seen{false};
       std::thread aborter([&] {
         seen = eventually([&] { return !processes_with(marker + "-x").empty(); }, 20s);
         source.request_stop();
       });
       const run_result result = executor.run(
           executor.resolve({.command = escape_command(form, marker, "sleep 300"), .stop = source.get_token()}));
       aborter.join();
       CHECK(seen.load());
       CHECK(result.aborted);
     }},
    {"kill of its background task",
     [](fork_executor& executor, const escape_form& form, const std::string& marker) {
       const task_id id = start(executor, escape_command(form, marker, "sleep 300"));
       REQUIRE(eventually([&] { return !processes_with(marker + "-x").empty(); }, 20s));
       CHECK(executor.kill(id));
       const task_snapshot facts = executor.wait(id);
       CHECK(facts.status == task_status::killed);
       CHECK(facts.containment == containment_mechanism::cgroup);
     }},
};

}  // namespace

TEST_CASE("containment: every escape form leaves no process after every ending (return, timeout, abort, kill)",
          "[containment][default]") {
  SKIP_UNLESS(cgroup_missing());
  fork_executor executor(fast_config());
  for (const auto& end : endings) {
    for (const auto& form : escape_forms) {
      INFO(form.name << " ended by " << end.name);
      const std::string marker = fresh_marker();
      end.drive(executor, form, marker);
      CHECK(processes_with(marker + "-x").empty());
    }
  }
}

TEST_CASE("containment: every escape form leaves no process after disposal, of running and settled tasks",
          "[containment][default]") {
  SKIP_UNLESS(cgroup_missing());
  std::vector<std::string> markers;
  {
    fork_executor executor(fast_config());
    for (const auto& form : escape_forms) {
      INFO(form.name);
      markers.push_back(fresh_marker());
      start(executor, escape_command(form, markers.back(), "sleep 300"));  // still running at disposal
      markers.push_back(fresh_marker());
      const task_id settled = start(executor, escape_command(form, markers.back()));  // settles, escapee lives on
      CHECK(executor.wait(settled).status == task_status::completed);
    }
    for (const auto& marker : markers) CHECK(eventually([&] { return !processes_with(marker + "-x").empty(); }, 20s));
  }
  for (const auto& marker : markers) CHECK(processes_with(marker + "-x").empty());
  CHECK(our_cgroups(*probe_cgroup().parent).empty());
  CHECK(children_of_self().empty());
}

#ifdef BASHEXEC_CONTAIN_HOLDER_PATH
TEST_CASE("containment: SIGKILL of the executor's process kills its contained commands (the guardian)",
          "[containment][default]") {
  SKIP_UNLESS(cgroup_missing());
  const std::string marker = fresh_marker();
  int out[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  const char* argv[] = {BASHEXEC_CONTAIN_HOLDER_PATH, marker.c_str(), nullptr};
  pid_t holder = -1;
  const int rc = ::posix_spawn(&holder, argv[0], &actions, nullptr, const_cast<char* const*>(argv), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  REQUIRE(rc == 0);
  std::string said;
  char buf[256];
  while (said.find('\n') == std::string::npos) {
    ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    said.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  CHECK(said == "containment cgroup\n");
  const bool running = eventually([&] { return processes_with(marker + "-bg").size() == 1 && processes_with(marker + "-fg").size() == 1; }, 20s);
  std::vector<long> escapees;
  fs::path mine;
  if (running) {
    escapees = {processes_with(marker + "-bg").front(), processes_with(marker + "-fg").front()};
    mine = executor_cgroup_of(escapees.front());
    CHECK(cgroup_of(escapees.front()).find("/bashexec-" + std::to_string(holder) + "-") != std::string::npos);
    CHECK_FALSE(mine.empty());
  }
  ::kill(holder, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(holder, &status, 0) == holder);
  CHECK(WIFSIGNALED(status));
  REQUIRE(running);
  CHECK(eventually([&] { return processes_with(marker + "-bg").empty() && processes_with(marker + "-fg").empty(); }, 10s));
  for (long pid : escapees) CHECK_FALSE(pid_alive(pid));
  // The guardian removes the directories and exits.
  CHECK(eventually([&] { return !fs::exists(mine); }, 10s));
  CHECK(eventually([&] { return processes_with(mine.string()).empty(); }, 10s));
}
#endif

#ifdef BASHEXEC_CLI_PATH
TEST_CASE("containment: SIGKILL of bashexec run leaves none of its command's escapees (sandboxed default mode)",
          "[containment][default][cli]") {
  SKIP_UNLESS(cgroup_missing());
  const std::string marker = fresh_marker();
  const std::string command = "export M=" + marker +
                              "; setsid bash -c 'exec -a \"$M-x\" sleep 300' </dev/null >/dev/null 2>&1 &\n"
                              " sleep 300";
  const char* argv[] = {BASHEXEC_CLI_PATH, "run", "--", command.c_str(), nullptr};
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  ::posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t cli = -1;
  const int rc = ::posix_spawn(&cli, argv[0], &actions, nullptr, const_cast<char* const*>(argv), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  const bool running = eventually([&] { return !processes_with(marker + "-x").empty(); }, 30s);
  ::kill(cli, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(cli, &status, 0) == cli);
  if (!running) {
    WARN("skipped: the command did not start under bashexec run here (no usable sandbox?)");
    return;
  }
  CHECK(eventually([&] { return processes_with(marker + "-x").empty(); }, 10s));
}
#endif

TEST_CASE("containment: the guardian lives outside the cgroup it kills, in its own session, and goes with the executor",
          "[containment][default]") {
  SKIP_UNLESS(cgroup_missing());
  {
    fork_executor executor(fast_config());
    INFO(executor.containment_fallback());
    REQUIRE(executor.containment() == containment_mechanism::cgroup);
    // posix_spawn returns once the kernel let go of the parent, a moment
    // before the new image's command line is readable.
    CHECK(eventually([] { return guardians_of_self().size() == 1; }, 5s));
    const auto guardians = guardians_of_self();
    REQUIRE(guardians.size() == 1);
    const long guardian = guardians.front();
    CHECK(cgroup_of(guardian) == cgroup_of(::getpid()));
    CHECK(::getsid(static_cast<pid_t>(guardian)) == guardian);
    // It holds the pipe's read end on stdin and nothing of the host's: 0, 1, 2 only.
    std::size_t fds = 0;
    for ([[maybe_unused]] const auto& fd : fs::directory_iterator("/proc/" + std::to_string(guardian) + "/fd")) ++fds;
    CHECK(fds == 3);
    // No command inherits the write end: a command sees only its own 0, 1, 2 (and ls's directory).
    const run_result result = executor.run(executor.resolve({.command = "ls /proc/self/fd | wc -l"}));
    CHECK(result.out.text == "4\n");
  }
  CHECK(guardians_of_self().empty());
  CHECK(children_of_self().empty());
}

TEST_CASE("containment: concurrent spawns grow the free list once, and later spawns reuse it", "[containment][default]") {
  SKIP_UNLESS(cgroup_missing());
  fork_executor executor(fast_config());
  auto three = [&] {
    std::vector<task_id> ids;
    for (int i = 0; i < 3; ++i) ids.push_back(start(executor, "sleep 0.3"));
    for (const auto& id : ids) CHECK(executor.wait(id).status == task_status::completed);
  };
  three();
  const auto mine = our_cgroups(*probe_cgroup().parent);
  REQUIRE(mine.size() == 1);
  const fs::path dir = *probe_cgroup().parent / mine.front();
  CHECK(spawn_cgroup_count(dir) == 3);
  three();
  CHECK(executor.run(executor.resolve({.command = "true"})).exit_code == 0);
  CHECK(spawn_cgroup_count(dir) == 3);
}

TEST_CASE("containment: a command that freezes its own cgroup is killed, and the next command does not inherit the freeze",
          "[containment][default]") {
  SKIP_UNLESS(cgroup_missing());
  auto mount = detail::find_cgroup2_mount();
  REQUIRE(mount);
  fork_executor executor(fast_config());
  const std::string freeze = "echo 1 > " + mount->point.string() +
                             "\"$(sed -n 's/^0:://p' /proc/self/cgroup)\"/cgroup.freeze; sleep 300";
  const auto begin = steady::now();
  const run_result frozen = executor.run(executor.resolve({.command = freeze, .timeout = 500ms}));
  CHECK(frozen.timed_out);
  CHECK(ms_since(begin) < 10000);
  const run_result next = executor.run(executor.resolve({.command = "echo ok", .timeout = 5s}));
  CHECK_FALSE(next.timed_out);
  CHECK(next.out.text == "ok\n");
}

// ---- issue 27: born in the cgroup (clone3 CLONE_INTO_CGROUP) ----

TEST_CASE("containment: fork_exec creates the child in its cgroup with clone3 where the kernel allows it",
          "[containment][clone3]") {
  SKIP_UNLESS(cgroup_missing());
#if !defined(__x86_64__)
  WARN("skipped: fork_exec has a clone3 trampoline only on x86_64");
  return;
#endif
  if (detail::clone_into_cgroup_refused().load()) {
    WARN("skipped: this kernel or a seccomp profile refused clone3(CLONE_INTO_CGROUP) earlier in this process");
    return;
  }
  fork_executor executor(fast_config());
  const run_result result = executor.run(executor.resolve({.command = "cat /proc/self/cgroup"}));
  CHECK(result.out.text.find("/spawn-") != std::string::npos);
  CHECK_FALSE(detail::clone_into_cgroup_refused().load());
}

TEST_CASE("containment: where a seccomp filter refuses clone3, fork_exec falls back to joining by cgroup.procs "
          "and the command is still in its cgroup",
          "[containment][clone3]") {
  SKIP_UNLESS(cgroup_missing());
  // A forked test child gets the filter (the same ENOSYS Docker's default
  // profile answers) and reports through its exit code: 0 contained and
  // fallen back, 1 not in a spawn cgroup, 2 the refusal not remembered,
  // 3 run threw, 10+ the filter could not be loaded.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    scmp_filter_ctx filter = ::seccomp_init(SCMP_ACT_ALLOW);
    if (!filter) ::_exit(10);
    if (::seccomp_rule_add(filter, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) != 0) ::_exit(11);
    if (::seccomp_load(filter) != 0) ::_exit(12);
    ::seccomp_release(filter);
    int code = 0;
    try {
      fork_executor executor(fast_config());
      const run_result result = executor.run(executor.resolve({.command = "cat /proc/self/cgroup"}));
      if (result.out.text.find("/spawn-") == std::string::npos) code = 1;
      else if (!detail::clone_into_cgroup_refused().load()) code = 2;
    } catch (...) {
      code = 3;
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("containment: a fork bomb started at once by a foreground run is contained: none of it outlives the run",
          "[containment][clone3]") {
  SKIP_UNLESS(cgroup_missing());
  fork_executor executor(fast_config());
  const std::string marker = fresh_marker();
  // 2^6 - 1 forks at once, each leaf renamed "$M-x" and in a new session;
  // the run's shell exits at once, without waiting for any of them.
  const std::string bomb = "export M=" + marker +
                           "; b() { if [ $1 -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & "
                           "else setsid bash -c 'exec -a \"$M-x\" sleep 300' </dev/null >/dev/null 2>&1 & fi; }; "
                           "b 5";
  const run_result result = executor.run(executor.resolve({.command = bomb}));
  CHECK(result.containment == containment_mechanism::cgroup);
  CHECK(processes_with(marker + "-x").empty());
  // And none is still coming up: nothing of it was ever outside the cgroup.
  std::this_thread::sleep_for(300ms);
  CHECK(processes_with(marker + "-x").empty());
}

TEST_CASE("containment: after a run whose stop wrote cgroup.kill, the next runs and tasks still run to their end "
          "(a killed cgroup is not reused: children born in one are SIGKILLed)",
          "[containment][clone3]") {
  SKIP_UNLESS(cgroup_missing());
  fork_executor executor(fast_config());
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    // Deaf to SIGTERM: the stop's SIGKILL rounds write cgroup.kill.
    exec_request stubborn{.command = "trap '' TERM; sleep 5"};
    stubborn.timeout = 50ms;
    const run_result killed = executor.run(executor.resolve(stubborn));
    CHECK(killed.timed_out);
    CHECK(killed.signal == SIGKILL);
    for (int next = 0; next < 3; ++next) {
      const run_result result = executor.run(executor.resolve({.command = "echo ok"}));
      CAPTURE(next, result.signal.value_or(0));
      CHECK(result.exit_code == 0);
      CHECK(result.out.text == "ok\n");
    }
    const task_id id = executor.start(executor.resolve({.command = "echo ok"}));
    const task_snapshot done = executor.wait(id);
    CHECK(done.status == task_status::completed);
    CHECK(done.exit_code == 0);
  }
}

TEST_CASE("containment: a child born in its cgroup runs with the host thread's CPU mask, never the pin around its "
          "clone (issue 27)",
          "[containment][cgroup]") {
  fork_executor executor(fast_config());
  auto allowed = [&] {
    const run_result r = executor.run(executor.resolve({.command = "grep Cpus_allowed_list /proc/self/status"}));
    REQUIRE(r.exit_code == 0);
    return r;
  };
  const run_result first = allowed();
  if (first.containment != containment_mechanism::cgroup) {
    WARN("skipped: no cgroup containment here (" << executor.containment_fallback() << ")");
    return;
  }
  cpu_set_t host;
  REQUIRE(::sched_getaffinity(0, sizeof host, &host) == 0);
  if (CPU_COUNT(&host) < 2) {
    WARN("skipped: this thread may run on one CPU only, so no pin is made");
    return;
  }
  std::ifstream status("/proc/thread-self/status");
  std::string line, mine;
  while (std::getline(status, line))
    if (line.rfind("Cpus_allowed_list", 0) == 0) mine = line + "\n";
  for (int call = 0; call < 20; ++call) {
    INFO("call " << call);
    CHECK(allowed().out.text == mine);
  }
  // A host thread restricted to one CPU: the child gets exactly that.
  int first_cpu = 0;
  while (!CPU_ISSET(first_cpu, &host)) ++first_cpu;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first_cpu, &one);
  REQUIRE(::sched_setaffinity(0, sizeof one, &one) == 0);
  const run_result narrowed = allowed();
  REQUIRE(::sched_setaffinity(0, sizeof host, &host) == 0);
  CHECK(narrowed.out.text == "Cpus_allowed_list:\t" + std::to_string(first_cpu) + "\n");
  CHECK(allowed().out.text == mine);
}

// cgroup containment (DESIGN.md "Beyond": no orphans, ever): with
// `containment = process_containment::cgroup` a command that calls setsid to
// leave its process group is still stopped by the foreground leftover rule,
// a timeout, kill() and disposal, and no cgroup directory outlives the
// executor. A machine without a usable cgroup v2 hierarchy makes a test
// WARN "skipped: …" and return, so a skip is always visible.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <bashexec/basic_executor.hpp>
#include <bashexec/confinement/bwrap.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/detail/cgroup.hpp>
#include <bashexec/local_executor.hpp>
#include <bashexec/spawn/fork_exec.hpp>

#include "executor_test_support.hpp"

namespace fs = std::filesystem;
using namespace bashexec;
using namespace std::chrono_literals;
using namespace test_support;

using fork_executor = basic_executor<policies<spawn_with<fork_exec>>>;
using bwrap_executor = basic_executor<policies<spawn_with<fork_exec>, confine_with<bwrap>>>;
using landlock_executor = basic_executor<policies<spawn_with<fork_exec>, confine_with<landlock>>>;

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

/// This process's per-spawn cgroups left under `parent`.
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
    CHECK(our_cgroups(parent).empty());
  }
  CHECK(our_cgroups(parent).empty());
}

TEST_CASE("containment: under process_group containment (the default) a setsid escapee survives run",
          "[containment]") {
  // The control case: it shows the escape is real. No cgroup needed.
  fork_executor executor(fast_config());
  const run_result result = executor.run(executor.resolve({.command = escape_then()}));
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
  const run_result result = executor.run(executor.resolve({.command = escape_then("sleep 30"), .timeout = 300ms}));
  CHECK(ms_since(begin) < 3000);
  CHECK(result.timed_out);
  const long pid = first_pid(result.out.text);
  REQUIRE(pid > 1);
  CHECK_FALSE(pid_alive(pid));
  CHECK(our_cgroups(*probe_cgroup().parent).empty());
}

TEST_CASE("containment: kill() of a background task kills its setsid escapee", "[containment]") {
  SKIP_UNLESS(cgroup_missing());
  fork_executor executor(contained_config());
  const task_id id = start(executor, escape_then("sleep 100"));
  const long pid = first_pid_of(executor, id);
  REQUIRE(pid > 1);
  CHECK(pid_alive(pid));
  CHECK(cgroup_of(pid).find("/bashexec-" + std::to_string(::getpid()) + "-") != std::string::npos);
  CHECK(executor.kill(id));
  CHECK(executor.wait(id).status == task_status::killed);
  CHECK_FALSE(pid_alive(pid));
  CHECK(our_cgroups(*probe_cgroup().parent).empty());  // removed once empty, at settle
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
    CHECK(our_cgroups(parent).size() == 2);
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

TEST_CASE("containment: many short runs neither leak cgroups nor leave children", "[containment]") {
  SKIP_UNLESS(cgroup_missing());
  fork_executor executor(contained_config());
  for (int i = 0; i < 20; ++i) CHECK(executor.run(executor.resolve({.command = "true"})).exit_code == 0);
  CHECK(our_cgroups(*probe_cgroup().parent).empty());
  CHECK(children_of_self().empty());
}

TEST_CASE("containment: posix_spawner cannot join a cgroup before exec, so the executor refuses it",
          "[containment][config]") {
  try {
    local_executor executor(contained_config());
    FAIL("local_executor accepted cgroup containment it cannot apply");
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
  config.cgroup_parent = "/sys/fs/cgroup";
  CHECK_THROWS_WITH(fork_executor(config), Catch::Contains("cgroup_parent"));
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
                   "[containment][sandbox]", landlock_executor) {
  SKIP_UNLESS(cgroup_missing());
  if constexpr (std::is_same_v<TestType, landlock_executor>) {
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

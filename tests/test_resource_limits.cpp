// Resource limits (docs/contract.md "Beyond": optional limits
// on processes, memory and CPU time so a runaway command cannot take the host
// down): `executor_config::limits` reaches every child through the plan and
// fork_exec's prlimit64 step, binds the command, and never the host.
// bash's units: `ulimit -v` is KiB, `ulimit -f` 1024-byte blocks, `-t`
// seconds; without -H it shows the soft limit.
#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <bashexec/basic_executor.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/local_executor.hpp>
#include <bashexec/signal_name.hpp>
#include <bashexec/spawn/fork_exec.hpp>

#include "executor_test_support.hpp"

using namespace bashexec;
using namespace std::chrono_literals;
using test_support::fast_config;
using test_support::ms_since;
using test_support::steady;

namespace {

/// The composition that can apply limits: fork_exec has the pre-exec step.
using limited_executor = basic_executor<policies<spawn_with<fork_exec>>>;

constexpr std::uint64_t mib = 1024 * 1024;

run_result run(limited_executor& executor, std::string command, std::chrono::milliseconds timeout = 20s) {
  return executor.run(executor.resolve({.command = std::move(command), .timeout = timeout}));
}

constexpr std::array<int, 5> limited_resources{RLIMIT_NPROC, RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE};

std::vector<std::pair<std::uint64_t, std::uint64_t>> host_limits() {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (int resource : limited_resources) {
    rlimit value{};
    REQUIRE(::getrlimit(resource, &value) == 0);
    out.emplace_back(value.rlim_cur, value.rlim_max);
  }
  return out;
}

std::uint64_t host_hard_limit(int resource) {
  rlimit value{};
  REQUIRE(::getrlimit(resource, &value) == 0);
  return value.rlim_max;
}

/// Every field set, each well above what the test commands need.
resource_limits all_limits() {
  resource_limits limits;
  limits.max_processes = 4000;
  limits.max_address_space_bytes = 512 * mib;
  limits.max_cpu_time = 30s;
  limits.max_file_size_bytes = 8 * mib;
  limits.max_open_files = 64;
  return limits;
}

constexpr const char* report_limits =
    "ulimit -u; ulimit -Hu; ulimit -v; ulimit -Hv; ulimit -t; ulimit -Ht; ulimit -f; ulimit -Hf; ulimit -n; ulimit -Hn";
constexpr const char* expected_report =
    "4000\n4000\n"      // processes
    "524288\n524288\n"  // 512 MiB in KiB
    "30\n31\n"          // CPU: SIGXCPU at 30 s, SIGKILL at 31 s
    "8192\n8192\n"      // 8 MiB in 1 KiB blocks
    "64\n64\n";

/// Processes whose real uid is `uid`, from /proc.
int processes_of(uid_t uid) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream status(entry.path() / "status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Uid:", 0) == 0) {
        if (std::stoul(line.substr(4)) == uid) ++count;
        break;
      }
  }
  return count;
}

}  // namespace

TEST_CASE("limits: ulimit inside a foreground command reports every configured limit", "[limits]") {
  auto config = fast_config();
  config.limits = all_limits();
  limited_executor executor(config);
  auto result = run(executor, report_limits);
  CHECK(result.exit_code == 0);
  CHECK(result.err.text.empty());
  CHECK(result.out.text == expected_report);
}

TEST_CASE("limits: a background task gets the same limits", "[limits]") {
  auto config = fast_config();
  config.limits = all_limits();
  limited_executor executor(config);
  auto id = executor.start(executor.resolve({.command = report_limits}));
  auto done = executor.wait(id);
  CHECK(done.status == task_status::completed);
  CHECK(done.exit_code == 0);
  CHECK(executor.read_output(id).delta == expected_report);
}

TEST_CASE("limits: an unset field keeps the host's limit, and none leaks into the host", "[limits]") {
  const auto before = host_limits();
  auto config = fast_config();
  config.limits.max_open_files = 32;
  limited_executor executor(config);
  auto result = run(executor, "ulimit -n; ulimit -Sv; ulimit -Hv");
  CHECK(result.exit_code == 0);
  const auto as = before[1];
  auto kib = [](std::uint64_t bytes) {
    return bytes == RLIM_INFINITY ? std::string("unlimited") : std::to_string(bytes / 1024);
  };
  CHECK(result.out.text == "32\n" + kib(as.first) + "\n" + kib(as.second) + "\n");

  config.limits = all_limits();
  limited_executor all(config);
  CHECK(run(all, "exit 0").exit_code == 0);
  all.wait(all.start(all.resolve({.command = "exit 0"})));
  CHECK(host_limits() == before);
}

TEST_CASE("limits: a value above the host's hard limit is clamped to it, never raised", "[limits]") {
  const std::uint64_t hard = host_hard_limit(RLIMIT_NOFILE);
  if (hard == RLIM_INFINITY || hard > (std::uint64_t{1} << 40)) {
    WARN("skipped: the host's RLIMIT_NOFILE hard limit is unbounded");
    return;
  }
  auto config = fast_config();
  config.limits.max_open_files = hard + 1000;
  limited_executor executor(config);
  auto result = run(executor, "ulimit -Sn; ulimit -Hn");
  CHECK(result.exit_code == 0);
  CHECK(result.out.text == std::to_string(hard) + "\n" + std::to_string(hard) + "\n");
}

TEST_CASE("limits: a write past max_file_size_bytes dies of SIGXFSZ and leaves the file at the limit", "[limits]") {
  test_support::temp_dir dir;
  auto config = fast_config();
  config.cwd = dir.path();
  config.limits.max_file_size_bytes = 1 * mib;
  limited_executor executor(config);
  auto result = run(executor, "exec head -c 2M /dev/zero > big");
  REQUIRE(result.signal.has_value());
  CHECK(signal_name(*result.signal) == "SIGXFSZ");
  CHECK(std::filesystem::file_size(dir.path() / "big") == 1 * mib);
  // Below the limit everything works.
  CHECK(run(executor, "head -c 1000 /dev/zero > small && wc -c < small").out.text == "1000\n");
}

TEST_CASE("limits: a CPU spinner dies of SIGXCPU at max_cpu_time, long before its timeout", "[limits]") {
  auto config = fast_config();
  config.limits.max_cpu_time = 1s;
  limited_executor executor(config);
  const auto started = steady::now();
  auto result = run(executor, "while :; do :; done", 30s);
  CHECK(ms_since(started) < 10000);
  CHECK_FALSE(result.timed_out);
  REQUIRE(result.signal.has_value());
  // SIGXCPU at the soft limit; SIGKILL one second later would mean the
  // spinner survived it (it does not: the default action terminates).
  CHECK(signal_name(*result.signal) == "SIGXCPU");
}

TEST_CASE("limits: a memory hog fails under max_address_space_bytes while the host is unaffected", "[limits]") {
  auto config = fast_config();
  config.limits.max_address_space_bytes = 64 * mib;
  limited_executor executor(config);
  // Command substitution makes bash hold all 128 MiB in one string.
  auto result = run(executor, "x=$(head -c 128M /dev/zero | tr '\\0' a); echo survived ${#x}");
  CHECK(result.exit_code != 0);
  CHECK(result.out.text.find("survived") == std::string::npos);
  CHECK(result.err.text.find("cannot allocate") != std::string::npos);
  // Small commands still fit, and the next run is as healthy as the first.
  auto small = run(executor, "x=$(head -c 1M /dev/zero | tr '\\0' a); echo ${#x}");
  CHECK(small.exit_code == 0);
  CHECK(small.out.text == "1048576\n");
}

TEST_CASE("limits: max_open_files bounds the descriptor numbers a command may open", "[limits]") {
  auto config = fast_config();
  config.limits.max_open_files = 16;
  limited_executor executor(config);
  auto result = run(executor, "exec 15>/dev/null && echo fd15; exec 20>/dev/null && echo fd20");
  CHECK(result.out.text == "fd15\n");
  CHECK(result.err.text.find("20: Bad file descriptor") != std::string::npos);
}

TEST_CASE("limits: max_processes is RLIMIT_NPROC, which binds any uid but root", "[limits]") {
  auto config = fast_config();
  config.limits.max_processes = 4000;
  {
    limited_executor executor(config);
    auto shown = run(executor, "ulimit -u; ulimit -Hu");
    CHECK(shown.out.text == "4000\n4000\n");
  }

  // dash stops at the first failed fork ("Cannot fork") instead of retrying
  // for seconds like bash; 40 forks against a few free slots cannot all fit.
  const std::string forker =
      "i=0; while [ $i -lt 40 ]; do sleep 2 >/dev/null 2>&1 & i=$((i+1)); done; wait";
  uid_t uid = ::getuid();
  std::string command = "exec /bin/sh -c '" + forker + "'";
  if (uid == 0) {
    WARN("skipped: RLIMIT_NPROC does not bind root; checking it against nobody (uid 65534) through setpriv");
    if (::access("/usr/bin/setpriv", X_OK) != 0) {
      WARN("skipped: /usr/bin/setpriv is not installed");
      return;
    }
    uid = 65534;
    command = "exec /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups /bin/sh -c '" + forker + "'";
  }
  // The count is per user, system-wide: leave room for what already runs.
  config.limits.max_processes = static_cast<std::uint64_t>(processes_of(uid)) + 3;
  config.cwd = "/";
  limited_executor executor(config);
  auto result = run(executor, command);
  CAPTURE(result.err.text);
  CHECK(result.exit_code != 0);
  std::string err = result.err.text;
  std::transform(err.begin(), err.end(), err.begin(), [](unsigned char c) { return std::tolower(c); });
  CHECK(err.find("fork") != std::string::npos);
}

TEST_CASE("limits: posix_spawner cannot apply limits, so the executor refuses them at construction", "[limits]") {
  auto config = fast_config();
  config.limits.max_cpu_time = 5s;
  try {
    posix_spawn_executor executor(config);
    FAIL("posix_spawn_executor accepted resource limits it cannot apply");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK(what.find("limits") != std::string::npos);
    CHECK(what.find("fork_exec") != std::string::npos);
  }
  // Without limits nothing changes for it.
  CHECK_NOTHROW(posix_spawn_executor(fast_config()));

  // The policy itself refuses a plan with limits rather than ignore them.
  launch_plan plan;
  plan.argv = {"/bin/true"};
  plan.limits.add({RLIMIT_CPU, 5, 5});
  CHECK_THROWS_AS(posix_spawner{}.spawn(plan), std::invalid_argument);
}

TEST_CASE("limits: validation rejects a zero or negative limit, naming the field", "[limits][config]") {
  auto expect_rejected = [](auto edit, const std::string& field) {
    CAPTURE(field);
    auto config = fast_config();
    edit(config.limits);
    try {
      validate(config);
      FAIL("accepted an invalid " << field);
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find(field) != std::string::npos);
    }
    CHECK_THROWS_AS(limited_executor(config), std::invalid_argument);
  };
  expect_rejected([](resource_limits& l) { l.max_processes = 0; }, "limits.max_processes");
  expect_rejected([](resource_limits& l) { l.max_address_space_bytes = 0; }, "limits.max_address_space_bytes");
  expect_rejected([](resource_limits& l) { l.max_cpu_time = 0s; }, "limits.max_cpu_time");
  expect_rejected([](resource_limits& l) { l.max_cpu_time = -3s; }, "limits.max_cpu_time");
  expect_rejected([](resource_limits& l) { l.max_file_size_bytes = 0; }, "limits.max_file_size_bytes");
  expect_rejected([](resource_limits& l) { l.max_open_files = 0; }, "limits.max_open_files");

  auto config = fast_config();
  CHECK_FALSE(config.limits.any());  // the default changes nothing
  config.limits = all_limits();
  CHECK_NOTHROW(validate(config));
}

TEST_CASE("limits: fork_exec reports a limit the kernel refuses as a setrlimit step, and nothing runs", "[limits]") {
  test_support::temp_dir dir;
  launch_plan plan;
  plan.argv = {"/bin/sh", "-c", "touch ran"};
  plan.workdir = dir.path();
  plan.limits.add({RLIMIT_FSIZE, 1 * mib, 1 * mib});
  plan.limits.add({RLIMIT_NOFILE, 100, 50});  // soft above hard: EINVAL
  try {
    auto child = fork_exec{}.spawn(plan);
    FAIL("spawned pid " << child.pid() << " despite an invalid limit");
  } catch (const pre_exec_failed&) {
    FAIL("a limit failure is not the hook's");
  } catch (const infrastructure_error& e) {
    CHECK(std::string(e.what()) == "setrlimit RLIMIT_NOFILE: Invalid argument");
  }
  CHECK_FALSE(std::filesystem::exists(dir.path() / "ran"));
  CHECK(test_support::children_of_self().empty());
}

TEST_CASE("limits: they compose with a pre-exec hook (Landlock), applied after it", "[limits]") {
  if (landlock::abi() < 0) {
    WARN("skipped: Landlock is not available here");
    return;
  }
  test_support::temp_dir dir;
  auto config = fast_config();
  config.cwd = dir.path();
  config.sandbox.default_mode = sandbox_mode::workspace_write;
  config.limits.max_open_files = 48;
  config.limits.max_file_size_bytes = 1 * mib;
  basic_executor<policies<spawn_with<fork_exec>, confine_with<landlock>>> executor(config);
  auto result = executor.run(executor.resolve({.command = "ulimit -n; ulimit -f; echo x > inside && echo wrote"}));
  CHECK(result.exit_code == 0);
  CHECK(result.out.text == "48\n1024\nwrote\n");
  REQUIRE(result.sandbox.has_value());
  CHECK_FALSE(result.sandbox->denied);
}

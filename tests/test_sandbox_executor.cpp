// Executor-level sandbox tests (docs/contract.md item 13–17 and "Beyond": protected
// paths): every confining backend driven THROUGH basic_executor — `run`, and
// `start` + `wait` + `read_output` — rather than through launch plans (those
// policy-level laws live in test_confinement_policies.cpp). A capability the
// machine lacks (bwrap, Landlock) makes a test WARN "skipped: …" and return,
// so a skip is always visible.

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <bashexec/basic_executor.hpp>
#include <bashexec/confinement/bwrap.hpp>
#include <bashexec/confinement/chain.hpp>
#include <bashexec/spawn/prespawned.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/confinement/runner_command.hpp>
#include <bashexec/local_executor.hpp>
#include <bashexec/sandbox_executor.hpp>
#include <bashexec/spawn/fork_exec.hpp>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "executor_test_support.hpp"
#include "sandbox_test_support.hpp"

namespace fs = std::filesystem;
using namespace bashexec;
using namespace test_support;

using runner_executor = basic_executor<policies<spawn_with<fork_exec>, confine_with<runner_command>>>;
/// The same over the prespawned pool (issue 14: every confinement's
/// executor tests run over it too). Not warmed: the runner tests count
/// probes and expect failures from the first call.
using prespawned_runner_executor = basic_executor<policies<spawn_with<prespawned>, confine_with<runner_command>>>;
/// sandbox_executor's chain over the prespawned pool.
using prespawned_sandbox_executor =
    basic_executor<policies<spawn_with<prespawned>, confine_with<sandbox_policies::confinement>,
                            collect_with<sandbox_policies::output>, own_with<sandbox_policies::ownership>>>;

namespace {

/// Directories of the sandbox tests live under /var/tmp: /tmp is granted by
/// workspace-write, so "outside the workspace" must not be there.
using scratch_dir = test_support::temp_dir;

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

/// A workspace and an "outside" sibling, both exported to the command.
struct dirs {
  scratch_dir workspace{"/var/tmp", "bashexec-ws-"};
  scratch_dir outside{"/var/tmp", "bashexec-out-"};
  std::map<std::string, std::string> env() const { return {{"WS", workspace.str()}, {"OUT", outside.str()}}; }
};

exec_request command(std::string text, std::map<std::string, std::string> env = {},
                     std::optional<sandbox_mode> mode = std::nullopt) {
  exec_request request;
  request.command = std::move(text);
  request.env = std::move(env);
  request.mode = mode;
  return request;
}

/// A unique name under /tmp, removed with the object (Landlock's /tmp is the real one).
struct tmp_name {
  fs::path path;
  tmp_name() {
    static std::atomic<int> counter{0};
    path = fs::path("/tmp") / ("bashexec-sbx-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
  }
  ~tmp_name() {
    std::error_code ignored;
    fs::remove(path, ignored);
  }
};

std::string host_line(const std::string& prefix) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) return line;
  return {};
}

/// A stand-in for bwrap that fails the way bwrap does without user
/// namespaces, and counts its invocations in `<dir>/count`.
struct failing_bwrap {
  scratch_dir dir{"/var/tmp", "bashexec-fakebwrap-"};
  fs::path script = dir.path() / "bwrap";
  failing_bwrap() {
    write_file(script,
               "#!/bin/sh\n"
               "echo x >> \"$(dirname \"$0\")/count\"\n"
               "echo 'bwrap: setting up uid map: Permission denied' >&2\n"
               "exit 1\n");
    fs::permissions(script, fs::perms::owner_all);
  }
  std::size_t invocations() const {
    const std::string text = slurp(dir.path() / "count");
    return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  }
};

/// A confining candidate that never works; counts how often it was asked.
struct broken_backend {
  static constexpr bool confines = true;
  static constexpr bool needs_pre_exec = false;
  static constexpr std::string_view name = "broken";
  static constexpr std::string_view remedy = "repair the broken backend";
  static inline std::atomic<int> prepares{0};

  using config = no_config;
  explicit broken_backend(const sandbox_config&, const config& = {}) {}
  confined_launch prepare(sandbox_mode mode, const fs::path&, launch_plan&) const {
    ++prepares;
    throw sandbox_unavailable(mode, "broken: this backend never confines anything");
  }
  std::optional<std::string> runner_failure(confined_launch&, std::string_view, std::string_view) const {
    return std::nullopt;
  }
  bool is_denial(std::string_view) const { return false; }
};
static_assert(confining_policy<broken_backend>);

/// `read` the shell's process group from /proc (the group leader may be bwrap).

}  // namespace

// ---------------------------------------------------------------------------
// Modes through the executor, for each backend

TEMPLATE_TEST_CASE(
    "modes: under workspace-write the workspace root defaults to the cwd, and writes follow it, through run "
    "and start (contract 13, 14, the rest of the mode law is tests/laws/test_confinement_laws.cpp)",
    "[sandbox][executor]", bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>());
  {
    dirs d;
    executor_config config = fast_config();
    config.cwd = d.workspace.path();
    config.sandbox.default_mode = sandbox_mode::workspace_write;
    TestType exec(config);
    CHECK(exec.workspace_root() == d.workspace.path());

    for (via how : both_ways) {
      INFO("via " << name_of(how));
      fs::remove(d.workspace.path() / "f");
      tmp_name in_tmp;
      auto env = d.env();
      env["T"] = in_tmp.path.string();

      observed inside = observe(exec, command("echo x > \"$WS/f\" && echo y > \"$T\" && echo ok", env), how);
      CHECK(inside.exit_code == 0);
      CHECK(inside.text == "ok\n");
      REQUIRE(inside.sandbox);
      CHECK(inside.sandbox->mode == sandbox_mode::workspace_write);
      CHECK_FALSE(inside.sandbox->denied);
      CHECK(inside.sandbox->level == expected_level<TestType>(sandbox_mode::workspace_write));
      CHECK(slurp(d.workspace.path() / "f") == "x\n");

      observed outside = observe(exec, command("echo x > \"$OUT/f\"", env), how);
      CHECK(outside.exit_code != 0);
      REQUIRE(outside.sandbox);
      CHECK(outside.sandbox->mode == sandbox_mode::workspace_write);
      CHECK(outside.sandbox->denied);
      CHECK_FALSE(fs::exists(d.outside.path() / "f"));
    }
  }
}

TEMPLATE_TEST_CASE(
    "modes: danger-full-access is spawned unwrapped and reports {mode, denied=false} without a level "
    "(contract 13)",
    "[sandbox][executor]", bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>());
  dirs d;
  executor_config config = fast_config();
  config.sandbox.workspace_root = d.workspace.path();
  TestType exec(config);
  char host_ns[256] = {};
  REQUIRE(::readlink("/proc/self/ns/mnt", host_ns, sizeof host_ns - 1) > 0);
  const std::string host_nnp = host_line("NoNewPrivs:");
  REQUIRE_FALSE(host_nnp.empty());
  // Both backends set no_new_privs (bwrap itself, Landlock's hook) and bwrap
  // enters a new mount namespace: an unwrapped child shares the host's.
  const std::string probe = "readlink /proc/self/ns/mnt; grep NoNewPrivs: /proc/self/status; ";

  for (via how : both_ways) {
    INFO("via " << name_of(how));
    fs::remove(d.outside.path() / "f");
    observed free = observe(
        exec, command(probe + "echo x > \"$OUT/f\" && echo wrote", d.env(), sandbox_mode::danger_full_access), how);
    CHECK(free.exit_code == 0);
    REQUIRE(free.sandbox);
    CHECK(free.sandbox->mode == sandbox_mode::danger_full_access);
    CHECK_FALSE(free.sandbox->denied);
    CHECK_FALSE(free.sandbox->level);
    CHECK_FALSE(free.sandbox->runner_failed);
    CHECK(free.text == std::string(host_ns) + "\n" + host_nnp + "\nwrote\n");
    CHECK(fs::exists(d.outside.path() / "f"));

    // Control: the same probe under read-only does show the wrap.
    if (host_nnp.find('0') != std::string::npos) {
      observed confined = observe(exec, command(probe, d.env()), how);
      CHECK(confined.exit_code == 0);
      CHECK_THAT(confined.text, Catch::Contains("NoNewPrivs:\t1"));
      if constexpr (confined_by<TestType, bwrap>)
        CHECK_THAT(confined.text, !Catch::Contains(std::string(host_ns)));
    }

    // A failing unwrapped command is never classified as a denial.
    observed failing =
        observe(exec, command("echo 'Permission denied' >&2; exit 1", {}, sandbox_mode::danger_full_access), how);
    CHECK(failing.exit_code == 1);
    REQUIRE(failing.sandbox);
    CHECK_FALSE(failing.sandbox->denied);
  }
}

TEMPLATE_TEST_CASE(
    "task facts: an escalated background task and its read-only neighbour each carry their own mode and denial, "
    "stamped before completion listeners run (contract 10, 17)",
    "[sandbox][executor][background]",
    bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>());
  dirs d;
  executor_config config = fast_config();
  config.sandbox.workspace_root = d.workspace.path();
  TestType exec(config);

  std::mutex mutex;
  std::map<std::string, std::optional<sandbox_info>> heard;
  auto subscription = exec.on_task_done([&](const task_snapshot& snapshot) {
    std::lock_guard lock(mutex);
    heard[snapshot.id.value()] = snapshot.sandbox;
  });

  const task_id escalated =
      exec.start(exec.resolve(command("echo a > \"$WS/a\"", d.env(), sandbox_mode::workspace_write)));
  const task_id neighbour = exec.start(exec.resolve(command("echo b > \"$WS/b\"", d.env())));

  const task_snapshot escalated_done = exec.wait(escalated);
  const task_snapshot neighbour_done = exec.wait(neighbour);
  REQUIRE(escalated_done.sandbox);
  REQUIRE(neighbour_done.sandbox);
  CHECK(escalated_done.status == task_status::completed);
  CHECK(escalated_done.exit_code == 0);
  CHECK(escalated_done.sandbox->mode == sandbox_mode::workspace_write);
  CHECK_FALSE(escalated_done.sandbox->denied);
  CHECK(neighbour_done.exit_code != 0);
  CHECK(neighbour_done.sandbox->mode == sandbox_mode::read_only);
  CHECK(neighbour_done.sandbox->denied);
  CHECK(fs::exists(d.workspace.path() / "a"));
  CHECK_FALSE(fs::exists(d.workspace.path() / "b"));

  // get() after the fact says the same.
  CHECK(exec.get(escalated).sandbox->mode == sandbox_mode::workspace_write);
  CHECK(exec.get(neighbour).sandbox->denied);

  // The listeners saw the final facts, not the facts of a running task.
  REQUIRE(eventually([&] {
    std::lock_guard lock(mutex);
    return heard.size() == 2;
  }));
  std::lock_guard lock(mutex);
  REQUIRE(heard.at(escalated.value()));
  REQUIRE(heard.at(neighbour.value()));
  CHECK(heard.at(escalated.value())->mode == sandbox_mode::workspace_write);
  CHECK_FALSE(heard.at(escalated.value())->denied);
  CHECK(heard.at(neighbour.value())->mode == sandbox_mode::read_only);
  CHECK(heard.at(neighbour.value())->denied);
}

/// A system python3 (not a pyenv shim that may want to write), if any.
std::optional<fs::path> system_python3() {
  if (detail::is_executable_file("/usr/bin/python3")) return fs::path("/usr/bin/python3");
  return detail::find_program("python3");
}

struct file_facts {
  fs::perms mode;
  std::int64_t mtime_ns;
  uid_t uid;
  gid_t gid;
  bool operator==(const file_facts&) const = default;
};

file_facts facts_of(const fs::path& path) {
  struct stat info {};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  return {static_cast<fs::perms>(info.st_mode & 07777),
          static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec, info.st_uid,
          info.st_gid};
}

/// The inode flags of `path` (FS_IOC_GETFLAGS), nullopt where the filesystem
/// has none (tmpfs).
std::optional<int> inode_flags(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  int flags = 0;
  const int rc = ::ioctl(fd, FS_IOC_GETFLAGS, &flags);
  ::close(fd);
  if (rc != 0) return std::nullopt;
  return flags;
}

TEMPLATE_TEST_CASE(
    "modes: under read-only metadata writes on a host file (chmod, touch -m, chown, setxattr, chattr) are denied and "
    "change nothing (contract 13, 16)",
    "[sandbox][executor][metadata]",
    bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>());
  dirs d;
  const fs::path host = d.outside.path() / "host";
  write_file(host, "content\n");
  fs::permissions(host, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  const file_facts before = facts_of(host);

  executor_config config = fast_config();
  config.sandbox.workspace_root = d.workspace.path();
  TestType exec(config);
  auto env = d.env();
  env["HOST"] = host.string();
  // Root may give the file away; anyone else may at least "change" it to
  // their own ids, which is still a chown(2) call the sandbox must refuse.
  const std::string owner = ::geteuid() == 0 ? "12345:12345" : std::to_string(::geteuid()) + ":" +
                                                                   std::to_string(::getegid());
  std::vector<std::string> attacks{"chmod 000 \"$HOST\"", "touch -m -d '2001-02-03 04:05:06' \"$HOST\"",
                                   "touch -a -d '2001-02-03 04:05:06' \"$HOST\"", "chown " + owner + " \"$HOST\""};
  if (detail::find_program("setfattr")) {
    attacks.push_back("setfattr -n user.bashexec -v x \"$HOST\"");
  } else if (auto python = system_python3()) {
    attacks.push_back("'" + python->string() +
                      "' -c 'import os, sys\n"
                      "try:\n"
                      "    os.setxattr(os.environ[\"HOST\"], \"user.bashexec\", b\"x\")\n"
                      "except OSError as e:\n"
                      "    sys.exit(os.path.basename(sys.argv[0]) + \": setxattr: \" + e.strerror)\n'");
  } else {
    WARN("setxattr sub-check skipped: neither setfattr nor python3 is installed");
  }
  // Inode flags (ioctl FS_IOC_SETFLAGS): nodump, which the owner may set.
  const std::optional<int> flags_before = inode_flags(host);
  if (!flags_before)
    WARN("chattr sub-check skipped: " << d.outside.path() << " is on a filesystem without inode flags");
  else if (!detail::find_program("chattr"))
    WARN("chattr sub-check skipped: chattr (e2fsprogs) is not installed");
  else
    attacks.push_back("chattr +d \"$HOST\"");

  for (const std::string& attack : attacks) {
    INFO("command " << attack);
    observed denied = observe(exec, command(attack, env), via::run);
    INFO(denied.text);
    CHECK(denied.exit_code != 0);
    REQUIRE(denied.sandbox);
    CHECK(denied.sandbox->mode == sandbox_mode::read_only);
    CHECK(denied.sandbox->denied);
    CHECK_FALSE(denied.sandbox->runner_failed);
    CHECK(denied.sandbox->level == expected_level<TestType>(sandbox_mode::read_only));
    if (confined_by<TestType, landlock> && landlock::abi() >= landlock::full_enforcement_abi &&
        detail::seccomp_filter_supported)
      CHECK(denied.sandbox->level == enforcement::full);
    CHECK(facts_of(host) == before);
    CHECK(inode_flags(host) == flags_before);
  }
  char value[8];
  CHECK(::getxattr(host.c_str(), "user.bashexec", value, sizeof value) < 0);
}

TEMPLATE_TEST_CASE(
    "modes: under workspace-write metadata changes inside the workspace work (chmod +x of a script) — Landlock "
    "reports partial, since it cannot refuse them outside (contract 13, 14)",
    "[sandbox][executor][metadata]",
    bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>());
  dirs d;
  write_file(d.workspace.path() / "run.sh", "#!/bin/sh\necho ran\n");
  fs::permissions(d.workspace.path() / "run.sh", fs::perms::owner_read | fs::perms::owner_write);
  executor_config config = fast_config();
  config.sandbox.workspace_root = d.workspace.path();
  config.sandbox.default_mode = sandbox_mode::workspace_write;
  TestType exec(config);
  for (via how : both_ways) {
    INFO("via " << name_of(how));
    observed script = observe(
        exec, command("chmod +x \"$WS/run.sh\" && touch -m -d '2001-02-03' \"$WS/run.sh\" && \"$WS/run.sh\"", d.env()),
        how);
    INFO(script.text);
    CHECK(script.exit_code == 0);
    CHECK(script.text == "ran\n");
    REQUIRE(script.sandbox);
    CHECK_FALSE(script.sandbox->denied);
    CHECK(script.sandbox->level == expected_level<TestType>(sandbox_mode::workspace_write));
    if constexpr (confined_by<TestType, landlock>) CHECK(script.sandbox->level == enforcement::partial);
    CHECK((fs::status(d.workspace.path() / "run.sh").permissions() & fs::perms::owner_exec) != fs::perms::none);
    fs::permissions(d.workspace.path() / "run.sh", fs::perms::owner_read | fs::perms::owner_write);
  }
}

TEMPLATE_TEST_CASE("kills: a confined foreground timeout still kills the whole process group (contract 4, 14)",
                   "[sandbox][executor][kill]",
                   bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>());
  TestType exec(fast_config());
  const std::string marker = unique_sleep();
  exec_request request = command("sleep " + marker + " & sleep " + marker);
  request.timeout = 300ms;
  const auto started = steady::now();
  run_result result = exec.run(exec.resolve(std::move(request)));
  CHECK(ms_since(started) < 5000);
  CHECK(result.timed_out);
  CHECK_FALSE(result.aborted);
  REQUIRE(result.sandbox);
  CHECK(result.sandbox->mode == sandbox_mode::read_only);
  CHECK_FALSE(result.sandbox->denied);
  CHECK(eventually([&] { return processes_with(marker).empty(); }, 5s));
}

TEMPLATE_TEST_CASE("kills: kill() of a confined background task ends it killed and its group gone (contract 4, 9, 14)",
                   "[sandbox][executor][kill]",
                   bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>());
  TestType exec(fast_config());
  const std::string marker = unique_sleep();
  const task_id id = exec.start(exec.resolve(command("sleep " + marker + " & sleep " + marker)));
  REQUIRE(eventually([&] { return processes_with(marker).size() >= 2; }));
  CHECK(exec.kill(id));
  const task_snapshot done = exec.wait(id);
  CHECK(done.status == task_status::killed);
  REQUIRE(done.sandbox);
  CHECK(done.sandbox->mode == sandbox_mode::read_only);
  CHECK_FALSE(done.sandbox->denied);
  CHECK_FALSE(done.sandbox->runner_failed);
  CHECK_FALSE(exec.kill(id));
  CHECK(eventually([&] { return processes_with(marker).empty(); }, 5s));
}

/// Stops of a confined command that land at any moment of the sandbox's
/// start-up: `stop(i)` makes run `i` of `runs` stop after a few ms.
/// Workspace-write, so a command that survived its stop leaves a marker.
TEMPLATE_TEST_CASE(
    "kills: a timeout or kill that lands while the sandbox starts up still stops the command, and no result says "
    "killed for a command that ran to its end (contract 3, 4, 20)",
    "[sandbox][executor][kill]",
    bwrap_executor, landlock_executor, prespawned_bwrap_executor, prespawned_landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>());
  dirs d;
  executor_config config = fast_config();
  // The default grace, longer than the command: a command the stop missed
  // would finish before the SIGKILL that ends the grace.
  config.kill_grace = 3000ms;
  config.sandbox.workspace_root = d.workspace.path();
  TestType exec(config);
  auto marker = [&](int i) { return d.workspace.path() / fmt::format("marker-{}", i); };
  auto request = [&](int i, sandbox_mode mode) {
    exec_request r = command(fmt::format("sleep 0.2; echo ran > \"$WS/marker-{}\"", i), d.env(), mode);
    r.timeout = std::chrono::milliseconds(1 + i % 8);  // 1..8 ms: across bwrap's whole start-up
    return r;
  };

  constexpr int runs = 24;
  SECTION("run: the timeout fires 1-8 ms after the spawn") {
    for (auto mode : {sandbox_mode::workspace_write, sandbox_mode::danger_full_access}) {
      INFO("mode " << to_string(mode) << " (danger-full-access: the unconfined spawn)");
      for (int i = 0; i < runs; ++i) {
        INFO("run " << i);
        std::error_code ignored;
        fs::remove(marker(i), ignored);
        const auto started = steady::now();
        run_result result = exec.run(exec.resolve(request(i, mode)));
        CHECK(ms_since(started) < 1500);
        CAPTURE(result.exit_code.value_or(-1), result.signal.value_or(-1), result.aborted, result.err.text);
        CHECK(result.timed_out);
        const bool ran = fs::exists(marker(i));
        CHECK_FALSE(ran);
        if (ran) CHECK_FALSE(result.signal);  // a completed command was not killed
      }
      std::this_thread::sleep_for(400ms);  // nothing the stops missed finishes later either
      for (int i = 0; i < runs; ++i) CHECK_FALSE(fs::exists(marker(i)));
    }
  }
  SECTION("start: kill() 0-5 ms after start") {
    for (int i = 0; i < runs / 2; ++i) {
      INFO("task " << i);
      const task_id id = exec.start(exec.resolve(request(i, sandbox_mode::workspace_write)));
      std::this_thread::sleep_for(std::chrono::milliseconds(i % 6));
      exec.kill(id);
      const auto started = steady::now();
      const task_snapshot done = exec.wait(id);
      CHECK(ms_since(started) < 1500);
      const bool ran = fs::exists(marker(i));
      CHECK_FALSE(ran);
      if (ran) CHECK(done.status == task_status::completed);
    }
    std::this_thread::sleep_for(400ms);
    for (int i = 0; i < runs / 2; ++i) CHECK_FALSE(fs::exists(marker(i)));
  }
}

// ---------------------------------------------------------------------------
// Runner failures

TEMPLATE_TEST_CASE(
    "runner failure: with a runner_command whose binary does not exist, run throws sandbox_unavailable and a "
    "background task "
    "settles runner_failed and not denied (contract 15, 16)",
    "[sandbox][executor][runner_command]", runner_executor, prespawned_runner_executor) {
  dirs d;
  executor_config config = fast_config();
  config.sandbox.workspace_root = d.workspace.path();
  TestType exec(config, runner_command::config{.argv = {"/nonexistent/runner"}, .failure_signatures = {"runner failed"}});

  for (auto mode : {sandbox_mode::read_only, sandbox_mode::workspace_write}) {
    INFO("mode " << to_string(mode));
    try {
      (void)exec.run(exec.resolve(command("echo x > \"$WS/f\"", d.env(), mode)));
      FAIL("run did not throw");
    } catch (const sandbox_unavailable& error) {
      CHECK(error.mode() == mode);
      CHECK(error.code == "SANDBOX_UNAVAILABLE");
      CHECK_THAT(std::string(error.what()), Catch::Contains("/nonexistent/runner"));
    }

    const task_id id = exec.start(exec.resolve(command("echo x > \"$WS/f\"", d.env(), mode)));
    const task_snapshot done = exec.wait(id);
    REQUIRE(done.sandbox);
    CHECK(done.sandbox->mode == mode);
    CHECK(done.sandbox->runner_failed);
    CHECK_FALSE(done.sandbox->denied);
    CHECK(exec.get(id).sandbox->runner_failed);
    CHECK_FALSE(fs::exists(d.workspace.path() / "f"));
  }
}

TEMPLATE_TEST_CASE(
    "runner failure: a runner_command signature is recognised anywhere in the runner's combined output, "
    "ignoring case: run throws sandbox_unavailable, a task settles runner_failed (contract 16)",
    "[sandbox][executor][runner_command]", runner_executor, prespawned_runner_executor) {
  dirs d;
  struct shape {
    const char* name;
    const char* script;
  };
  // None of these puts the signature at the start of the first stderr line.
  const shape shapes[] = {
      {"after a first stderr line", "echo 'starting the runner' >&2\necho 'Runner Failed: no user namespaces' >&2\n"},
      {"in the middle of a line", "echo 'fatal: RUNNER FAILED to set up' >&2\n"},
      {"on stdout", "echo 'runner failed: no user namespaces'\n"},
  };
  for (const auto& s : shapes) {
    INFO(s.name);
    scratch_dir bin{"/var/tmp", "bashexec-runner-"};
    const fs::path runner = bin.path() / "myrunner";
    write_file(runner, std::string("#!/bin/sh\n") + s.script + "exit 1\n");
    fs::permissions(runner, fs::perms::owner_all);
    executor_config config = fast_config();
    config.sandbox.workspace_root = d.workspace.path();
    TestType exec(config, runner_command::config{.argv = {runner.string()}, .failure_signatures = {"runner failed"}});

    CHECK_THROWS_AS(exec.run(exec.resolve(command("true", d.env()))), sandbox_unavailable);
    const task_snapshot done = exec.wait(exec.start(exec.resolve(command("true", d.env()))));
    REQUIRE(done.sandbox);
    CHECK(done.sandbox->runner_failed);
    CHECK_FALSE(done.sandbox->denied);
  }
}

// ---------------------------------------------------------------------------
// Backend selection

TEMPLATE_TEST_CASE(
    "selection: a chain whose first candidate fails its probe selects the second, probing once across many calls "
    "(contract 15)",
    "[sandbox][executor][chain]", sandbox_executor, prespawned_sandbox_executor) {
  SKIP_UNLESS(backend_missing<landlock_executor>());
  failing_bwrap fake;
  dirs d;
  executor_config config = fast_config();
  config.sandbox.workspace_root = d.workspace.path();
  TestType exec(config, bwrap::config{.program = fake.script});
  CHECK(fake.invocations() == 0);  // nothing probes before the first confined call

  for (int i = 0; i < 3; ++i) {
    for (via how : both_ways) {
      INFO("call " << i << " via " << name_of(how));
      observed write = observe(exec, command("echo x > \"$WS/f\"", d.env()), how);
      CHECK(write.exit_code != 0);
      REQUIRE(write.sandbox);
      CHECK(write.sandbox->denied);  // Landlock's dialect: the second candidate confines
      CHECK_THAT(write.text, Catch::Contains("permission denied", Catch::CaseSensitive::No));
      CHECK(write.sandbox->level == expected_level<landlock_executor>(sandbox_mode::read_only));
      CHECK_FALSE(fs::exists(d.workspace.path() / "f"));
    }
  }
  CHECK(fake.invocations() == 1);  // the single probe of the first candidate
}

TEST_CASE(
    "selection: a chain of only unusable candidates makes run and start throw sandbox_unavailable naming each "
    "candidate, and nothing runs (contract 15)",
    "[sandbox][executor][chain]") {
  using broken_chain_executor =
      basic_executor<policies<spawn_with<fork_exec>, confine_with<chain<bwrap, broken_backend>>>>;
  failing_bwrap fake;
  dirs d;
  executor_config config = fast_config();
  config.sandbox.workspace_root = d.workspace.path();
  broken_backend::prepares = 0;
  broken_chain_executor exec(config, bwrap::config{.program = fake.script});

  for (int i = 0; i < 3; ++i) {
    for (via how : both_ways) {
      INFO("call " << i << " via " << name_of(how));
      exec_request request = command("echo ran > \"$WS/f\"", d.env(), sandbox_mode::workspace_write);
      try {
        if (how == via::run)
          (void)exec.run(exec.resolve(std::move(request)));
        else
          (void)exec.start(exec.resolve(std::move(request)));
        FAIL("no sandbox_unavailable");
      } catch (const sandbox_unavailable& error) {
        const std::string text = error.what();
        CHECK(error.mode() == sandbox_mode::workspace_write);
        CHECK_THAT(text, Catch::Contains("workspace-write"));
        CHECK_THAT(text, Catch::Contains("bwrap: probe failed"));
        CHECK_THAT(text, Catch::Contains("setting up uid map"));
        CHECK_THAT(text, Catch::Contains("broken: probe failed"));
        CHECK_THAT(text, Catch::Contains("repair the broken backend"));
      }
    }
  }
  CHECK(exec.list().empty());  // a start that threw registered no task
  CHECK_FALSE(fs::exists(d.workspace.path() / "f"));
  CHECK(fake.invocations() == 1);
  CHECK(broken_backend::prepares == 1);

  // danger-full-access needs no backend and still runs, unwrapped.
  run_result free = exec.run(exec.resolve(command("echo ok", {}, sandbox_mode::danger_full_access)));
  CHECK(free.exit_code == 0);
  CHECK(free.out.text == "ok\n");
}

// ---------------------------------------------------------------------------
// Default modes

TEST_CASE(
    "default modes: sandbox_executor defaults to read-only and stamps it on requests without a mode — "
    "local_executor has no default and stamps nothing (contract 1, 18)",
    "[sandbox][executor][resolve]") {
  sandbox_executor confining(fast_config());
  CHECK(sandbox_executor::confines);
  CHECK(confining.default_mode() == sandbox_mode::read_only);
  CHECK(confining.resolve(command("true")).mode == sandbox_mode::read_only);
  CHECK(confining.resolve(command("true", {}, sandbox_mode::workspace_write)).mode == sandbox_mode::workspace_write);
  CHECK(confining.resolve(command("true", {}, sandbox_mode::danger_full_access)).mode ==
        sandbox_mode::danger_full_access);

  executor_config wider = fast_config();
  wider.sandbox.default_mode = sandbox_mode::workspace_write;
  sandbox_executor configured(wider);
  CHECK(configured.default_mode() == sandbox_mode::workspace_write);
  CHECK(configured.resolve(command("true")).mode == sandbox_mode::workspace_write);
  CHECK(configured.resolve(command("true", {}, sandbox_mode::read_only)).mode == sandbox_mode::read_only);

  local_executor local(fast_config());
  CHECK_FALSE(local_executor::confines);
  CHECK_FALSE(local.default_mode());
  CHECK_FALSE(local.resolve(command("true")).mode);
  // Carried verbatim, never interpreted: the local executor confines nothing.
  CHECK(local.resolve(command("true", {}, sandbox_mode::read_only)).mode == sandbox_mode::read_only);
  run_result result = local.run(local.resolve(command("true")));
  CHECK(result.exit_code == 0);
  CHECK_FALSE(result.sandbox);
}

// ---------------------------------------------------------------------------
// Protected paths (docs/contract.md "Beyond")

TEST_CASE("protected paths: sandbox.protected_paths must be relative to the workspace root and stay inside it",
          "[sandbox][config][protected]") {
  CHECK(executor_config{}.sandbox.protected_paths == std::vector<fs::path>{".git"});
  for (const char* bad : {"/etc", "..", "../x", "a/../../b", "", "."}) {
    INFO("protected path \"" << bad << "\"");
    executor_config config = fast_config();
    config.sandbox.protected_paths = {".git", bad};
    try {
      bwrap_executor exec(config);
      FAIL("accepted");
    } catch (const std::invalid_argument& error) {
      CHECK_THAT(std::string(error.what()), Catch::Contains("sandbox.protected_paths"));
    }
  }
  for (const char* good : {".git/", "sub/.git", ".env"}) {
    INFO("protected path \"" << good << "\"");
    executor_config config = fast_config();
    config.sandbox.protected_paths = {good};
    CHECK_NOTHROW(bwrap_executor(config));
  }
}

TEST_CASE(
    "protected paths: the bwrap profile binds each existing protected path read-only after the workspace, under "
    "workspace-write only",
    "[sandbox][bwrap][protected]") {
  scratch_dir ws{"/var/tmp", "bashexec-sbx-"};
  fs::create_directory(ws.path() / ".git");
  fs::create_directories(ws.path() / "sub" / "keep");
  const std::string git = (ws.path() / ".git").string();
  const std::string keep = (ws.path() / "sub" / "keep").string();
  const std::vector<fs::path> protect{".git/", "sub/keep", "missing"};
  using V = std::vector<std::string>;
  CHECK(detail::bwrap_profile_args(sandbox_mode::workspace_write, ws.path(), protect) ==
        V{"--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--proc", "/proc", "--cap-drop", "ALL",
          "--die-with-parent", "--tmpfs", "/tmp", "--bind",
          ws.str(), ws.str(), "--ro-bind", git, git, "--ro-bind", keep, keep});
  CHECK(detail::bwrap_profile_args(sandbox_mode::read_only, ws.path(), protect) ==
        V{"--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--proc", "/proc", "--cap-drop", "ALL",
          "--die-with-parent"});
}

TEST_CASE(
    "protected paths: under workspace-write .git and configured subpaths stay read-only under bwrap while the "
    "workspace around them is writable (DESIGN \"Beyond\", contract 16)",
    "[sandbox][executor][protected]") {
  SKIP_UNLESS(backend_missing<bwrap_executor>());
  dirs d;
  fs::create_directory(d.workspace.path() / ".git");
  write_file(d.workspace.path() / ".git" / "config", "original\n");
  fs::create_directory(d.workspace.path() / "secrets");

  executor_config config = fast_config();
  config.sandbox.workspace_root = d.workspace.path();
  config.sandbox.default_mode = sandbox_mode::workspace_write;
  config.sandbox.protected_paths = {".git", "secrets", "not-there"};
  bwrap_executor exec(config);

  for (via how : both_ways) {
    INFO("via " << name_of(how));
    for (const char* attack : {"echo x > \"$WS/.git/config\"", "touch \"$WS/.git/hooks-new\"", "rm \"$WS/.git/config\"",
                               "echo k > \"$WS/secrets/key\""}) {
      INFO("command " << attack);
      observed denied = observe(exec, command(attack, d.env()), how);
      CHECK(denied.exit_code != 0);
      REQUIRE(denied.sandbox);
      CHECK(denied.sandbox->mode == sandbox_mode::workspace_write);
      CHECK(denied.sandbox->denied);
      CHECK(denied.sandbox->level == enforcement::full);
    }
    CHECK(slurp(d.workspace.path() / ".git" / "config") == "original\n");
    CHECK_FALSE(fs::exists(d.workspace.path() / ".git" / "hooks-new"));
    CHECK_FALSE(fs::exists(d.workspace.path() / "secrets" / "key"));

    observed beside = observe(
        exec,
        command("echo y > \"$WS/f\" && mkdir -p \"$WS/build\" && echo z > \"$WS/build/o\" && cat \"$WS/.git/config\"",
                d.env()),
        how);
    CHECK(beside.exit_code == 0);
    CHECK(beside.text == "original\n");
    CHECK(slurp(d.workspace.path() / "f") == "y\n");
    fs::remove_all(d.workspace.path() / "build");
  }
}

TEST_CASE(
    "protected paths: a symlinked .git is protected at its target inside the workspace, and one pointing "
    "outside neither breaks bwrap nor becomes writable (DESIGN \"Beyond\")",
    "[sandbox][executor][protected]") {
  SKIP_UNLESS(backend_missing<bwrap_executor>());
  dirs d;
  fs::create_directory(d.workspace.path() / "gitdir");
  write_file(d.workspace.path() / "gitdir" / "config", "original\n");
  fs::create_directory_symlink(d.workspace.path() / "gitdir", d.workspace.path() / ".git");
  fs::create_directory_symlink(d.outside.path(), d.workspace.path() / "elsewhere");
  write_file(d.workspace.path() / "worktree-marker", "gitdir: /somewhere\n");

  // The profile binds the link's target, never the link itself.
  const std::vector<fs::path> protect{".git", "elsewhere", "worktree-marker"};
  const auto bound = detail::existing_protected_paths(d.workspace.path(), protect);
  CHECK(bound == std::vector<fs::path>{d.workspace.path() / "gitdir", d.workspace.path() / "worktree-marker"});

  executor_config config = fast_config();
  config.sandbox.workspace_root = d.workspace.path();
  config.sandbox.default_mode = sandbox_mode::workspace_write;
  config.sandbox.protected_paths = protect;
  bwrap_executor exec(config);

  for (const char* attack : {"echo x > \"$WS/.git/config\"", "echo x > \"$WS/gitdir/config\"",
                             "echo x > \"$WS/elsewhere/f\"", "echo x > \"$WS/worktree-marker\""}) {
    INFO("command " << attack);
    observed denied = observe(exec, command(attack, d.env()), via::run);
    CHECK(denied.exit_code != 0);
    REQUIRE(denied.sandbox);
    CHECK(denied.sandbox->denied);
  }
  CHECK(slurp(d.workspace.path() / "gitdir" / "config") == "original\n");
  CHECK(slurp(d.workspace.path() / "worktree-marker") == "gitdir: /somewhere\n");
  CHECK_FALSE(fs::exists(d.outside.path() / "f"));

  observed beside = observe(exec, command("echo y > \"$WS/f\"", d.env()), via::run);
  CHECK(beside.exit_code == 0);
  CHECK(slurp(d.workspace.path() / "f") == "y\n");
}

TEST_CASE("protected paths: a bwrap-compatible runner_command keeps protected paths read-only too (DESIGN \"Beyond\")",
          "[sandbox][executor][protected][runner_command]") {
  SKIP_UNLESS(backend_missing<bwrap_executor>());
  dirs d;
  fs::create_directory(d.workspace.path() / ".git");
  write_file(d.workspace.path() / ".git" / "config", "original\n");
  executor_config config = fast_config();
  config.sandbox.workspace_root = d.workspace.path();
  runner_executor exec(config, runner_command::config{.argv = {"bwrap"}, .failure_signatures = {"bwrap: "}});

  observed git =
      observe(exec, command("echo x > \"$WS/.git/config\"", d.env(), sandbox_mode::workspace_write), via::run);
  CHECK(git.exit_code != 0);
  REQUIRE(git.sandbox);
  CHECK(git.sandbox->denied);
  CHECK(slurp(d.workspace.path() / ".git" / "config") == "original\n");
  observed beside = observe(exec, command("echo y > \"$WS/f\"", d.env(), sandbox_mode::workspace_write), via::run);
  CHECK(beside.exit_code == 0);
  CHECK(fs::exists(d.workspace.path() / "f"));
}

TEST_CASE(
    "protected paths: under Landlock workspace-write reports partial enforcement, with or without an existing "
    "protected path (a read-only hole in a writable tree is not expressible, nor are metadata writes outside "
    "the workspace) — read-only keeps its level (DESIGN \"Beyond\", contract 14)",
    "[sandbox][executor][protected]") {
  SKIP_UNLESS(backend_missing<landlock_executor>());
  dirs d;
  executor_config config = fast_config();
  config.sandbox.workspace_root = d.workspace.path();
  landlock_executor exec(config);
  const enforcement read_only_level = expected_level<landlock_executor>(sandbox_mode::read_only);

  for (via how : both_ways) {
    INFO("via " << name_of(how));
    fs::remove_all(d.workspace.path() / ".git");
    observed without = observe(exec, command("echo y > \"$WS/f\"", d.env(), sandbox_mode::workspace_write), how);
    CHECK(without.exit_code == 0);
    REQUIRE(without.sandbox);
    CHECK(without.sandbox->level == enforcement::partial);  // metadata outside the workspace is ungoverned

    fs::create_directory(d.workspace.path() / ".git");
    observed with = observe(exec, command("echo y > \"$WS/f\"", d.env(), sandbox_mode::workspace_write), how);
    CHECK(with.exit_code == 0);
    REQUIRE(with.sandbox);
    CHECK(with.sandbox->mode == sandbox_mode::workspace_write);
    CHECK(with.sandbox->level == enforcement::partial);

    // read-only grants nothing in the workspace: .git is read-only there anyway.
    observed read_only = observe(exec, command("echo x > \"$WS/.git/config\"", d.env()), how);
    CHECK(read_only.sandbox->denied);
    CHECK(read_only.sandbox->level == read_only_level);
    CHECK_FALSE(fs::exists(d.workspace.path() / ".git" / "config"));
  }

  executor_config unprotected = config;
  unprotected.sandbox.protected_paths.clear();
  landlock_executor plain(unprotected);
  observed none = observe(plain, command("true", {}, sandbox_mode::workspace_write), via::run);
  REQUIRE(none.sandbox);
  CHECK(none.sandbox->level == enforcement::partial);
  observed none_read_only = observe(plain, command("true"), via::run);
  REQUIRE(none_read_only.sandbox);
  CHECK(none_read_only.sandbox->level == read_only_level);
}

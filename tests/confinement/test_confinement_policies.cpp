// Tests of the confining policies (landlock, bwrap, runner_command, chain),
// driven directly through launch plans spawned by fork_exec — no executor.
// The spawn policies' own laws are tests/laws/test_spawn_laws.cpp. Each test cites the docs/contract.md item item it proves.
// A capability the machine lacks (bwrap, Landlock) makes a test WARN
// "skipped: …" and return, so a skip is always visible.

#include <catch2/catch.hpp>

#include "executor_test_support.hpp"
#include "pipe_test_support.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bashexec/confinement/bwrap.hpp>
#include <bashexec/confinement/chain.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/confinement/runner_command.hpp>
#include <bashexec/detail/engine/verdict.hpp>
#include <bashexec/detail/kernel/seccomp_filter.hpp>
#include <bashexec/spawn/fork_exec.hpp>

namespace fs = std::filesystem;
using namespace bashexec;
using detail::unique_fd;

namespace {

struct outcome {
  int exit_code = -1;   // -1 when killed by a signal
  int signal = 0;
  std::string out;
  std::string err;
};

/// Reads both pipes to EOF, then reaps the child.
outcome collect(const process_handle& child, unique_fd out, unique_fd err) {
  outcome result;
  std::tie(result.out, result.err) = test_support::read_both(std::move(out), std::move(err));
  int status = 0;
  while (::waitpid(child.pid(), &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

std::vector<std::string> base_env(std::vector<std::string> extra = {}) {
  std::vector<std::string> env{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"};
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

launch_plan plan_for(const std::string& command, std::vector<std::string> extra_env = {}) {
  launch_plan plan;
  plan.argv = {"/bin/bash", "-c", command};
  plan.env = base_env(std::move(extra_env));
  plan.workdir = "/";
  return plan;
}

/// Spawns with fork_exec: stdin /dev/null, stdout and stderr to pipes.
outcome run_plan(launch_plan plan) {
  auto out = detail::make_pipe();
  auto err = detail::make_pipe();
  unique_fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  REQUIRE(null);
  plan.stdin_fd = null.get();
  plan.stdout_fd = out.write.get();
  plan.stderr_fd = err.write.get();
  auto child = fork_exec{}.spawn(plan);
  REQUIRE(child.pid() > 0);
  REQUIRE(child.pidfd() >= 0);
  out.write.reset();
  err.write.reset();
  return collect(child, std::move(out.read), std::move(err.read));
}

struct confined_outcome {
  outcome result;
  confined_launch launch;
};

template <class C>
confined_outcome run_confined(const C& confinement, sandbox_mode mode, const fs::path& root,
                              const std::string& command, std::vector<std::string> extra_env = {}) {
  launch_plan plan = plan_for(command, std::move(extra_env));
  confined_launch launch = confinement.prepare(mode, root, plan);
  outcome result = run_plan(std::move(plan));
  return {std::move(result), std::move(launch)};
}

using test_support::temp_dir;

/// A workspace and a sibling "outside" directory, both under /var/tmp so that
/// neither is covered by /tmp (which workspace-write grants).
struct sandbox_dirs {
  temp_dir workspace{"/var/tmp", "bashexec-ws-"};
  temp_dir outside{"/var/tmp", "bashexec-out-"};
  std::vector<std::string> env() const {
    return {"WS=" + workspace.path().string(), "OUT=" + outside.path().string()};
  }
};

/// A bwrap policy running `program`, with the shared defaults.
bwrap bwrap_at(const fs::path& program = "bwrap") { return bwrap(sandbox_config{}, bwrap::config{.program = program}); }

/// The reason to skip bwrap tests, or empty when bwrap really confines here.
std::optional<std::string> bwrap_missing() {
  bwrap probe_target = bwrap_at();
  if (!probe_target.program()) return "bwrap is not installed (apt-get install bubblewrap)";
  auto [result, launch] = run_confined(probe_target, sandbox_mode::read_only, "/", "true");
  if (result.exit_code != 0) return "bwrap is installed but cannot create a sandbox here: " + result.err;
  return std::nullopt;
}

std::optional<std::string> landlock_missing() {
  if (landlock::abi() < 0)
    return std::string("Landlock is not available: ") + std::strerror(-landlock::abi());
  return std::nullopt;
}

#define SKIP_UNLESS(missing_reason)                          \
  if (auto skip_reason = (missing_reason)) {                 \
    WARN("skipped: " << *skip_reason);                       \
    return;                                                  \
  }

}  // namespace

// ---------------------------------------------------------------------------
// landlock

static_assert(confining_policy<landlock>);
static_assert(landlock::needs_pre_exec);

TEST_CASE("landlock: under read-only truncation and removal outside /dev/null are denied too (contract 13)",
          "[landlock]") {
  SKIP_UNLESS(landlock_missing());
  if (landlock::abi() < landlock::full_enforcement_abi) {
    WARN("skipped: Landlock ABI " << landlock::abi() << " cannot govern truncate(2)");
    return;
  }
  landlock policy{sandbox_config{}};
  sandbox_dirs dirs;
  { std::ofstream(dirs.workspace.path() / "keep") << "content\n"; }
  auto [result, launch] = run_confined(policy, sandbox_mode::read_only, dirs.workspace.path(),
                                       "truncate -s 0 \"$WS/keep\"; rm -f \"$WS/keep\"; mkdir \"$WS/d\"",
                                       dirs.env());
  CHECK(result.exit_code != 0);
  CHECK(policy.is_denial(result.err));
  CHECK(fs::file_size(dirs.workspace.path() / "keep") == 8);
  CHECK_FALSE(fs::exists(dirs.workspace.path() / "d"));
}

TEST_CASE("landlock: under read-only metadata writes on a host file are refused with EACCES, the denial dialect "
          "(contract 13, 16)",
          "[landlock][metadata]") {
  SKIP_UNLESS(landlock_missing());
  SKIP_UNLESS(detail::seccomp_filter_supported ? std::nullopt
                                               : std::optional<std::string>("no seccomp filter for this architecture"));
  landlock policy{sandbox_config{}};
  sandbox_dirs dirs;
  const fs::path host = dirs.outside.path() / "host";
  { std::ofstream(host) << "content\n"; }
  fs::permissions(host, fs::perms::owner_read | fs::perms::owner_write);
  struct stat before {};
  REQUIRE(::stat(host.c_str(), &before) == 0);
  auto env = dirs.env();
  env.push_back("HOST=" + host.string());
  for (const char* attack : {"chmod 000 \"$HOST\"", "touch -m -d 2001-02-03 \"$HOST\"", "chown 0:0 \"$HOST\"",
                             "chgrp 0 \"$HOST\""}) {
    INFO("command " << attack);
    auto [result, launch] = run_confined(policy, sandbox_mode::read_only, dirs.workspace.path(), attack, env);
    INFO(result.err);
    CHECK(result.exit_code != 0);
    CHECK_THAT(result.err, Catch::Contains("Permission denied"));
    CHECK(policy.is_denial(result.err));
    CHECK_FALSE(policy.runner_failure(launch, result.err));
    REQUIRE(launch.info.level);
    if (landlock::abi() >= landlock::full_enforcement_abi) CHECK(*launch.info.level == enforcement::full);
  }
  struct stat after {};
  REQUIRE(::stat(host.c_str(), &after) == 0);
  CHECK(after.st_mode == before.st_mode);
  CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec);
  CHECK(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
  CHECK(after.st_uid == before.st_uid);
  CHECK(after.st_gid == before.st_gid);

  // Reading metadata is no write: stat, ls -l and a chmod-free cp still work.
  auto [reads, launch] = run_confined(policy, sandbox_mode::read_only, dirs.workspace.path(),
                                      "stat -c %a \"$HOST\" && ls -l \"$HOST\" >/dev/null && cat \"$HOST\"", env);
  CHECK(reads.exit_code == 0);
  CHECK(reads.out == "600\ncontent\n");
}

namespace {

/// An inode-attribute ioctl on `path` from this (unconfined) process: the
/// flags word (FS_IOC_GETFLAGS, an int in the kernel despite the `long` in
/// its name) or the generation (FS_IOC_GETVERSION); nullopt where the
/// filesystem has none (tmpfs).
std::optional<int> inode_word(const fs::path& path, unsigned long request) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  int word = 0;
  const int rc = ::ioctl(fd, request, &word);
  ::close(fd);
  if (rc != 0) return std::nullopt;
  return word;
}
std::optional<int> inode_flags(const fs::path& path) { return inode_word(path, FS_IOC_GETFLAGS); }

bool set_inode_flags(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  const int rc = ::ioctl(fd, FS_IOC_SETFLAGS, &flags);
  ::close(fd);
  return rc == 0;
}

}  // namespace

TEST_CASE("landlock: under read-only chattr (the inode-attribute ioctls) on a host file is refused with EACCES and "
          "changes nothing, while lsattr still works",
          "[landlock][metadata][seccomp]") {
  SKIP_UNLESS(landlock_missing());
  SKIP_UNLESS(detail::seccomp_filter_supported ? std::nullopt
                                               : std::optional<std::string>("no seccomp filter for this architecture"));
  landlock policy{sandbox_config{}};
  sandbox_dirs dirs;  // under /var/tmp: on the real disk, not tmpfs
  const fs::path host = dirs.outside.path() / "host";
  { std::ofstream(host) << "content\n"; }
  const std::optional<int> before = inode_flags(host);
  SKIP_UNLESS(before ? std::nullopt
                     : std::optional<std::string>("the filesystem of " + dirs.outside.path().string() +
                                                  " has no inode flags (FS_IOC_GETFLAGS: " + std::strerror(errno) + ")"));
  // Unconfined the owner CAN set a flag, so the attack below is real; and
  // whatever happens, the flags are put back (an immutable file would
  // outlive the temp dir).
  SKIP_UNLESS(set_inode_flags(host, *before | FS_NODUMP_FL) && inode_flags(host) == (*before | FS_NODUMP_FL)
                  ? std::nullopt
                  : std::optional<std::string>("FS_IOC_SETFLAGS does not work unconfined here"));
  struct restore_flags {
    fs::path path;
    int flags;
    ~restore_flags() { (void)set_inode_flags(path, flags); }
  } restore{host, *before};
  REQUIRE(set_inode_flags(host, *before));
  const std::optional<int> generation = inode_word(host, FS_IOC_GETVERSION);
  // chattr +i needs CAP_LINUX_IMMUTABLE: root, normally.
  const bool immutable_settable = set_inode_flags(host, *before | FS_IMMUTABLE_FL) && set_inode_flags(host, *before);
  REQUIRE(inode_flags(host) == before);
  if (!immutable_settable) WARN("chattr +i sub-check skipped: no CAP_LINUX_IMMUTABLE here (not root?)");

  auto env = dirs.env();
  env.push_back("HOST=" + host.string());
  std::vector<std::string> attacks;
  const bool have_chattr = detail::find_program("chattr").has_value();
  if (have_chattr) {
    if (immutable_settable) attacks.push_back("chattr +i \"$HOST\"");  // FS_IOC_SETFLAGS
    attacks.push_back("chattr +d \"$HOST\"");
    if (generation) attacks.push_back("chattr -v 4242 \"$HOST\"");  // FS_IOC_SETVERSION
  }
  std::optional<fs::path> python = detail::is_executable_file("/usr/bin/python3")
                                       ? std::optional<fs::path>("/usr/bin/python3")
                                       : detail::find_program("python3");
  if (python) {
    // FS_IOC_SETFLAGS (+i as root, else +d) and FS_IOC_FSSETXATTR (the
    // xflags spelling of nodump), raw: what chattr would do.
    const std::string flag = immutable_settable ? "0x10" : "0x40";
    for (const std::string& call :
         {"fcntl.ioctl(fd, 0x40086602, struct.pack(\"l\", struct.unpack(\"l\", fcntl.ioctl(fd, 0x80086601, "
          "bytes(8)))[0] | " + flag + "))",
          std::string("x = bytearray(fcntl.ioctl(fd, 0x801c581f, bytes(28))); x[0] |= 0x80; "
                      "fcntl.ioctl(fd, 0x401c5820, bytes(x))")}) {
      attacks.push_back("'" + python->string() +
                        "' -c 'import fcntl, os, struct, sys\n"
                        "fd = os.open(os.environ[\"HOST\"], os.O_RDONLY | os.O_NONBLOCK)\n"
                        "try:\n"
                        "    " + call + "\n"
                        "except OSError as e:\n"
                        "    sys.exit(\"python3: ioctl: \" + e.strerror)\n'");
    }
  }
  SKIP_UNLESS(attacks.empty() ? std::optional<std::string>("neither chattr nor python3 is installed") : std::nullopt);

  for (const std::string& attack : attacks) {
    INFO("command " << attack);
    auto [result, launch] = run_confined(policy, sandbox_mode::read_only, dirs.workspace.path(), attack, env);
    INFO(result.err);
    CHECK(result.exit_code != 0);
    CHECK_THAT(result.err, Catch::Contains("Permission denied"));
    CHECK(policy.is_denial(result.err));
    CHECK_FALSE(policy.runner_failure(launch, result.err));
    CHECK(inode_flags(host) == before);
    CHECK(inode_word(host, FS_IOC_GETVERSION) == generation);
  }

  // Reading the flags is no write: lsattr (FS_IOC_GETFLAGS) still works.
  if (detail::find_program("lsattr")) {
    auto [reads, launch] = run_confined(policy, sandbox_mode::read_only, dirs.workspace.path(),
                                        "lsattr \"$HOST\" >/dev/null && echo listed", env);
    INFO(reads.err);
    CHECK(reads.exit_code == 0);
    CHECK(reads.out == "listed\n");
  }
}

TEST_CASE("landlock: workspace-write is partial (metadata outside the workspace is not governed) and metadata "
          "changes inside it work (contract 13, 14)",
          "[landlock][metadata]") {
  SKIP_UNLESS(landlock_missing());
  landlock policy{sandbox_config{}};
  sandbox_dirs dirs;
  { std::ofstream(dirs.workspace.path() / "run.sh") << "#!/bin/sh\necho ran\n"; }
  auto [result, launch] = run_confined(policy, sandbox_mode::workspace_write, dirs.workspace.path(),
                                       "chmod +x \"$WS/run.sh\" && touch -d 2001-02-03 \"$WS/run.sh\" && \"$WS/run.sh\"",
                                       dirs.env());
  INFO(result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.out == "ran\n");
  REQUIRE(launch.info.level);
  CHECK(*launch.info.level == enforcement::partial);
  CHECK(landlock::file_level(sandbox_mode::workspace_write, 7) == enforcement::partial);
  CHECK(landlock::file_level(sandbox_mode::read_only, 2) == enforcement::partial);
  CHECK(landlock::file_level(sandbox_mode::read_only, 3) ==
        (detail::seccomp_filter_supported ? enforcement::full : enforcement::partial));
}

TEST_CASE("landlock: read-only with a confined network installs one filter refusing both metadata writes "
          "(EACCES) and sockets (EPERM)",
          "[landlock][seccomp][metadata]") {
  SKIP_UNLESS(landlock_missing());
  SKIP_UNLESS(detail::seccomp_filter_supported ? std::nullopt
                                               : std::optional<std::string>("no seccomp filter for this architecture"));
  sandbox_config config;
  config.network = network_access::none;
  landlock policy{config};
  sandbox_dirs dirs;
  { std::ofstream(dirs.outside.path() / "host") << "content\n"; }
  auto [result, launch] = run_confined(policy, sandbox_mode::read_only, dirs.workspace.path(),
                                       "chmod 000 \"$OUT/host\"; echo chmod=$?; "
                                       "exec 3<>/dev/tcp/127.0.0.1/9 && echo connected; echo tcp=$?",
                                       dirs.env());
  INFO(result.err);
  CHECK_THAT(result.out, Catch::Contains("chmod=1"));
  CHECK_THAT(result.out, !Catch::Contains("connected"));
  CHECK_THAT(result.err, Catch::Contains("Permission denied"));
  CHECK_THAT(result.err, Catch::Contains("not permitted", Catch::CaseSensitive::No));
  CHECK((fs::status(dirs.outside.path() / "host").permissions() & fs::perms::owner_read) != fs::perms::none);
}

// ---------------------------------------------------------------------------
// bwrap

static_assert(confining_policy<bwrap>);
static_assert(!bwrap::needs_pre_exec);

TEST_CASE("bwrap: the profile is the contract's: pid namespace, no capabilities, tmpfs /tmp before the workspace bind (contract 14)", "[bwrap]") {
  using V = std::vector<std::string>;
  const V base{"--ro-bind", "/",     "/",          "--dev", "/dev",
               "--unshare-pid", "--proc", "/proc", "--cap-drop", "ALL", "--die-with-parent"};
  CHECK(detail::bwrap_profile_args(sandbox_mode::read_only, "/ws") == base);
  V workspace = base;
  workspace.insert(workspace.end(), {"--tmpfs", "/tmp", "--bind", "/ws", "/ws"});
  CHECK(detail::bwrap_profile_args(sandbox_mode::workspace_write, "/ws") == workspace);
  // Read-only paths (the spill directory) come last, each that exists.
  V spills = workspace;
  spills.insert(spills.end(), {"--ro-bind", "/", "/"});
  CHECK(detail::bwrap_profile_args(sandbox_mode::workspace_write, "/ws", {}, network_access::full,
                                   {"/", "/no/such/dir"}) == spills);
}

TEST_CASE("bwrap: prepare passes the status fd as an inherited descriptor and wraps the argv (contract 14, 16)",
          "[bwrap]") {
  SKIP_UNLESS(bwrap_missing());
  bwrap policy = bwrap_at();
  launch_plan plan = plan_for("true");
  plan.inherited_fds = {0};  // an executor's own inherited fd comes first
  auto launch = policy.prepare(sandbox_mode::read_only, "/", plan);
  REQUIRE(plan.inherited_fds.size() == 2);
  CHECK(plan.argv.at(0) == policy.program()->string());
  CHECK(plan.argv.at(1) == "--json-status-fd");
  CHECK(plan.argv.at(2) == "4");
  CHECK(plan.argv.at(plan.argv.size() - 4) == "--");
  CHECK(plan.argv.back() == "true");
  CHECK(launch.status);
  CHECK(launch.info.level == enforcement::full);
  CHECK(plan.hooks.empty());
}

TEST_CASE("bwrap: under read-only metadata writes fail with EROFS, its denial dialect, like content writes "
          "(contract 13, 16)",
          "[bwrap][metadata]") {
  SKIP_UNLESS(bwrap_missing());
  bwrap policy = bwrap_at();
  sandbox_dirs dirs;
  const fs::path host = dirs.outside.path() / "host";
  { std::ofstream(host) << "content\n"; }
  fs::permissions(host, fs::perms::owner_read | fs::perms::owner_write);
  auto env = dirs.env();
  env.push_back("HOST=" + host.string());
  auto [result, launch] = run_confined(policy, sandbox_mode::read_only, dirs.workspace.path(), "chmod 000 \"$HOST\"", env);
  CHECK(result.exit_code != 0);
  CHECK_THAT(result.err, Catch::Contains("read-only file system", Catch::CaseSensitive::No));
  CHECK(policy.is_denial(result.err));
  CHECK_FALSE(policy.runner_failure(launch, result.err));
  CHECK(fs::status(host).permissions() == (fs::perms::owner_read | fs::perms::owner_write));
  CHECK(launch.info.level == enforcement::full);
}

TEST_CASE("bwrap: a workspace under /tmp stays writable under workspace-write (contract 14)", "[bwrap]") {
  SKIP_UNLESS(bwrap_missing());
  bwrap policy = bwrap_at();
  temp_dir workspace{"/tmp", "bashexec-ws-"};
  auto [result, launch] = run_confined(policy, sandbox_mode::workspace_write, workspace.path(), "echo x > \"$WS/f\"",
                                       {"WS=" + workspace.path().string()});
  CHECK(result.exit_code == 0);
  CHECK(result.err.empty());
  CHECK(fs::exists(workspace.path() / "f"));
}

TEST_CASE("bwrap: a command that merely prints \"bwrap: \" is not a runner failure (contract 16)", "[bwrap]") {
  SKIP_UNLESS(bwrap_missing());
  bwrap policy = bwrap_at();
  auto [result, launch] = run_confined(policy, sandbox_mode::read_only, "/", "echo 'bwrap: hello' >&2; exit 1");
  CHECK(result.exit_code == 1);
  CHECK(result.err == "bwrap: hello\n");
  CHECK_FALSE(policy.runner_failure(launch, result.err));
}

TEST_CASE("bwrap: a runner that fails before starting the command is a runner failure, known structurally (contract 16)",
          "[bwrap]") {
  temp_dir dir{"/var/tmp"};
  const fs::path fake = dir.path() / "bwrap";
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n";
  }
  fs::permissions(fake, fs::perms::owner_all);
  bwrap policy = bwrap_at(fake);
  REQUIRE(policy.program());
  auto [result, launch] = run_confined(policy, sandbox_mode::read_only, "/", "true");
  CHECK(result.exit_code == 1);
  auto failure = policy.runner_failure(launch, result.err);
  REQUIRE(failure);
  CHECK(*failure == "bwrap: setting up uid map: Permission denied");
}

TEST_CASE("bwrap: a sandbox setup failure after bwrap cloned its child is still a runner failure (contract 16)",
          "[bwrap]") {
  SKIP_UNLESS(bwrap_missing());
  bwrap policy = bwrap_at();
  // The workspace bind fails inside bwrap's child: "child-pid" was reported,
  // "exit-code" never is.
  auto [result, launch] = run_confined(policy, sandbox_mode::workspace_write, "/nonexistent/bashexec-ws", "true");
  CHECK(result.exit_code != 0);
  auto failure = policy.runner_failure(launch, result.err);
  REQUIRE(failure);
  CHECK_THAT(*failure, Catch::StartsWith("bwrap: "));
}

TEST_CASE(
    "bwrap: a runner killed after it reported the command's exit code gives the command's own end, not a kill "
    "(contract 3, 20)",
    "[bwrap]") {
  SKIP_UNLESS(bwrap_missing());
  bwrap policy = bwrap_at();
  // A stop that lands between the command's exit and bwrap's own: bwrap's
  // real report, then the signal death the stop gives bwrap.
  auto [result, launch] = run_confined(policy, sandbox_mode::read_only, "/", "echo x > /bashexec-nope; exit 3");
  REQUIRE(result.exit_code == 3);
  std::optional<confined_launch> reported(std::move(launch));
  const detail::verdict v =
      detail::classify(policy, reported, detail::exit_facts{std::nullopt, SIGTERM}, result.err, result.out);
  REQUIRE(v.command_exit);
  CHECK(v.command_exit->exit_code == 3);
  CHECK_FALSE(v.command_exit->signal);
  CHECK(v.denied);
  CHECK_FALSE(v.runner_failure);

  SECTION("a runner killed before it reported stays a kill") {
    launch_plan plan = plan_for("true");
    std::optional<confined_launch> silent(policy.prepare(sandbox_mode::read_only, "/", plan));
    silent->keep_alive.reset();  // the write end: bwrap never ran, so never wrote
    const detail::verdict killed = detail::classify(policy, silent, detail::exit_facts{std::nullopt, SIGTERM}, "", "");
    CHECK_FALSE(killed.command_exit);
    CHECK_FALSE(killed.denied);
  }
}

TEST_CASE("bwrap: a missing bwrap program makes prepare throw sandbox_unavailable naming what to install (contract 15)",
          "[bwrap]") {
  bwrap policy = bwrap_at("bashexec-no-such-bwrap");
  CHECK_FALSE(policy.program());
  launch_plan plan = plan_for("true");
  try {
    (void)policy.prepare(sandbox_mode::read_only, "/", plan);
    FAIL("prepare did not throw");
  } catch (const sandbox_unavailable& error) {
    CHECK(error.mode() == sandbox_mode::read_only);
    CHECK_THAT(error.what(), Catch::Contains("apt-get install bubblewrap"));
  }
}

// ---------------------------------------------------------------------------
// runner_command

static_assert(confining_policy<runner_command>);

TEST_CASE("runner_command: configuration without a runner argv or signatures is rejected naming the field",
          "[runner_command]") {
  runner_command::config config;
  CHECK_THROWS_WITH(runner_command(sandbox_config{}, config), Catch::Contains("runner_command.argv"));
  config.argv = {"bwrap"};
  CHECK_THROWS_WITH(runner_command(sandbox_config{}, config), Catch::Contains("runner_command.failure_signatures"));
  config.failure_signatures = {"bwrap: "};
  CHECK_NOTHROW(runner_command(sandbox_config{}, config));
}

TEST_CASE("runner_command: argv is the runner, the bwrap profile, --, then the command (contract 14)",
          "[runner_command]") {
  runner_command::config config;
  config.argv = {"/bin/sh", "--flag"};
  config.failure_signatures = {"runner: "};
  runner_command policy(sandbox_config{}, config);
  launch_plan plan = plan_for("true");
  auto launch = policy.prepare(sandbox_mode::workspace_write, "/ws", plan);
  std::vector<std::string> expected{"/bin/sh", "--flag"};
  auto profile = detail::bwrap_profile_args(sandbox_mode::workspace_write, "/ws");
  expected.insert(expected.end(), profile.begin(), profile.end());
  expected.insert(expected.end(), {"--", "/bin/bash", "-c", "true"});
  CHECK(plan.argv == expected);
  CHECK(launch.info.level == enforcement::full);
}

TEST_CASE("runner_command: a runner binary that does not exist settles as a runner failure (contract 16)",
          "[runner_command]") {
  runner_command::config config;
  config.argv = {"/opt/bashexec-no-such-runner"};
  config.failure_signatures = {"runner: "};
  runner_command policy(sandbox_config{}, config);
  auto [result, launch] = run_confined(policy, sandbox_mode::read_only, "/", "true");
  CHECK(result.exit_code == 127);
  auto failure = policy.runner_failure(launch, result.err);
  REQUIRE(failure);
  CHECK_THAT(*failure, Catch::Contains("/opt/bashexec-no-such-runner"));
}

TEST_CASE("runner_command: a bare runner name missing from PATH is a runner failure too (contract 16)",
          "[runner_command]") {
  runner_command::config config;
  config.argv = {"bashexec-no-such-runner"};
  config.failure_signatures = {"runner: "};
  runner_command policy(sandbox_config{}, config);
  auto [result, launch] = run_confined(policy, sandbox_mode::read_only, "/", "true");
  CHECK(result.exit_code == 127);
  CHECK(policy.runner_failure(launch, result.err));
}

TEST_CASE("runner_command: runner failures are recognised by configured signatures and shell shapes, "
          "case-insensitively (contract 16)",
          "[runner_command]") {
  runner_command::config config;
  config.argv = {"/usr/local/bin/myrunner"};
  config.failure_signatures = {"myrunner: setup failed"};
  runner_command policy(sandbox_config{}, config);
  confined_launch launch;
  CHECK(policy.runner_failure(launch, "MYRUNNER: Setup Failed: no userns\n") == "MYRUNNER: Setup Failed: no userns");
  CHECK(policy.runner_failure(launch, "bash: /usr/local/bin/myrunner: No such file or directory\n"));
  CHECK(policy.runner_failure(launch, "sh: 1: myrunner: not found\n"));
  CHECK(policy.runner_failure(launch, "bash: /usr/local/bin/myrunner: Permission denied\n"));
  // The command's own failures are not the runner's.
  CHECK_FALSE(policy.runner_failure(launch, "cat: /nope: No such file or directory\n"));
  CHECK_FALSE(policy.runner_failure(launch, "bash: line 1: nope: command not found\n"));
  CHECK(policy.is_denial("x: Read-only file system"));
  CHECK(policy.is_denial("x: Permission denied"));
}

TEST_CASE("runner_command: a signature counts anywhere in the runner's combined output, ignoring case "
          "(contract 16)",
          "[runner_command]") {
  runner_command::config config;
  config.argv = {"/usr/local/bin/myrunner"};
  config.failure_signatures = {"bwrap: "};
  runner_command policy(sandbox_config{}, config);
  confined_launch launch;
  // The reason is the runner's first stderr line, wherever the signature was.
  CHECK(policy.runner_failure(launch, "compiling\nerror: see BWRAP: docs\n") == "compiling");
  CHECK(policy.runner_failure(launch, "error: see bwrap: docs\n") == "error: see bwrap: docs");
  CHECK(policy.runner_failure(launch, "warning: x\nbwrap: setting up uid map: Permission denied\n") ==
        "warning: x");
  CHECK(policy.runner_failure(launch, "\n  \nBWRAP: setting up uid map: Permission denied\nmore\n") ==
        "BWRAP: setting up uid map: Permission denied");
  // On stdout too; with a silent stderr the reason is the line that matched.
  CHECK(policy.runner_failure(launch, "", "starting\nBwrap: no user namespaces\n") == "Bwrap: no user namespaces");
  CHECK(policy.runner_failure(launch, "oops\n", "bwrap: no user namespaces\n") == "oops");
  CHECK_FALSE(policy.runner_failure(launch, ""));
  CHECK_FALSE(policy.runner_failure(launch, "", ""));
  CHECK_FALSE(policy.runner_failure(launch, "bwrap:no space\n", "b w r a p: \n"));
  // The shell's launch-failure shapes are not signatures: they count only on
  // the first stderr line and only naming the runner.
  CHECK_FALSE(policy.runner_failure(launch, "running\nbash: /usr/local/bin/myrunner: No such file or directory\n"));
}

TEST_CASE("runner_command: a real runner's signature is recognised on either stream, and a command that fails "
          "without one is the command's own failure (contract 16)",
          "[runner_command]") {
  temp_dir dir{"/var/tmp"};
  // A runner that passes through to the command: skips its profile up to "--".
  const fs::path passthrough = dir.path() / "passthrough";
  {
    std::ofstream script(passthrough);
    script << "#!/bin/sh\nwhile [ \"$1\" != \"--\" ]; do shift; done\nshift\nexec \"$@\"\n";
  }
  fs::permissions(passthrough, fs::perms::owner_all);
  const fs::path broken = dir.path() / "broken";
  {
    std::ofstream script(broken);
    script << "#!/bin/sh\necho 'myrunner: cannot set up the sandbox' >&2\nexit 1\n";
  }
  fs::permissions(broken, fs::perms::owner_all);

  runner_command::config config;
  config.argv = {passthrough.string()};
  config.failure_signatures = {"bwrap: ", "myrunner: "};
  runner_command command_runs(sandbox_config{}, config);
  auto [ran, ran_launch] = run_confined(command_runs, sandbox_mode::read_only, "/",
                                        "echo building >&2; echo 'cannot open x' >&2; exit 1");
  CHECK(ran.exit_code == 1);
  CHECK(ran.err == "building\ncannot open x\n");
  CHECK_FALSE(command_runs.runner_failure(ran_launch, ran.err, ran.out));
  auto [said, said_launch] =
      run_confined(command_runs, sandbox_mode::read_only, "/", "echo building >&2; echo 'MyRunner: no userns'; exit 1");
  CHECK(said.exit_code == 1);
  CHECK(command_runs.runner_failure(said_launch, said.err, said.out) == "building");

  config.argv = {broken.string()};
  runner_command runner_fails(sandbox_config{}, config);
  auto [failed, failed_launch] = run_confined(runner_fails, sandbox_mode::read_only, "/", "true");
  CHECK(failed.exit_code == 1);
  auto failure = runner_fails.runner_failure(failed_launch, failed.err);
  REQUIRE(failure);
  CHECK(*failure == "myrunner: cannot set up the sandbox");
}

// ---------------------------------------------------------------------------
// chain

namespace {

/// Minimal confining policies whose construction can be made to fail.
template <int N>
struct fake_backend {
  static constexpr bool confines = true;
  static constexpr bool needs_pre_exec = false;
  static constexpr std::string_view name = N == 0 ? "fake-a" : N == 1 ? "fake-b" : "fake-c";
  static constexpr std::string_view remedy = N == 0 ? "install fake-a" : "enable fake-b";
  static inline bool fail_construction = false;

  using config = no_config;
  explicit fake_backend(const sandbox_config&, const config& = {}) {
    if (fail_construction) throw std::invalid_argument("fake construction failure");
  }
  confined_launch prepare(sandbox_mode mode, const fs::path&, launch_plan& plan) const {
    plan.argv.insert(plan.argv.begin(), std::string(name));
    confined_launch launch;
    launch.info.mode = mode;
    launch.info.level = enforcement::full;
    return launch;
  }
  std::optional<std::string> runner_failure(confined_launch&, std::string_view err, std::string_view = {}) const {
    if (err.find(name) != std::string_view::npos) return std::string(err);
    return std::nullopt;
  }
  bool is_denial(std::string_view err) const { return err == name; }
};

using fake_a = fake_backend<0>;
using fake_b = fake_backend<1>;

}  // namespace

static_assert(confining_policy<chain<fake_a, fake_b>>);
static_assert(confining_policy<chain<bwrap, landlock>>);
static_assert(chain<bwrap, landlock>::needs_pre_exec);
static_assert(!chain<bwrap>::needs_pre_exec);
static_assert(chain<bwrap, landlock>::needs_selection);

TEST_CASE("chain: when the first candidate's probe fails the second is selected (contract 15)", "[chain]") {
  chain<fake_a, fake_b> policy{sandbox_config{}};
  CHECK(policy.selected_name().empty());
  policy.select([](const auto& candidate) { return candidate.name != "fake-a"; });
  CHECK(policy.selected_name() == "fake-b");
  launch_plan plan = plan_for("true");
  auto launch = policy.prepare(sandbox_mode::workspace_write, "/", plan);
  CHECK(plan.argv.front() == "fake-b");
  CHECK(launch.info.mode == sandbox_mode::workspace_write);
  CHECK(policy.is_denial("fake-b"));
  CHECK_FALSE(policy.is_denial("fake-a"));
  CHECK(policy.runner_failure(launch, "fake-b broke"));
}

TEST_CASE("chain: with no usable candidate every prepare throws sandbox_unavailable naming the mode, each candidate "
          "and the remedies (contract 15)",
          "[chain]") {
  chain<fake_a, fake_b> policy{sandbox_config{}};
  policy.select([](const auto& candidate) -> bool {
    if (candidate.name == "fake-a") throw std::runtime_error("no user namespaces");
    return false;
  });
  CHECK(policy.selected());
  CHECK(policy.selected_name().empty());
  for (int attempt = 0; attempt < 2; ++attempt) {
    launch_plan plan = plan_for("true");
    try {
      (void)policy.prepare(sandbox_mode::workspace_write, "/", plan);
      FAIL("prepare did not throw");
    } catch (const sandbox_unavailable& error) {
      const std::string text = error.what();
      CHECK(error.mode() == sandbox_mode::workspace_write);
      CHECK_THAT(text, Catch::Contains("workspace-write"));
      CHECK_THAT(text, Catch::Contains("fake-a: probe failed: no user namespaces"));
      CHECK_THAT(text, Catch::Contains("fake-b: probe failed"));
      CHECK_THAT(text, Catch::Contains("install fake-a"));
      CHECK_THAT(text, Catch::Contains("enable fake-b"));
    }
    CHECK(plan.argv.front() == "/bin/bash");  // nothing was wrapped, nothing runs
  }
}

TEST_CASE("chain: a candidate whose constructor throws is unusable and says why (contract 15)", "[chain]") {
  fake_a::fail_construction = true;
  chain<fake_a, fake_b> policy{sandbox_config{}};
  fake_a::fail_construction = false;
  int probed_a = 0;
  policy.select([&](const auto& candidate) {
    if (candidate.name == "fake-a") ++probed_a;
    return true;
  });
  CHECK(probed_a == 0);
  CHECK(policy.selected_name() == "fake-b");
}

TEST_CASE("chain: the probe runs once per lifetime however many threads select (contract 15)",
          "[chain][concurrency]") {
  chain<fake_a, fake_b> policy{sandbox_config{}};
  std::atomic<int> probes{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      for (int j = 0; j < 50; ++j)
        policy.select([&](const auto& candidate) {
          ++probes;
          return candidate.name == "fake-b";
        });
    });
  for (auto& thread : threads) thread.join();
  CHECK(probes == 2);  // fake-a once (rejected), fake-b once (accepted)
  CHECK(policy.selected_name() == "fake-b");
}

TEST_CASE("chain: a chain of one candidate is selected without probing (contract 15)", "[chain]") {
  chain<fake_b> policy{sandbox_config{}};
  policy.select([](const auto&) -> bool { throw std::logic_error("must not probe"); });
  CHECK(policy.selected_name() == "fake-b");

  chain<fake_a> unselected{sandbox_config{}};
  launch_plan plan = plan_for("true");
  (void)unselected.prepare(sandbox_mode::read_only, "/", plan);  // selects itself
  CHECK(unselected.selected_name() == "fake-a");
}

TEST_CASE("chain: prepare before select on a multi-candidate chain is a programming error", "[chain]") {
  chain<fake_a, fake_b> policy{sandbox_config{}};
  launch_plan plan = plan_for("true");
  CHECK_THROWS_AS(policy.prepare(sandbox_mode::read_only, "/", plan), std::logic_error);
}

TEST_CASE("chain: bwrap then landlock, probed functionally, confines a real command (contract 15, 16)", "[chain]") {
  if (bwrap_missing() && landlock_missing()) {
    WARN("skipped: neither bwrap nor Landlock is usable here");
    return;
  }
  chain<bwrap, landlock> policy{sandbox_config{}};
  // The executor's probe, in miniature: `true` under read-only must succeed.
  policy.select([](const auto& candidate) {
    auto [result, launch] = run_confined(candidate, sandbox_mode::read_only, "/", "true");
    return result.exit_code == 0;
  });
  CHECK_FALSE(policy.selected_name().empty());
  sandbox_dirs dirs;
  auto [result, launch] =
      run_confined(policy, sandbox_mode::read_only, dirs.workspace.path(), "echo x > \"$WS/f\"", dirs.env());
  CHECK(result.exit_code != 0);
  CHECK(policy.is_denial(result.err));
  CHECK_FALSE(policy.runner_failure(launch, result.err));
  CHECK_FALSE(fs::exists(dirs.workspace.path() / "f"));
}

TEST_CASE("chain: rejecting bwrap in the probe falls through to landlock, which installs a pre-exec hook "
          "(contract 15)",
          "[chain]") {
  SKIP_UNLESS(landlock_missing());
  chain<bwrap, landlock> policy{sandbox_config{}};
  policy.select([](const auto& candidate) { return candidate.name == "landlock"; });
  CHECK(policy.selected_name() == "landlock");
  launch_plan plan = plan_for("true");
  auto launch = policy.prepare(sandbox_mode::read_only, "/", plan);
  CHECK(plan.hooks.size() == 1);
  CHECK(plan.argv.front() == "/bin/bash");
  CHECK(launch.keep_alive);
}

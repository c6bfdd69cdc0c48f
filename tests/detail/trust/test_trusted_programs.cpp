// Nothing the host runs can be planted by a command (docs/contract.md
// "Beyond", issue 25 item 1): the programs bashexec executes on the host's
// side — bwrap, setpriv, an operator's runner, the shell — come from fixed
// or configured absolute locations that nobody but root or the running user
// can change, and never from a root a confined command may write.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include <bashexec/bashexec.hpp>
#include <bashexec/detail/trust/find_program.hpp>

#include "cli_test_support.hpp"
#include "sandbox_test_support.hpp"

namespace fs = std::filesystem;
using namespace bashexec;
using test_support::temp_dir;

namespace {

using runner_executor = basic_executor<policies<spawn_with<fork_exec>, confine_with<runner_command>>>;

/// Writes an executable script at `path` that records that it ran in
/// `marker`, then execs `then` with its arguments (a stand-in for a planted
/// program that still does the real program's work).
void plant(const fs::path& path, const fs::path& marker, const std::string& then = "/usr/bin/true") {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << "#!/bin/sh\necho planted >> '" << marker.string() << "'\nexec " << then << " \"$@\"\n";
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
}

/// Sets an environment variable for one scope.
class scoped_env {
 public:
  scoped_env(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~scoped_env() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("trusted programs: a bare name is looked up in the fixed system path, never in $PATH",
          "[trusted_programs]") {
  temp_dir dir;
  const fs::path fake = dir.path() / "bin" / "true";
  plant(fake, dir.path() / "ran");
  scoped_env path("PATH", (dir.path() / "bin").string() + ":/usr/bin:/bin");

  const detail::program_lookup found = detail::lookup_trusted_program("true");
  REQUIRE(found.path);
  CHECK(found.path->parent_path() != fake.parent_path());
  CHECK(found.path->is_absolute());
  CHECK_FALSE(detail::lookup_trusted_program("bashexec-no-such-program").path);
  CHECK_THAT(detail::lookup_trusted_program("bashexec-no-such-program").refusal,
             Catch::Contains("not found") && Catch::Contains("$PATH is not searched"));
}

TEST_CASE("trusted programs: a relative path is refused, as configuration and as a lookup", "[trusted_programs]") {
  CHECK_THAT(detail::lookup_trusted_program("bin/bwrap").refusal, Catch::Contains("relative path"));
  CHECK_THROWS_WITH((bwrap::config{.program = "bin/bwrap"}.validate()), Catch::Contains("bwrap.program"));
  CHECK_THROWS_WITH((bwrap::config{.setpriv = "./setpriv"}.validate()), Catch::Contains("bwrap.setpriv"));
  executor_config config;
  config.shell = "bash";
  CHECK_THROWS_AS(local_executor(config), std::invalid_argument);
  CHECK_THROWS_WITH(local_executor(config), Catch::Contains("shell"));
}

TEST_CASE("trusted programs: a program others could replace is refused", "[trusted_programs]") {
  temp_dir dir;
  const fs::path program = dir.path() / "bin" / "tool";
  plant(program, dir.path() / "ran");
  REQUIRE(detail::lookup_trusted_program(program).path);

  SECTION("its directory is writable by every user") {
    ::chmod(program.parent_path().c_str(), 0777);
    CHECK_THAT(detail::lookup_trusted_program(program).refusal, Catch::Contains("writable by every user"));
  }
  SECTION("its directory is writable by its group") {
    ::chmod(program.parent_path().c_str(), 0775);
    CHECK_THAT(detail::lookup_trusted_program(program).refusal, Catch::Contains("writable by its group"));
  }
  SECTION("the file itself is writable by others") {
    ::chmod(program.c_str(), 0757);
    CHECK_THAT(detail::lookup_trusted_program(program).refusal, Catch::Contains("writable by every user"));
  }
  SECTION("a symlink in a trusted place leads into an untrusted one") {
    const fs::path link = dir.path() / "link";
    fs::create_symlink(program, link);
    ::chmod(program.parent_path().c_str(), 0777);
    CHECK_THAT(detail::lookup_trusted_program(link).refusal, Catch::Contains("writable by every user"));
  }
  SECTION("a sticky directory (like /var/tmp) above it is fine: nobody else can rename what is ours") {
    ::chmod(dir.path().c_str(), 01777);
    CHECK(detail::lookup_trusted_program(program).path);
  }
  SECTION("it belongs to another user") {
    if (::geteuid() != 0) {
      WARN("skipped: only root can give a file to another user");
      return;
    }
    REQUIRE(::chown(program.c_str(), 65534, 65534) == 0);
    CHECK_THAT(detail::lookup_trusted_program(program).refusal, Catch::Contains("belongs to uid 65534"));
  }
}

TEST_CASE("trusted programs: a bwrap a workspace-write command planted on $PATH is never run (the escape)",
          "[trusted_programs][sandbox]") {
  SKIP_UNLESS(test_support::backend_missing<test_support::bwrap_executor>());
  temp_dir workspace;
  const fs::path marker = workspace.path() / "planted-ran";
  const fs::path venv_bin = workspace.path() / ".venv" / "bin";
  fs::create_directories(venv_bin);
  scoped_env path("PATH", venv_bin.string() + ":/usr/local/bin:/usr/bin:/bin");

  executor_config config;
  config.cwd = workspace.path();
  {
    test_support::bwrap_executor planter(config);
    const run_result planted = planter.run(planter.resolve(
        {.command = "printf '#!/bin/sh\\necho planted >> " + marker.string() +
                    "\\nexec /usr/bin/bwrap \"$@\"\\n' > .venv/bin/bwrap && chmod +x .venv/bin/bwrap",
         .mode = sandbox_mode::workspace_write}));
    REQUIRE(planted.exit_code == 0);
  }
  REQUIRE(fs::exists(venv_bin / "bwrap"));

  test_support::bwrap_executor next(config);
  const run_result result = next.run(next.resolve({.command = "true"}));
  CHECK(result.exit_code == 0);
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("trusted programs: a runner inside the workspace is refused in both backends' policies",
          "[trusted_programs][sandbox]") {
  SKIP_UNLESS(test_support::backend_missing<test_support::bwrap_executor>());
  temp_dir workspace;
  const fs::path marker = workspace.path() / "planted-ran";
  const fs::path inside = workspace.path() / "tools" / "bwrap";
  plant(inside, marker, "/usr/bin/bwrap");
  executor_config config;
  config.cwd = workspace.path();

  SECTION("bwrap: the foreground run throws sandbox_unavailable naming the writable root") {
    test_support::bwrap_executor executor(config, bwrap::config{.program = inside});
    try {
      executor.run(executor.resolve({.command = "true"}));
      FAIL("a planted bwrap ran");
    } catch (const sandbox_unavailable& e) {
      CHECK_THAT(e.what(), Catch::Contains("lies under") && Catch::Contains(workspace.str()));
    }
  }
  SECTION("runner_command: a background start settles as a runner failure without running it") {
    runner_executor executor(config, runner_command::config{.argv = {inside.string()}, .failure_signatures = {"bwrap: "}});
    const task_id id = executor.start(executor.resolve({.command = "true"}));
    const task_snapshot task = executor.wait(id);
    REQUIRE(task.sandbox);
    CHECK(task.sandbox->runner_failed);
    CHECK_THAT(executor.read_output(id).delta, Catch::Contains("lies under"));
  }
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("trusted programs: a shell inside the workspace or untrusted is an infrastructure error",
          "[trusted_programs]") {
  temp_dir workspace;
  const fs::path marker = workspace.path() / "planted-ran";
  const fs::path shell = workspace.path() / "bin" / "bash";
  plant(shell, marker, "/bin/bash");
  executor_config config;
  config.cwd = workspace.path();
  config.shell = shell;
  local_executor executor(config);
  try {
    executor.run(executor.resolve({.command = "true"}));
    FAIL("a shell inside the workspace ran");
  } catch (const infrastructure_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("shell") && Catch::Contains("lies under"));
  }
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("trusted programs: the CLI picks its backend with --backend and names it in --json",
          "[trusted_programs][cli]") {
  using cli_test::cli_run;
  if (!test_support::backend_missing<test_support::landlock_executor>()) {
    const run_result landlock_run = cli_run("run --backend landlock --json -- true");
    REQUIRE(landlock_run.exit_code == 0);
    CHECK(nlohmann::json::parse(landlock_run.out.text)["sandbox"]["backend"] == "landlock");
  } else {
    WARN("skipped --backend landlock: " << *test_support::backend_missing<test_support::landlock_executor>());
  }
  if (!test_support::backend_missing<test_support::bwrap_executor>()) {
    const run_result bwrap_run = cli_run("run --backend bwrap --bwrap /usr/bin/bwrap --json -- true");
    REQUIRE(bwrap_run.exit_code == 0);
    CHECK(nlohmann::json::parse(bwrap_run.out.text)["sandbox"]["backend"] == "bwrap");
  } else {
    WARN("skipped --backend bwrap: " << *test_support::backend_missing<test_support::bwrap_executor>());
  }
  CHECK(cli_run("run --backend chroot -- true").exit_code == 2);
  CHECK(cli_run("run --bwrap bin/bwrap -- true").exit_code == 2);
  const run_result refused = cli_run("run --backend bwrap --bwrap /etc/hostname -- true");
  CHECK(refused.exit_code == 125);
  CHECK_THAT(refused.err.text, Catch::Contains("/etc/hostname"));
}

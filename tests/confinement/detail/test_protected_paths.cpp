// Protected paths (docs/contract.md "Beyond"; docs/security.md "Protected
// paths"): under workspace-write every repository in the workspace — each
// nested `.git` (directory or gitdir file, and the gitdir it names), the
// hooks path its config names — stays read-only in both backends, a write
// refused there is a denial like any other (contract 16), and where the
// protection cannot be established the spawn is refused, never run with a
// repository writable. Runs as root and, through tests/run_unprivileged.sh,
// as nobody (Landlock then binds inside a user namespace of its own).
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <bashexec/config.hpp>
#include <bashexec/confinement/detail/git_config.hpp>
#include <bashexec/confinement/detail/protected_paths.hpp>
#include <bashexec/errors.hpp>

#include "executor_test_support.hpp"
#include "sandbox_test_support.hpp"

namespace fs = std::filesystem;
using namespace bashexec;
using namespace test_support;

namespace {

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

/// A repository's bare bones: what the scan reads is only `.git` and config.
void make_repository(const fs::path& worktree, const std::string& config = "[core]\n\tbare = false\n") {
  fs::create_directories(worktree / ".git" / "hooks");
  write_file(worktree / ".git" / "config", config);
}

/// Under /var/tmp: workspace-write grants /tmp, so nothing there is "outside".
struct workspace {
  temp_dir dir{"/var/tmp", "bashexec-protect-"};
  const fs::path& path() const { return dir.path(); }
  std::map<std::string, std::string> env() const { return {{"WS", dir.str()}}; }
};

template <class Executor>
executor_config writable(const fs::path& root) {
  executor_config config;
  config.sandbox.workspace_root = root;
  config.sandbox.default_mode = sandbox_mode::workspace_write;
  config.kill_grace = std::chrono::milliseconds(500);
  return config;
}

exec_request command(std::string text, std::map<std::string, std::string> env) {
  exec_request request;
  request.command = std::move(text);
  request.env = std::move(env);
  return request;
}

/// Why `Executor` cannot enforce protected paths here; empty when it can.
template <class Executor>
std::optional<std::string> cannot_protect() {
  if (auto missing = backend_missing<Executor>()) return missing;
  if constexpr (confined_by<Executor, landlock>)
    if (!landlock::can_bind_read_only())
      return std::string("Landlock cannot bind read-only here (no privilege, no user namespace)");
  return std::nullopt;
}

std::vector<fs::path> relative_to(const fs::path& root, const std::vector<fs::path>& paths) {
  std::vector<fs::path> out;
  for (const auto& path : paths) out.push_back(path.lexically_relative(root));
  return out;
}

}  // namespace

TEST_CASE("protected paths: git config is read for core.hooksPath and include paths as git-config(1) writes them",
          "[protected][git_config]") {
  const auto facts = detail::parse_git_config(
      "# comment\n"
      "[Core]\n"
      "\tbare = false\n"
      "\tHooksPath = .husky/_ ; trailing comment\n"
      "[core \"ignored-subsection-is-still-core\"]\n"
      "[alias]\n"
      "\thooksPath = not-core\n"
      "[core] hookspath = \"quoted dir\\\\x\"\n"
      "[include]\n"
      "\tpath = ../shared.gitconfig\n"
      "[includeIf \"gitdir:~/work/\"]\n"
      "\tpath = ~/work.gitconfig\n"
      "[core]\n"
      "\thooksPath = con\\\n"
      "tinued\n"
      "\tfsmonitor\n");
  CHECK(facts.hooks_paths == std::vector<std::string>{".husky/_", "quoted dir\\x", "continued"});
  CHECK(facts.include_paths == std::vector<std::string>{"../shared.gitconfig", "~/work.gitconfig"});
  CHECK(detail::parse_git_config("").hooks_paths.empty());
  CHECK(detail::parse_git_config("[core\nhooksPath").hooks_paths.empty());
}

TEST_CASE(
    "protected paths: .git stands for every repository in the workspace — nested .git directories, gitdir files "
    "and the gitdirs they name, the hooks path a config names — found without following links (DESIGN \"Beyond\")",
    "[protected][scan]") {
  workspace ws;
  const fs::path& root = ws.path();
  make_repository(root, "[core]\n\thooksPath = .husky\n");
  fs::create_directories(root / ".husky");
  make_repository(root / "vendor" / "lib");
  make_repository(root / "deep" / "a" / "b" / "c");
  // A linked worktree: its .git is a file naming a gitdir inside the workspace.
  fs::create_directories(root / "gitdirs" / "wt");
  write_file(root / "gitdirs" / "wt" / "config.worktree", "[core]\n\thooksPath = ../hooks-of-wt\n");
  fs::create_directories(root / "hooks-of-wt");
  write_file(root / "wt" / ".git", "gitdir: ../gitdirs/wt\n");
  // A link out of the workspace is not followed into a repository there.
  temp_dir outside("/var/tmp", "bashexec-protect-out-");
  make_repository(outside.path() / "repo");
  fs::create_directory_symlink(outside.path(), root / "link-out");
  fs::create_directories(root / "src" / "plain");

  const auto found = detail::protected_locations(root, {".git"});
  CHECK(relative_to(root, found) == std::vector<fs::path>{".git", ".husky", "deep/a/b/c/.git", "gitdirs/wt",
                                                          "hooks-of-wt", "vendor/lib/.git", "wt/.git"});

  // Without `.git` among the protected paths, no repository is looked for.
  CHECK(relative_to(root, detail::protected_locations(root, {"src"})) == std::vector<fs::path>{"src"});
  CHECK(detail::protected_locations(root, {}).empty());
  // Nothing lies under another: a configured path inside .git adds no bind.
  CHECK(relative_to(root, detail::protected_locations(root, {".git", ".git/hooks", "src/plain"})) ==
        std::vector<fs::path>{".git", ".husky", "deep/a/b/c/.git", "gitdirs/wt", "hooks-of-wt", "src/plain",
                              "vendor/lib/.git", "wt/.git"});
  CHECK(executor_config{}.sandbox.protected_scan_limit == detail::default_protected_scan_limit);
}

TEST_CASE(
    "protected paths: where the protection cannot be established — too many entries to scan, or a hooks path "
    "inside the workspace that does not exist yet — the answer is sandbox_unavailable, never a writable repository",
    "[protected][scan]") {
  workspace ws;
  const fs::path& root = ws.path();
  make_repository(root);
  for (int i = 0; i < 20; ++i) fs::create_directories(root / "tree" / std::to_string(i));
  CHECK_NOTHROW(detail::protected_locations(root, {".git"}, 100));
  try {
    detail::protected_locations(root, {".git"}, 10);
    FAIL("a workspace larger than the scan limit was accepted");
  } catch (const sandbox_unavailable& error) {
    CHECK(error.mode() == sandbox_mode::workspace_write);
    CHECK_THAT(error.what(), Catch::Contains("sandbox.protected_scan_limit"));
  }
  // The limit only matters when repositories are looked for.
  CHECK_NOTHROW(detail::protected_locations(root, {"tree"}, 10));

  write_file(root / ".git" / "config", "[core]\n\thooksPath = .husky\n");
  try {
    detail::protected_locations(root, {".git"});
    FAIL("a missing hooks path inside the workspace was accepted");
  } catch (const sandbox_unavailable& error) {
    CHECK_THAT(error.what(), Catch::Contains("core.hooksPath"));
    CHECK_THAT(error.what(), Catch::Contains(".husky"));
  }
  // One outside the workspace is read-only already: nothing to refuse.
  write_file(root / ".git" / "config", "[core]\n\thooksPath = /var/tmp/bashexec-no-such-hooks\n");
  CHECK(relative_to(root, detail::protected_locations(root, {".git"})) == std::vector<fs::path>{".git"});

  executor_config config;
  config.sandbox.protected_scan_limit = 0;
  CHECK_THROWS_WITH(validate(config), Catch::Contains("sandbox.protected_scan_limit"));
}

TEMPLATE_TEST_CASE(
    "protected paths: a write refused at a protected path is reported as a denial under both backends — "
    ".git/hooks, .git/config (contract 16, DESIGN \"Beyond\")",
    "[protected][executor]", bwrap_executor, landlock_executor) {
  SKIP_UNLESS(cannot_protect<TestType>());
  workspace ws;
  make_repository(ws.path());
  write_file(ws.path() / ".git" / "config", "original\n");
  TestType exec(writable<TestType>(ws.path()));
  for (via how : both_ways) {
    INFO("via " << name_of(how));
    for (const char* attack : {"echo planted > \"$WS/.git/hooks/pre-commit\"", "echo x > \"$WS/.git/config\""}) {
      INFO("command " << attack);
      const observed denied = observe(exec, command(attack, ws.env()), how);
      CHECK(denied.exit_code != 0);
      REQUIRE(denied.sandbox);
      CHECK(denied.sandbox->mode == sandbox_mode::workspace_write);
      CHECK(denied.sandbox->denied);
    }
    CHECK_FALSE(fs::exists(ws.path() / ".git" / "hooks" / "pre-commit"));
    CHECK(slurp(ws.path() / ".git" / "config") == "original\n");
    // A plain failure beside it is not a denial.
    const observed plain = observe(exec, command("echo y > \"$WS/f\" && exit 3", ws.env()), how);
    CHECK(plain.exit_code == 3);
    REQUIRE(plain.sandbox);
    CHECK_FALSE(plain.sandbox->denied);
  }
}

TEMPLATE_TEST_CASE(
    "protected paths: nested repositories, a worktree's gitdir file and its gitdir, and the core.hooksPath a "
    "config names stay read-only under both backends while the workspace around them is writable "
    "(DESIGN \"Beyond\")",
    "[protected][executor]", bwrap_executor, landlock_executor) {
  SKIP_UNLESS(cannot_protect<TestType>());
  workspace ws;
  const fs::path& root = ws.path();
  make_repository(root, "[core]\n\thooksPath = .husky\n");
  fs::create_directories(root / ".husky");
  make_repository(root / "packages" / "nested");
  fs::create_directories(root / "gitdirs" / "wt");
  write_file(root / "gitdirs" / "wt" / "HEAD", "ref: refs/heads/wt\n");
  write_file(root / "wt" / ".git", "gitdir: ../gitdirs/wt\n");
  TestType exec(writable<TestType>(root));

  for (via how : both_ways) {
    INFO("via " << name_of(how));
    for (const char* attack :
         {"echo planted > \"$WS/packages/nested/.git/hooks/pre-commit\"", "echo x >> \"$WS/packages/nested/.git/config\"",
          "echo planted > \"$WS/.husky/pre-commit\"", "echo 'gitdir: /elsewhere' > \"$WS/wt/.git\"",
          "echo x > \"$WS/gitdirs/wt/HEAD\"", "rm -rf \"$WS/packages/nested/.git\""}) {
      INFO("command " << attack);
      const observed denied = observe(exec, command(attack, ws.env()), how);
      CHECK(denied.exit_code != 0);
      REQUIRE(denied.sandbox);
      CHECK(denied.sandbox->denied);
    }
    // A bind's mount point cannot be renamed away (EBUSY, not a file-denial message).
    CHECK(observe(exec, command("mv \"$WS/.husky\" \"$WS/h2\"", ws.env()), how).exit_code != 0);
    CHECK(fs::is_directory(root / ".husky"));
    CHECK_FALSE(fs::exists(root / "packages" / "nested" / ".git" / "hooks" / "pre-commit"));
    CHECK_FALSE(fs::exists(root / ".husky" / "pre-commit"));
    CHECK(slurp(root / "wt" / ".git") == "gitdir: ../gitdirs/wt\n");
    CHECK(slurp(root / "gitdirs" / "wt" / "HEAD") == "ref: refs/heads/wt\n");
    CHECK(fs::exists(root / "packages" / "nested" / ".git" / "config"));

    const observed beside = observe(
        exec, command("echo y > \"$WS/packages/nested/f\" && mkdir -p \"$WS/wt/src\" && echo z > \"$WS/wt/src/o\"",
                      ws.env()),
        how);
    CHECK(beside.exit_code == 0);
    CHECK(slurp(root / "packages" / "nested" / "f") == "y\n");
    fs::remove_all(root / "wt" / "src");
  }
}

TEMPLATE_TEST_CASE(
    "protected paths: a workspace-write spawn whose protection cannot be established is refused with "
    "sandbox_unavailable under both backends, and nothing runs, while read-only still runs",
    "[protected][executor]", bwrap_executor, landlock_executor) {
  SKIP_UNLESS(cannot_protect<TestType>());
  workspace ws;
  make_repository(ws.path(), "[core]\n\thooksPath = .husky\n");  // .husky does not exist
  TestType exec(writable<TestType>(ws.path()));
  exec_request request = command("echo ran > \"$WS/ran\"", ws.env());
  for (via how : both_ways) {
    INFO("via " << name_of(how));
    try {
      if (how == via::run)
        exec.run(exec.resolve(request));
      else
        exec.wait(exec.start(exec.resolve(request)));
      FAIL("ran with a hooks path the command could create");
    } catch (const sandbox_unavailable& error) {
      CHECK_THAT(error.what(), Catch::Contains("core.hooksPath"));
    }
    CHECK_FALSE(fs::exists(ws.path() / "ran"));
  }
  exec_request quiet = command("echo ok", ws.env());
  quiet.mode = sandbox_mode::read_only;
  const run_result ok = exec.run(exec.resolve(quiet));
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.text == "ok\n");
}

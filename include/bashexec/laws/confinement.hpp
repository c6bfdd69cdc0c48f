// laws/confinement: the laws every confining policy obeys (docs/contract.md
// items 13, 16, 17), checked through a real executor with real commands, as a
// function a policy's author runs against their own type:
//   auto report = bashexec::laws::check_confinement_laws<my_confinement>(my_config);
//   if (report.unavailable) …skip, saying why…
//   else if (!report.passed()) …print report.violations…
// The laws:
//   - writes denied per mode: read-only lets nothing be written but
//     /dev/null; workspace-write lets the workspace (create, mkdir, rename)
//     and /tmp be written and nothing else; danger-full-access is not confined at all;
//   - /dev/null writable, and files readable, under every confined mode;
//   - denial dialect recognized: a denied write is reported `denied` (the
//     policy's `is_denial` knows what its denials print), a plain failure is
//     neither denied nor a runner failure, and every result names its mode
//     (with a level when confined);
//   - a background task is confined and classified like a foreground run.
// The shipped confinements pass them (tests/test_confinement_laws.cpp); so
// must a new one (docs/extending.md). Scratch directories go under `scratch`
// (never /tmp: workspace-write grants it) and are removed afterwards.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <system_error>

#include <fmt/core.h>

#include "bashexec/basic_executor.hpp"
#include "bashexec/impl/basic_executor.hpp"  // composes its own executors, in either mode
#include "bashexec/errors.hpp"
#include "bashexec/detail/shared_temp.hpp"
#include "bashexec/laws/report.hpp"
#include "bashexec/policies.hpp"
#include "bashexec/spawn/fork_exec.hpp"

namespace bashexec::laws {

namespace detail {

/// A fresh directory under `parent`, removed with the object.
class scratch_directory {
 public:
  scratch_directory(const std::filesystem::path& parent, const char* prefix) {
    std::string pattern = (parent / fmt::format("{}XXXXXX", prefix)).string();
    if (::mkdtemp(pattern.data()) == nullptr) bashexec::detail::throw_syscall("mkdtemp");
    path_ = pattern;
  }
  ~scratch_directory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  scratch_directory(const scratch_directory&) = delete;
  scratch_directory& operator=(const scratch_directory&) = delete;
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// What one command did, foreground or background.
struct outcome {
  std::optional<int> exit_code;
  std::string text;  // stdout then stderr (foreground only)
  std::optional<sandbox_info> sandbox;
};

}  // namespace detail

template <class Confinement, class Spawn = fork_exec>
  requires confining_policy<Confinement>
report check_confinement_laws(const typename Confinement::config& own = {},
                              const std::filesystem::path& scratch = "/var/tmp") {
  using executor_type = basic_executor<policies<spawn_with<Spawn>, confine_with<Confinement>>>;
  report result;
  detail::scratch_directory workspace(scratch, "bashexec-laws-ws-");
  detail::scratch_directory outside(scratch, "bashexec-laws-out-");
  // Unpredictable: nobody can plant a link at the name before the command writes it.
  const std::filesystem::path in_tmp = "/tmp/" + bashexec::detail::random_name("bashexec-laws-");
  struct remove_in_tmp {
    const std::filesystem::path& path;
    ~remove_in_tmp() {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  } cleanup{in_tmp};
  detail::write_text(workspace.path() / "readme", "readable\n");
  const std::map<std::string, std::string> env{
      {"WS", workspace.path().string()}, {"OUT", outside.path().string()}, {"T", in_tmp.string()}};

  executor_config config;
  config.sandbox.workspace_root = workspace.path();
  config.default_timeout = std::chrono::milliseconds(30000);
  executor_type executor(config, own);

  auto observe = [&](sandbox_mode mode, const std::string& command, bool background = false) {
    detail::outcome seen;
    exec_spec spec = executor.resolve({.command = command, .env = env, .mode = mode});
    if (background) {
      const task_snapshot done = executor.wait(executor.start(std::move(spec)));
      seen.exit_code = done.exit_code;
      seen.sandbox = done.sandbox;
    } else {
      run_result run = executor.run(spec);
      seen.exit_code = run.exit_code;
      seen.text = run.out.text + run.err.text;
      seen.sandbox = std::move(run.sandbox);
    }
    return seen;
  };
  auto violated = [&](std::string_view law, std::string_view mode, std::string_view what, const detail::outcome& seen) {
    result.violations.push_back(fmt::format("{}: {} ({}): {} [exit {}, denied {}, output \"{}\"]", Confinement::name,
                                            law, mode, what, seen.exit_code.value_or(-1),
                                            seen.sandbox && seen.sandbox->denied, seen.text));
  };
  auto names_its_mode = [&](sandbox_mode mode, const detail::outcome& seen) {
    const bool confined = mode != sandbox_mode::danger_full_access;
    if (!seen.sandbox || seen.sandbox->mode != mode || seen.sandbox->level.has_value() != confined)
      violated("denial dialect recognized", fmt::format("{}", mode), "the result does not name its mode and level",
               seen);
  };
  auto denied_write = [&](sandbox_mode mode, const std::string& target, bool background = false) {
    const detail::outcome seen = observe(mode, fmt::format("echo x > \"{}\"", target), background);
    names_its_mode(mode, seen);
    const std::string where = fmt::format("{}{}", mode, background ? ", background" : "");
    if (seen.exit_code == 0 || std::filesystem::exists(target))
      violated("writes denied per mode", where, fmt::format("a write to {} succeeded", target), seen);
    else if (!seen.sandbox || !seen.sandbox->denied || seen.sandbox->runner_failed)
      violated("denial dialect recognized", where, "a denied write is not reported as denied", seen);
  };

  try {
    // The first confined call tells whether the policy works here at all.
    const detail::outcome first = observe(sandbox_mode::read_only, "true");
    if (first.exit_code != 0) violated("writes denied per mode", "read-only", "`true` failed", first);
  } catch (const sandbox_unavailable& error) {
    result.unavailable = error.what();
    return result;
  }

  for (sandbox_mode mode : {sandbox_mode::read_only, sandbox_mode::workspace_write}) {
    const std::string name = fmt::format("{}", mode);
    const detail::outcome null =
        observe(mode, "echo x > /dev/null && cat \"$WS/readme\" && head -c 1 /bin/sh > /dev/null");
    names_its_mode(mode, null);
    if (null.exit_code != 0 || null.text != "readable\n" || (null.sandbox && null.sandbox->denied))
      violated("/dev/null writable", name, "writing /dev/null or reading a file failed", null);

    const detail::outcome plain = observe(mode, "exit 3");
    if (plain.exit_code != 3 || !plain.sandbox || plain.sandbox->denied || plain.sandbox->runner_failed)
      violated("denial dialect recognized", name, "a plain failure is not the command's own exit 3", plain);

    denied_write(mode, (outside.path() / "f").string());
  }
  denied_write(sandbox_mode::read_only, (workspace.path() / "f").string());
  denied_write(sandbox_mode::read_only, in_tmp.string());
  denied_write(sandbox_mode::read_only, (workspace.path() / "g").string(), true);

  const detail::outcome inside =
      observe(sandbox_mode::workspace_write,
              "echo x > \"$WS/f\" && mkdir \"$WS/d\" && mv \"$WS/f\" \"$WS/d/g\" && echo y > \"$T\" && cat \"$T\"");
  names_its_mode(sandbox_mode::workspace_write, inside);
  // /tmp may be private to the command (bwrap's tmpfs): read it back inside.
  if (inside.exit_code != 0 || inside.text != "y\n" || detail::read_text(workspace.path() / "d" / "g") != "x\n")
    violated("writes denied per mode", "workspace-write", "writing the workspace and /tmp failed", inside);

  const detail::outcome free = observe(sandbox_mode::danger_full_access,
                                       "echo x > \"$OUT/free\" && echo 'Permission denied' >&2 && exit 1");
  names_its_mode(sandbox_mode::danger_full_access, free);
  if (!std::filesystem::exists(outside.path() / "free"))
    violated("writes denied per mode", "danger-full-access", "an unconfined write was denied", free);
  if (free.sandbox && free.sandbox->denied)
    violated("denial dialect recognized", "danger-full-access", "an unconfined failure was reported as denied",
             free);
  return result;
}

}  // namespace bashexec::laws

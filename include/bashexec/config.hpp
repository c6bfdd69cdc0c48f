// config: everything an executor can be configured with, validated once at
// construction (`validate` throws std::invalid_argument naming the field).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "bashexec/sandbox_mode.hpp"

namespace bashexec {

/// Knobs of the confining policies (ignored by `unconfined`).
struct sandbox_config {
  /// The mode a request without one runs under. A sandboxing executor uses
  /// `read-only` when this is empty.
  std::optional<sandbox_mode> default_mode;
  /// The root `workspace-write` may write under; defaults to the executor cwd.
  std::optional<std::filesystem::path> workspace_root;
  /// Bound on one functional probe of a `chain` candidate.
  std::chrono::milliseconds probe_timeout{5000};
  /// bubblewrap binary; a bare name is searched on PATH.
  std::filesystem::path bwrap_program = "bwrap";
  /// `runner_command`: the operator's bwrap-compatible runner argv and the
  /// stderr signatures that mean "the runner failed" (required together).
  std::vector<std::string> runner_argv;
  std::vector<std::string> runner_failure_signatures;
  /// Paths, relative to the workspace root, that stay read-only under
  /// `workspace-write` (DESIGN.md "Beyond": `.git` cannot be rewritten by a
  /// confined command). Each must be relative and free of `..`; one that does
  /// not exist at spawn time is skipped; a symlink is protected at its target
  /// when that lies inside the workspace. bwrap and `runner_command` bind each
  /// existing one read-only; Landlock cannot (its rules only add access), so
  /// it reports `enforcement::partial` instead — see confinement/landlock.hpp.
  std::vector<std::filesystem::path> protected_paths{".git"};
};

struct executor_config {
  /// Default workdir; the process cwd when empty.
  std::optional<std::filesystem::path> cwd;
  std::filesystem::path shell = "/bin/bash";
  std::chrono::milliseconds default_timeout{120000};
  /// Larger requested timeouts are clamped to this.
  std::chrono::milliseconds max_timeout{600000};
  /// SIGTERM → SIGKILL delay.
  std::chrono::milliseconds kill_grace{3000};
  /// How long a foreground run waits for descendants holding its output open
  /// after the shell exited, before killing what is left of the group.
  std::chrono::milliseconds drain_timeout{2000};
  /// Per-stream in-memory output cap.
  std::size_t output_cap = 64000;
  /// Where the private spill directory is created; $TMPDIR or /tmp when empty.
  std::optional<std::filesystem::path> spill_parent;
  /// Keep the spill directory after disposal (post-mortems).
  bool keep_spill_dir = false;
  /// Total bytes of spill files kept; past it, the oldest settled owners'
  /// spill files are removed first.
  std::uint64_t spill_budget_bytes = std::uint64_t{1} << 30;
  /// Receives contained errors (a throwing listener); stderr when empty.
  std::function<void(std::string_view)> error_sink;
  sandbox_config sandbox;
};

namespace detail {

inline void require_positive(std::chrono::milliseconds value, std::string_view field) {
  if (value.count() <= 0)
    throw std::invalid_argument(fmt::format("{} must be positive, got {} ms", field, value.count()));
}

}  // namespace detail

/// Throws std::invalid_argument naming the first invalid field.
inline void validate(const executor_config& config) {
  detail::require_positive(config.default_timeout, "default_timeout");
  detail::require_positive(config.max_timeout, "max_timeout");
  detail::require_positive(config.kill_grace, "kill_grace");
  detail::require_positive(config.drain_timeout, "drain_timeout");
  detail::require_positive(config.sandbox.probe_timeout, "sandbox.probe_timeout");
  if (config.output_cap == 0) throw std::invalid_argument("output_cap must be positive, got 0");
  if (config.shell.empty()) throw std::invalid_argument("shell must not be empty");
  if (config.spill_budget_bytes == 0) throw std::invalid_argument("spill_budget_bytes must be positive, got 0");
  const bool has_argv = !config.sandbox.runner_argv.empty();
  const bool has_signatures = !config.sandbox.runner_failure_signatures.empty();
  if (has_argv != has_signatures)
    throw std::invalid_argument(
        "sandbox.runner_argv and sandbox.runner_failure_signatures must be given together");
  for (const auto& path : config.sandbox.protected_paths) {
    if (path.empty() || path.is_absolute() || path.has_root_path())
      throw std::invalid_argument(fmt::format(
          "sandbox.protected_paths must hold paths relative to the workspace root, got \"{}\"", path.string()));
    for (const auto& part : path)
      if (part == "..")
        throw std::invalid_argument(fmt::format(
            "sandbox.protected_paths must stay inside the workspace root (no \"..\"), got \"{}\"", path.string()));
    if (path.lexically_normal() == ".")
      throw std::invalid_argument(fmt::format(
          "sandbox.protected_paths entry \"{}\" names the whole workspace; use read-only mode instead",
          path.string()));
  }
}

}  // namespace bashexec

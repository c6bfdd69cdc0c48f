// detail/engine/verdict: what a confined run's failure means (contract 16),
// decided in one place for the foreground driver and the background task.
// A non-zero exit (not a signal) of a confined run is first a runner
// failure — the confinement itself failed and the command never ran — else,
// when stderr speaks the backend's denial dialect (or, in a spawn with
// read-only binds its dialect does not cover, EROFS's), a denial. A runner
// that died of a signal after reporting the command's exit code gives the
// command's own end (`command_exit`). The foreground
// throws `sandbox_unavailable` for a runner failure; a background task
// stamps `runner_failed`. A spawn that threw is classified here too
// (`classify_spawn_failure`): the same two answers before the command ran.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "bashexec/confinement.hpp"
#include "bashexec/detail/kernel/pidfd.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/detail/text/text_match.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/result.hpp"

namespace bashexec::detail {

struct verdict {
  /// Why the confinement failed, when it did (the command never ran).
  std::optional<std::string> runner_failure;
  /// The command ran and was refused a file effect.
  bool denied = false;
  /// How the command itself ended, when that differs from how the spawned
  /// process (the runner) did: a stop killed bwrap after the command had
  /// exited on its own, so the result must not say it was killed.
  std::optional<exit_facts> command_exit;
};

/// Classifies a settled run from its exit and what was kept of its output.
/// An unconfined run (no `launch`) or a zero exit has no verdict.
template <class Confinement>
verdict classify(const Confinement& confinement, std::optional<confined_launch>& launch, const exit_facts& exit,
                 std::string_view err, std::string_view out) {
  verdict v;
  if constexpr (Confinement::confines) {
    auto denial = [&] {
      return confinement.is_denial(err) || (launch->read_only_binds && icontains(err, read_only_bind_dialect));
    };
    if (launch && exit.exit_code && *exit.exit_code != 0) {
      v.runner_failure = confinement.runner_failure(*launch, err, out);
      if (!v.runner_failure) v.denied = denial();
    }
    if constexpr (requires { confinement.reported_exit_code(*launch); }) {
      if (launch && exit.signal) {
        if (const std::optional<int> code = confinement.reported_exit_code(*launch)) {
          v.command_exit = exit_facts{code, std::nullopt};
          v.denied = *code != 0 && denial();
        }
      }
    }
  }
  return v;
}

/// What a spawn that threw means: its confinement's own pre-exec step
/// failed in the child (`pre_exec_failed` of a confined spawn: a runner
/// failure, the command never ran under its sandbox), or the command could
/// not be started at all (`infrastructure_error`, or `pre_exec_failed` of an
/// unconfined one). The one place both drivers decide it.
struct spawn_failure {
  std::string reason;
  bool runner_failure = false;
};

/// Classifies the exception in flight (call from a catch block); rethrows
/// any other kind (a refused plan's std::invalid_argument, bad_alloc).
BASHEXEC_DECL spawn_failure classify_spawn_failure(bool confined);

/// The foreground's error for a runner failure, naming the confinement
/// policy, the mode and the runner's first line.
BASHEXEC_DECL sandbox_unavailable runner_unavailable(std::string_view confinement_name, const sandbox_info& info,
                                                     std::string_view reason);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/engine/impl/verdict.ipp"
#endif

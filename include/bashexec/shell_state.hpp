// shell_state: what a shell leaves behind for the next call of a session —
// its final working directory and exported environment (docs/contract.md
// item 28, docs/shell-state.md). The executor captures it from the shell
// itself when a request asks (`exec_request::capture_state`), and takes it
// back as plain request data (`workdir`, `env`, `env_unset`), so the seam
// stays stateless and the tool layer carries it from call to call.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace bashexec {

/// A shell's state at its exit, against the environment it would start
/// with without any carried state (the host's, scrubbed, plus the
/// executor's own settings).
struct shell_state {
  /// `pwd -P` at exit: the physical working directory.
  std::filesystem::path cwd;
  /// Exported variables that are new or changed. Never credential-shaped
  /// names, never the executor's own variables (TERM, PAGER, NO_COLOR, the
  /// proxy variables, BASHEXEC_*), never PWD, OLDPWD, SHLVL or `_`.
  std::map<std::string, std::string> env;
  /// Names of that starting environment the shell no longer exported.
  std::vector<std::string> unset;

  friend bool operator==(const shell_state&, const shell_state&) = default;
};

}  // namespace bashexec

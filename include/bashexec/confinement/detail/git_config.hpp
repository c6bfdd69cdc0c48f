// confinement/detail/git_config: the few facts of a git config file that decide what a
// confined command must not write (docs/security.md "Protected paths"):
// `core.hooksPath` (git runs what it names at the user's next commit) and
// the files `include.path` / `includeIf.*.path` pull in (config too).
// Parsed here, never by running the host's `git`: a command could have
// planted one on PATH, and git's own discovery obeys settings a command
// could write.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

struct git_config_facts {
  /// Every `core.hooksPath` value, in file order (git uses the last; all are
  /// protected, which is never less).
  std::vector<std::string> hooks_paths;
  /// Every `path` of an `[include]` or `[includeIf "…"]` section, whatever
  /// its condition (protecting one git would skip costs nothing).
  std::vector<std::string> include_paths;
};

/// The facts of one config file's text. Follows git-config(1)'s syntax:
/// section and key names ignore case, `#`/`;` start a comment outside
/// quotes, values may be quoted and use `\"` `\\` `\n` `\t` escapes and a
/// trailing `\` continues a line. Unreadable lines are skipped.
BASHEXEC_DECL git_config_facts parse_git_config(std::string_view text);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/confinement/detail/impl/git_config.ipp"
#endif

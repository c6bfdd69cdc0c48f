// detail/environment: the child environment of contract 7 — the host env
// minus credential-shaped names, plus fixed non-interactive settings, plus
// the request's own entries merged last.
//
// Plain C++20 on purpose: this header is on every translation unit's
// include path, and a range-v3 filter/transform pipeline here cost about a
// fifth of the umbrella header's compile work (measured by GCC's allocation
// in -ftime-report: 390 MB with it, 317 MB without) for a ten-line loop.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// True for names that look like they hold a credential (KEY, SECRET, TOKEN
/// anywhere, any case). Deliberately broad: a false positive costs a
/// variable, a false negative leaks a secret to a model-driven command.
BASHEXEC_DECL bool is_credential_name(std::string_view name);

/// Settings that keep tools from paging, colouring or prompting.
inline constexpr std::pair<std::string_view, std::string_view> non_interactive_env[] = {
    {"NO_COLOR", "1"}, {"TERM", "dumb"}, {"PAGER", "cat"}, {"GIT_PAGER", "cat"}};

/// "NAME=value" entries for a child: host env scrubbed, fixed settings,
/// then `overrides` (an explicit entry wins, even a credential-shaped name).
BASHEXEC_DECL std::vector<std::string> child_environment(const std::map<std::string, std::string>* overrides);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/impl/environment.ipp"
#endif

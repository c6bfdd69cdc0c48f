// detail/engine/environment: the child environment of contract 7 — the host env
// minus credential-shaped names (and passwords in URL values), plus fixed
// non-interactive settings, plus the request's own entries merged last.
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

#include "bashexec/config.hpp"
#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// True for names `scrub` drops: a fragment anywhere or a whole
/// `_`-separated word, ignoring case, unless the name is kept.
BASHEXEC_DECL bool is_credential_name(std::string_view name, const environment_scrub& scrub);

/// `value` with the password of every `scheme://user:password@` removed.
BASHEXEC_DECL std::string without_url_passwords(std::string_view value);

/// Settings that keep tools from paging, colouring or prompting.
inline constexpr std::pair<std::string_view, std::string_view> non_interactive_env[] = {
    {"NO_COLOR", "1"}, {"TERM", "dumb"}, {"PAGER", "cat"}, {"GIT_PAGER", "cat"}};

/// "NAME=value" entries for a child: host env scrubbed, fixed settings,
/// then `overrides` (an explicit entry wins verbatim, even a
/// credential-shaped name).
BASHEXEC_DECL std::vector<std::string> child_environment(const std::map<std::string, std::string>* overrides,
                                                         const environment_scrub& scrub);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/engine/impl/environment.ipp"
#endif

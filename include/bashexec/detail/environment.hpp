// detail/environment: the child environment of contract 7 — the host env
// minus credential-shaped names, plus fixed non-interactive settings, plus
// the request's own entries merged last.
//
// Plain C++20 on purpose: this header is on every translation unit's
// include path, and a range-v3 filter/transform pipeline here cost about a
// fifth of the umbrella header's compile work (measured by GCC's allocation
// in -ftime-report: 390 MB with it, 317 MB without) for a ten-line loop.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bashexec/detail/text_match.hpp"

extern char** environ;

namespace bashexec::detail {

/// True for names that look like they hold a credential (KEY, SECRET, TOKEN
/// anywhere, any case). Deliberately broad: a false positive costs a
/// variable, a false negative leaks a secret to a model-driven command.
inline bool is_credential_name(std::string_view name) {
  static constexpr std::string_view markers[] = {"KEY", "SECRET", "TOKEN"};
  return std::ranges::any_of(markers, [name](std::string_view m) { return icontains(name, m); });
}

/// Settings that keep tools from paging, colouring or prompting.
inline constexpr std::pair<std::string_view, std::string_view> non_interactive_env[] = {
    {"NO_COLOR", "1"}, {"TERM", "dumb"}, {"PAGER", "cat"}, {"GIT_PAGER", "cat"}};

/// "NAME=value" entries for a child: host env scrubbed, fixed settings,
/// then `overrides` (an explicit entry wins, even a credential-shaped name).
inline std::vector<std::string> child_environment(const std::map<std::string, std::string>* overrides) {
  auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  auto replaced = [&](std::string_view name) {
    return std::ranges::any_of(non_interactive_env, [name](const auto& kv) { return kv.first == name; }) ||
           (overrides && overrides->count(std::string(name)));
  };
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry = *e;
    const auto name = name_of(entry);
    if (!is_credential_name(name) && !replaced(name)) env.emplace_back(entry);
  }
  for (const auto& [name, value] : non_interactive_env)
    if (!(overrides && overrides->count(std::string(name))))
      env.push_back(std::string(name) + "=" + std::string(value));
  if (overrides)
    for (const auto& [name, value] : *overrides) env.push_back(name + "=" + value);
  return env;
}

}  // namespace bashexec::detail

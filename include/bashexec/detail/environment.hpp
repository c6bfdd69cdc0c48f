// detail/environment: the child environment of contract 7 — the host env
// minus credential-shaped names, plus fixed non-interactive settings, plus
// the request's own entries merged last.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <range/v3/algorithm/any_of.hpp>
#include <range/v3/range/conversion.hpp>
#include <range/v3/view/filter.hpp>
#include <range/v3/view/transform.hpp>

#include "bashexec/detail/text_match.hpp"

extern char** environ;

namespace bashexec::detail {

/// True for names that look like they hold a credential (KEY, SECRET, TOKEN
/// anywhere, any case). Deliberately broad: a false positive costs a
/// variable, a false negative leaks a secret to a model-driven command.
inline bool is_credential_name(std::string_view name) {
  static constexpr std::string_view markers[] = {"KEY", "SECRET", "TOKEN"};
  return ranges::any_of(markers, [name](std::string_view m) { return icontains(name, m); });
}

/// Settings that keep tools from paging, colouring or prompting.
inline constexpr std::pair<std::string_view, std::string_view> non_interactive_env[] = {
    {"NO_COLOR", "1"}, {"TERM", "dumb"}, {"PAGER", "cat"}, {"GIT_PAGER", "cat"}};

/// "NAME=value" entries for a child: host env scrubbed, fixed settings,
/// then `overrides` (an explicit entry wins, even a credential-shaped name).
inline std::vector<std::string> child_environment(const std::map<std::string, std::string>* overrides) {
  auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  auto replaced = [&](std::string_view name) {
    return ranges::any_of(non_interactive_env, [name](const auto& kv) { return kv.first == name; }) ||
           (overrides && overrides->count(std::string(name)));
  };
  std::vector<std::string_view> host;
  for (char** e = environ; e && *e; ++e) host.emplace_back(*e);
  auto env = host | ranges::views::filter([&](std::string_view entry) {
               auto name = name_of(entry);
               return !is_credential_name(name) && !replaced(name);
             }) |
             ranges::views::transform([](std::string_view entry) { return std::string(entry); }) |
             ranges::to<std::vector<std::string>>();
  for (const auto& [name, value] : non_interactive_env)
    if (!(overrides && overrides->count(std::string(name))))
      env.push_back(std::string(name) + "=" + std::string(value));
  if (overrides)
    for (const auto& [name, value] : *overrides) env.push_back(name + "=" + value);
  return env;
}

}  // namespace bashexec::detail

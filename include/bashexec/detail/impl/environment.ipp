// The bodies of detail/environment.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/environment.hpp"

#include <algorithm>

#include "bashexec/detail/text_match.hpp"

extern char** environ;

namespace bashexec::detail {

BASHEXEC_DECL bool is_credential_name(std::string_view name) {
  static constexpr std::string_view markers[] = {"KEY", "SECRET", "TOKEN"};
  return std::ranges::any_of(markers, [name](std::string_view m) { return icontains(name, m); });
}

BASHEXEC_DECL std::vector<std::string> child_environment(const std::map<std::string, std::string>* overrides) {
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

// The bodies of detail/engine/environment.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/environment.hpp"

#include <algorithm>

#include "bashexec/detail/text/text_match.hpp"

extern char** environ;

namespace bashexec::detail {

BASHEXEC_DECL bool is_credential_name(std::string_view name, const environment_scrub& scrub) {
  if (std::ranges::any_of(scrub.keep, [name](const std::string& kept) { return iequals(name, kept); })) return false;
  if (std::ranges::any_of(scrub.name_fragments, [name](const std::string& f) { return icontains(name, f); }))
    return true;
  for (std::string_view rest = name; !rest.empty();) {
    const auto end = std::min(rest.find('_'), rest.size());
    const std::string_view word = rest.substr(0, end);
    if (std::ranges::any_of(scrub.name_words, [word](const std::string& w) { return iequals(word, w); }))
      return true;
    rest.remove_prefix(std::min(end + 1, rest.size()));
  }
  return false;
}

BASHEXEC_DECL std::string without_url_passwords(std::string_view value) {
  std::string out;
  for (auto scheme = value.find("://"); scheme != std::string_view::npos; scheme = value.find("://")) {
    const std::size_t authority = scheme + 3;
    const std::size_t authority_end = std::min(value.find_first_of("/?# \t,;", authority), value.size());
    const std::size_t at = value.substr(0, authority_end).rfind('@');
    const std::size_t colon = at == std::string_view::npos || at < authority
                                  ? std::string_view::npos
                                  : value.substr(0, at).find(':', authority);
    if (colon != std::string_view::npos) {
      out.append(value.substr(0, colon));  // scheme://user
      value.remove_prefix(at);             // @host…
    } else {
      out.append(value.substr(0, authority));
      value.remove_prefix(authority);
    }
  }
  out.append(value);
  return out;
}

BASHEXEC_DECL std::vector<std::string> child_environment(const std::map<std::string, std::string>* overrides,
                                                         const environment_scrub& scrub) {
  auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  auto replaced = [&](std::string_view name) {
    return std::ranges::any_of(non_interactive_env, [name](const auto& kv) { return kv.first == name; }) ||
           (overrides && overrides->count(std::string(name)));
  };
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry = *e;
    const auto name = name_of(entry);
    if (is_credential_name(name, scrub) || replaced(name)) continue;
    if (scrub.strip_url_passwords && entry.find("://") != std::string_view::npos)
      env.push_back(without_url_passwords(entry));
    else
      env.emplace_back(entry);
  }
  for (const auto& [name, value] : non_interactive_env)
    if (!(overrides && overrides->count(std::string(name))))
      env.push_back(std::string(name) + "=" + std::string(value));
  if (overrides)
    for (const auto& [name, value] : *overrides) env.push_back(name + "=" + value);
  return env;
}

}  // namespace bashexec::detail

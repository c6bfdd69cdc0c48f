// The bodies of confinement/detail/git_config.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/confinement/detail/git_config.hpp"

#include <cctype>
#include <string>
#include <string_view>

#include "bashexec/detail/text/text_match.hpp"

namespace bashexec::detail {

namespace git_config_parsing {

inline bool blank(char c) noexcept { return c == ' ' || c == '\t' || c == '\r'; }

inline std::string_view trim(std::string_view text) noexcept {
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

/// The section a `[…]` header opens, lower-cased, without its quoted
/// subsection (`includeIf "gitdir:~/w/"` → "includeif").
inline std::string section_name(std::string_view header) {
  std::string name;
  for (char c : header) {
    if (c == ']' || c == '"' || blank(c)) break;
    name.push_back(ascii_lower(c));
  }
  return name;
}

/// A value as git reads it: quotes removed, escapes applied, an unquoted
/// `#`/`;` ends it, outer blanks dropped. `continued` is set when it ends
/// in a lone `\` (the next line continues it).
inline std::string unquote(std::string_view raw, bool& continued) {
  std::string value;
  bool quoted = false;
  std::size_t kept = 0;  // length of `value` up to its last non-blank or quoted character
  continued = false;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '"') {
      quoted = !quoted;
      kept = value.size();
      continue;
    }
    if (!quoted && (c == '#' || c == ';')) break;
    if (c == '\\') {
      if (i + 1 == raw.size()) {
        continued = true;
        break;
      }
      const char next = raw[++i];
      value.push_back(next == 'n' ? '\n' : next == 't' ? '\t' : next == 'b' ? '\b' : next);
      kept = value.size();
      continue;
    }
    if (!quoted && blank(c) && value.empty()) continue;
    value.push_back(c);
    if (quoted || !blank(c)) kept = value.size();
  }
  value.resize(kept);
  return value;
}

}  // namespace git_config_parsing

BASHEXEC_DECL git_config_facts parse_git_config(std::string_view text) {
  using namespace git_config_parsing;
  git_config_facts facts;
  std::string section;
  std::string pending_key;  // a value continued on the next line belongs to it
  std::string pending_value;
  auto record = [&](std::string_view key, const std::string& value) {
    if (section == "core" && iequals(key, "hookspath")) facts.hooks_paths.push_back(value);
    if ((section == "include" || section == "includeif") && iequals(key, "path")) facts.include_paths.push_back(value);
  };
  while (!text.empty()) {
    const auto end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    bool continued = false;
    if (!pending_key.empty()) {
      pending_value += unquote(line, continued);
      if (!continued) {
        record(pending_key, pending_value);
        pending_key.clear();
      }
      continue;
    }
    line = trim(line);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      section = section_name(line.substr(1));
      const auto close = line.find(']');
      if (close == std::string_view::npos) continue;
      line = trim(line.substr(close + 1));  // `[core] hooksPath = x` on one line is legal
      if (line.empty()) continue;
    }
    const auto equals = line.find('=');
    const std::string_view key = trim(line.substr(0, equals));
    if (equals == std::string_view::npos) continue;  // a bare boolean key: no path
    std::string value = unquote(line.substr(equals + 1), continued);
    if (continued) {
      pending_key = std::string(key);
      pending_value = std::move(value);
      continue;
    }
    record(key, value);
  }
  if (!pending_key.empty()) record(pending_key, pending_value);
  return facts;
}

}  // namespace bashexec::detail

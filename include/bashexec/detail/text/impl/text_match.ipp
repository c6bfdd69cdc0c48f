// The bodies of detail/text/text_match.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/text/text_match.hpp"

namespace bashexec::detail {

BASHEXEC_DECL std::string first_line(std::string_view text) {
  while (!text.empty()) {
    auto end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") != std::string_view::npos) return std::string(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return {};
}

BASHEXEC_DECL std::string line_containing(std::string_view text, std::string_view needle) {
  while (!text.empty()) {
    auto end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (icontains(line, needle)) return std::string(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return {};
}

}  // namespace bashexec::detail

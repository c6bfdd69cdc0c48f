// detail/text/text_match: the case-insensitive matching that classifies a
// confined run's stderr (denial dialects, runner-failure signatures, contract
// 16), and the small text helpers around it.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

constexpr char ascii_lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

/// Whether `needle` occurs in `haystack`, ignoring ASCII case. Error texts
/// from the kernel and from runners are ASCII; locale rules would only add
/// surprises.
constexpr bool icontains(std::string_view haystack, std::string_view needle) noexcept {
  if (needle.empty()) return true;
  auto it = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(),
                        [](char a, char b) { return ascii_lower(a) == ascii_lower(b); });
  return it != haystack.end();
}

/// Whether `a` and `b` are equal, ignoring ASCII case.
constexpr bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return ascii_lower(x) == ascii_lower(y); });
}

/// Whether any of `needles` occurs in `haystack`, ignoring ASCII case.
template <class Range>
constexpr bool icontains_any(std::string_view haystack, const Range& needles) noexcept {
  for (std::string_view needle : needles)
    if (icontains(haystack, needle)) return true;
  return false;
}

/// The first non-blank line of `text`, without its line ending.
BASHEXEC_DECL std::string first_line(std::string_view text);

/// The first line of `text` holding `needle` (ignoring ASCII case), without
/// its line ending; empty when none does.
BASHEXEC_DECL std::string line_containing(std::string_view text, std::string_view needle);

/// Runner-failure signatures (contract 16): a failure when any non-empty
/// signature occurs anywhere in the runner's combined output — stderr or
/// stdout — ignoring ASCII case. The reason is the runner's first stderr
/// line; with a silent stderr, the stdout line that matched.
template <class Range>
std::optional<std::string> match_runner_signature(std::string_view err, std::string_view out,
                                                  const Range& signatures) {
  for (std::string_view signature : signatures) {
    // A blank signature is refused by validate(); never let one match everything.
    if (signature.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos) continue;
    if (!icontains(err, signature) && !icontains(out, signature)) continue;
    if (std::string line = first_line(err); !line.empty()) return line;
    if (std::string line = line_containing(out, signature); !line.empty()) return line;
    return std::string(signature);
  }
  return std::nullopt;
}

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/text/impl/text_match.ipp"
#endif

// The bodies of detail/text/text_formatter.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/text/text_formatter.hpp"

#include <algorithm>
#include <string>

namespace bashexec::detail {

BASHEXEC_DECL fmt::format_context::iterator text_formatter::format_text(std::string_view text,
                                                                        fmt::format_context& ctx) const {
  if (spec.empty()) return std::copy(text.begin(), text.end(), ctx.out());
  std::string pattern = "{:";
  pattern.append(spec).push_back('}');
  // fmt::vformat, not vformat_to: the latter's symbol in libfmt is
  // mangled differently by clang (the fuzz build) than by g++.
  const std::string formatted = fmt::vformat(pattern, fmt::make_format_args(text));
  return std::copy(formatted.begin(), formatted.end(), ctx.out());
}

}  // namespace bashexec::detail

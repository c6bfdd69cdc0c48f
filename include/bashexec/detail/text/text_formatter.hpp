// detail/text/text_formatter: the base of bashexec's {fmt} formatters (the ids and
// the vocabulary enums). It formats a value as its text and honours a string
// spec (`{:>12}`, `{:.3}`) while needing only <fmt/core.h>: in fmt 9,
// formatter<string_view>::format is defined in <fmt/format.h>, whose parse
// alone is a sixth of the umbrella header's compile time. A spec, which no
// caller in the tree uses, is replayed through fmt's compiled vformat.
#pragma once

#include <cstddef>
#include <string_view>

#include <fmt/core.h>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

struct text_formatter {
  /// What stood between ':' and '}' in the replacement field.
  std::string_view spec;

  constexpr auto parse(fmt::format_parse_context& ctx) -> decltype(ctx.begin()) {
    auto it = ctx.begin();
    while (it != ctx.end() && *it != '}') {
      if (*it == '{') ctx.on_error("bashexec formatters take no nested replacement field");
      ++it;
    }
    spec = std::string_view(ctx.begin(), static_cast<std::size_t>(it - ctx.begin()));
    return it;
  }

  /// Writes `text` as the spec asks (verbatim without one).
  fmt::format_context::iterator format_text(std::string_view text, fmt::format_context& ctx) const;
};

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/text/impl/text_formatter.ipp"
#endif

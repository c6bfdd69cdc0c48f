// tools/utf8: turn whatever bytes a command printed into valid UTF-8 before
// the text reaches a model (a JSON encoder throws on invalid UTF-8). A tail
// that starts inside a multi-byte sequence is trimmed to the next character
// boundary; every other invalid byte sequence becomes U+FFFD. The scanner is
// detail/text/utf8_boundary.hpp's, which the engine's incremental reads share.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "bashexec/detail/text/utf8_boundary.hpp"

namespace bashexec {

/// True when `text` is entirely valid UTF-8.
constexpr bool is_valid_utf8(std::string_view text) noexcept {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t invalid = 0;
    const std::size_t n = detail::utf8_char_length(text, at, &invalid);
    if (n == 0) return false;
    at += n;
  }
  return true;
}

/// `text` as valid UTF-8. With `starts_mid_stream` (the text is a tail or a
/// delta cut out of a longer stream) up to three leading continuation bytes
/// are dropped instead of replaced: they are the end of a character whose
/// start is not part of the text.
inline std::string to_valid_utf8(std::string_view text, bool starts_mid_stream = false) {
  std::size_t at = 0;
  if (starts_mid_stream)
    while (at < text.size() && at < 3 && detail::is_utf8_continuation(static_cast<unsigned char>(text[at]))) ++at;
  std::string out;
  out.reserve(text.size() - at);
  while (at < text.size()) {
    std::size_t invalid = 0;
    const std::size_t n = detail::utf8_char_length(text, at, &invalid);
    if (n != 0) {
      out.append(text.substr(at, n));
      at += n;
    } else {
      out.append(detail::utf8_replacement);
      at += invalid;
    }
  }
  return out;
}

}  // namespace bashexec

// tools/utf8: turn whatever bytes a command printed into valid UTF-8 before
// the text reaches a model (a JSON encoder throws on invalid UTF-8). A tail
// that starts inside a multi-byte sequence is trimmed to the next character
// boundary; every other invalid byte sequence becomes U+FFFD.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace bashexec {

namespace detail {

inline constexpr std::string_view utf8_replacement = "\xEF\xBF\xBD";

constexpr bool is_utf8_continuation(unsigned char byte) noexcept { return (byte & 0xC0) == 0x80; }

/// Length of the valid UTF-8 character starting at `text[at]`, or 0 when the
/// bytes there are not one (overlong forms, surrogates, > U+10FFFF and
/// truncated sequences included). When 0, `*invalid` receives the length of
/// the maximal invalid subpart (at least 1), the unit one U+FFFD replaces
/// (the Unicode "substitution of maximal subparts" practice).
constexpr std::size_t utf8_char_length(std::string_view text, std::size_t at, std::size_t* invalid) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return 1;
  std::size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range allowed for the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) lo = 0xA0;  // overlong
    if (lead == 0xED) hi = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) lo = 0x90;  // overlong
    if (lead == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    *invalid = 1;
    return 0;
  }
  std::size_t i = 1;
  for (; i <= need; ++i) {
    if (at + i >= text.size()) break;
    const unsigned char b = byte(at + i);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : is_utf8_continuation(b);
    if (!ok) break;
  }
  if (i > need) return need + 1;
  *invalid = i;
  return 0;
}

}  // namespace detail

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

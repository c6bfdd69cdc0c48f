// detail/text/utf8_boundary: the one UTF-8 scanner — where characters begin and
// end in a byte string. It serves both the engine (an incremental read of a
// running task holds back a character whose last bytes have not arrived, so
// no read splits one) and the tool layer (tools/utf8.hpp repairs whatever a
// command printed before the text reaches a model).
#pragma once

#include <cstddef>
#include <string_view>

namespace bashexec::detail {

inline constexpr std::string_view utf8_replacement = "\xEF\xBF\xBD";

constexpr bool is_utf8_continuation(unsigned char byte) noexcept { return (byte & 0xC0) == 0x80; }

/// What the bytes at one position of a text are.
struct utf8_unit {
  enum class kind {
    /// A valid character of `length` bytes.
    character,
    /// Not a character: `length` is the maximal invalid subpart (at least
    /// 1), the unit one U+FFFD replaces (the Unicode "substitution of
    /// maximal subparts" practice).
    invalid,
    /// The first `length` bytes of a valid character cut off by the end of
    /// the text: its other bytes may still arrive.
    truncated,
  };
  kind what;
  std::size_t length;
};

/// The unit starting at `text[at]` (`at < text.size()`): a character, an
/// invalid sequence (overlong forms, surrogates, > U+10FFFF included), or a
/// character's start truncated by the end of `text`.
constexpr utf8_unit utf8_unit_at(std::string_view text, std::size_t at) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return {utf8_unit::kind::character, 1};
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
    return {utf8_unit::kind::invalid, 1};
  }
  std::size_t i = 1;
  for (; i <= need; ++i) {
    if (at + i >= text.size()) return {utf8_unit::kind::truncated, i};
    const unsigned char b = byte(at + i);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : is_utf8_continuation(b);
    if (!ok) return {utf8_unit::kind::invalid, i};
  }
  return {utf8_unit::kind::character, need + 1};
}

/// Length of the valid UTF-8 character starting at `text[at]`, or 0 when the
/// bytes there are not one (a truncated one included). When 0, `*invalid`
/// receives the length of the unit one U+FFFD replaces.
constexpr std::size_t utf8_char_length(std::string_view text, std::size_t at, std::size_t* invalid) noexcept {
  const utf8_unit unit = utf8_unit_at(text, at);
  if (unit.what == utf8_unit::kind::character) return unit.length;
  *invalid = unit.length;
  return 0;
}

/// How many trailing bytes of `bytes` are the start of a character whose
/// other bytes have not arrived yet (0 to 3). Invalid bytes are never held:
/// they are passed on, and repaired where the text reaches a model.
constexpr std::size_t incomplete_utf8_suffix(std::string_view bytes) noexcept {
  // A character is at most 4 bytes: look back at most 3 for its lead byte.
  const std::size_t size = bytes.size();
  for (std::size_t back = 1; back <= 3 && back <= size; ++back) {
    if (is_utf8_continuation(static_cast<unsigned char>(bytes[size - back]))) continue;
    const utf8_unit unit = utf8_unit_at(bytes, size - back);
    return unit.what == utf8_unit::kind::truncated ? back : 0;
  }
  return 0;
}

}  // namespace bashexec::detail

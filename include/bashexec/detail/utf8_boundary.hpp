// detail/utf8_boundary: how many trailing bytes of a chunk are the start of
// a UTF-8 character whose remaining bytes have not arrived yet. Incremental
// reads of a running task hold those back, so no read splits a character.
#pragma once

#include <cstddef>
#include <string_view>

namespace bashexec::detail {

inline std::size_t incomplete_utf8_suffix(std::string_view bytes) noexcept {
  // A character is at most 4 bytes: look back at most 3 for its lead byte.
  const std::size_t size = bytes.size();
  for (std::size_t back = 1; back <= 3 && back <= size; ++back) {
    const auto byte = static_cast<unsigned char>(bytes[size - back]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: keep looking
    std::size_t needed = 1;
    if ((byte & 0xE0) == 0xC0)
      needed = 2;
    else if ((byte & 0xF0) == 0xE0)
      needed = 3;
    else if ((byte & 0xF8) == 0xF0)
      needed = 4;
    return needed > back ? back : 0;  // ASCII, a complete character, or invalid: nothing held
  }
  return 0;
}

}  // namespace bashexec::detail

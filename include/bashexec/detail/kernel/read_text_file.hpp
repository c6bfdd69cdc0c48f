// detail/kernel/read_text_file: the whole of a small kernel or config file
// (/proc, /sys/fs/cgroup) as a string, with plain read(2). <fstream> would
// do the same for a sixth of the umbrella header's compile cost.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// The file's bytes; empty when it cannot be opened or read.
BASHEXEC_DECL std::optional<std::string> read_text_file(const char* path);

/// Calls `each(line)` for every line of `text` (without its newline) until
/// it returns true; returns whether one did.
template <class F>
bool any_line(std::string_view text, F each) {
  while (!text.empty()) {
    const auto end = text.find('\n');
    if (each(text.substr(0, end))) return true;
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return false;
}

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/read_text_file.ipp"
#endif

// detail/read_text_file: the whole of a small kernel or config file
// (/proc, /sys/fs/cgroup) as a string, with plain read(2). <fstream> would
// do the same for a sixth of the umbrella header's compile cost.
#pragma once

#include <cerrno>
#include <optional>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <unistd.h>

#include "bashexec/detail/unique_fd.hpp"

namespace bashexec::detail {

/// The file's bytes; empty when it cannot be opened or read.
inline std::optional<std::string> read_text_file(const char* path) {
  unique_fd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string content;
  char buffer[4096];
  for (;;) {
    const auto n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    if (n == 0) return content;
    content.append(buffer, static_cast<std::size_t>(n));
  }
}

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

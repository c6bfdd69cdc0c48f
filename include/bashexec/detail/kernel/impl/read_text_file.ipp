// The bodies of detail/kernel/read_text_file.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/read_text_file.hpp"

#include <cerrno>

#include <fcntl.h>
#include <unistd.h>

#include "bashexec/detail/kernel/unique_fd.hpp"

namespace bashexec::detail {

BASHEXEC_DECL std::optional<std::string> read_text_file(const char* path) {
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

}  // namespace bashexec::detail

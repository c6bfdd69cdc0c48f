// The bodies of detail/kernel/status_pipe.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/status_pipe.hpp"

#include <cerrno>
#include <cstddef>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace bashexec::detail {

BASHEXEC_DECL std::string drain_nonblocking(int fd) {
  std::string text;
  char buffer[512];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      text.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // EOF, EAGAIN or an error: nothing more will come now
  }
  return text;
}

BASHEXEC_DECL pipe_pair make_status_pipe() {
  pipe_pair pipe = make_pipe();
  int flags = ::fcntl(pipe.read.get(), F_GETFL);
  if (flags < 0 || ::fcntl(pipe.read.get(), F_SETFL, flags | O_NONBLOCK) != 0) throw_syscall("fcntl O_NONBLOCK");
  return pipe;
}

}  // namespace bashexec::detail

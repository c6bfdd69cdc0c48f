// detail/status_pipe: the side channel a runner reports through (bwrap's
// --json-status-fd, runner_command's "not found" marker) — a close-on-exec
// pipe read without blocking once the run has settled, since a runner that
// died early may never have written (or closed) its end.
#pragma once

#include <cerrno>
#include <cstddef>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "bashexec/detail/unique_fd.hpp"

namespace bashexec::detail {

/// Everything currently readable from a non-blocking descriptor.
inline std::string drain_nonblocking(int fd) {
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

/// A close-on-exec pipe whose read end never blocks.
inline pipe_pair make_status_pipe() {
  pipe_pair pipe = make_pipe();
  int flags = ::fcntl(pipe.read.get(), F_GETFL);
  if (flags < 0 || ::fcntl(pipe.read.get(), F_SETFL, flags | O_NONBLOCK) != 0) throw_syscall("fcntl O_NONBLOCK");
  return pipe;
}

}  // namespace bashexec::detail

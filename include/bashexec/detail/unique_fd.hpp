// detail/unique_fd: RAII ownership of one file descriptor, plus the checked
// system-call helpers every other detail header uses.
#pragma once

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/errors.hpp"

namespace bashexec::detail {

/// "call: strerror(errno)" — the shape of every system-call error message.
inline std::string syscall_message(std::string_view call, int error = errno) {
  return fmt::format("{}: {}", call, std::strerror(error));
}

[[noreturn]] inline void throw_syscall(std::string_view call, int error = errno) {
  throw infrastructure_error(syscall_message(call, error));
}

/// Owns one descriptor; closes it exactly once.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept { return std::exchange(fd_, -1); }

  /// Closes the held descriptor (if any) and takes `fd`. Returns close()'s
  /// result so callers that care (spill files) can see a failed close.
  int reset(int fd = -1) noexcept {
    int rc = 0;
    if (fd_ >= 0) rc = ::close(fd_);
    fd_ = fd;
    return rc;
  }

 private:
  int fd_ = -1;
};

/// Both ends of a pipe, close-on-exec.
struct pipe_pair {
  unique_fd read;
  unique_fd write;
};

inline pipe_pair make_pipe(int extra_flags = 0) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | extra_flags) != 0) throw_syscall("pipe2");
  return {unique_fd(fds[0]), unique_fd(fds[1])};
}

}  // namespace bashexec::detail

// detail/unique_fd: RAII ownership of one file descriptor, plus the checked
// system-call helpers every other detail header uses.
#pragma once

#include <cerrno>
#include <string>
#include <string_view>
#include <utility>

#include <unistd.h>

#include "bashexec/detail/linkage.hpp"
#include "bashexec/errors.hpp"

namespace bashexec::detail {

/// "call: strerror(errno)" — the shape of every system-call error message.
BASHEXEC_DECL std::string syscall_message(std::string_view call, int error = errno);

[[noreturn]] BASHEXEC_DECL void throw_syscall(std::string_view call, int error = errno);

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

BASHEXEC_DECL pipe_pair make_pipe(int extra_flags = 0);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/impl/unique_fd.ipp"
#endif

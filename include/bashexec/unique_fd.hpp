// unique_fd: ownership of one file descriptor, closed exactly once. Public
// vocabulary: a spawn policy hands the engine a pidfd in one
// (process_handle), a confinement its runner's status channel
// (confined_launch::status), an output policy gets its spill files in one
// (spill_directory::create_file).
#pragma once

#include <utility>

#include <unistd.h>

namespace bashexec {

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

}  // namespace bashexec

// detail/spill_file: one full-stream spill file, opened on a stream's first
// overflow. A failed write or close withholds the path (contract 5).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>

#include <unistd.h>

#include "bashexec/detail/spill_directory.hpp"

namespace bashexec::detail {

class spill_file {
 public:
  bool is_open() const noexcept { return static_cast<bool>(fd_); }

  /// Opens the file, named by `stream` ("stdout", "stderr"); on failure the
  /// stream simply has no spill path.
  void open(spill_directory& directory, std::string_view stream) {
    try {
      auto [fd, path] = directory.create_file(stream);
      fd_ = std::move(fd);
      path_ = std::move(path);
      directory_ = &directory;
    } catch (const infrastructure_error&) {
      failed_ = true;
    }
  }

  void write(const char* data, std::size_t size) {
    if (!fd_) return;
    if (!directory_->charge(size)) return give_up();  // over the budget
    while (size > 0) {
      ssize_t n = ::write(fd_.get(), data, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        directory_->release(size);
        return give_up();  // disk full or similar: the file would be incomplete
      }
      data += n;
      size -= static_cast<std::size_t>(n);
      bytes_ += static_cast<std::uint64_t>(n);
    }
  }

  /// An incomplete spill file is worth nothing: remove it, free its share of
  /// the budget, withhold the path.
  void give_up() {
    failed_ = true;
    fd_.reset();
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
    directory_->release(bytes_);
    bytes_ = 0;
  }

  /// Closes the file; a failed close or earlier failed write withholds the
  /// path, since the file may not hold the whole stream.
  void close() {
    if (fd_ && fd_.reset() != 0) failed_ = true;
    if (directory_ && !closed_ && !path_.empty() && !failed_) directory_->settled(path_, bytes_);
    closed_ = true;
  }

  std::optional<std::filesystem::path> path() const {
    if (failed_ || path_.empty()) return std::nullopt;
    return path_;
  }

 private:
  unique_fd fd_;
  std::filesystem::path path_;
  spill_directory* directory_ = nullptr;
  std::uint64_t bytes_ = 0;
  bool failed_ = false;
  bool closed_ = false;
};

}  // namespace bashexec::detail

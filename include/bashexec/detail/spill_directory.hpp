// detail/spill_directory: the executor's private directory of spill files —
// created lazily (mode 0700, unpredictable name), files created with
// O_EXCL|O_NOFOLLOW mode 0600, total size bounded, removed at disposal.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include "bashexec/detail/unique_fd.hpp"

namespace bashexec::detail {

/// Sixteen random bytes as hex: names nobody can predict.
inline std::string random_name(std::string_view prefix) {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_syscall("getrandom");
    }
    got += static_cast<std::size_t>(n);
  }
  std::string name(prefix);
  for (unsigned char b : bytes) name += fmt::format("{:02x}", b);
  return name;
}

/// Owns the private spill directory and enforces the retention rule: spill
/// files never hold more than `budget` bytes in total; to make room the
/// oldest settled files are removed first, and a stream that still does not
/// fit gives up its file (its path is then withheld). Files still being
/// written are never removed by another stream.
class spill_directory {
 public:
  spill_directory(std::filesystem::path parent, std::uint64_t budget, bool keep)
      : parent_(std::move(parent)), budget_(budget), keep_(keep) {}
  spill_directory(const spill_directory&) = delete;
  spill_directory& operator=(const spill_directory&) = delete;

  ~spill_directory() {
    if (!keep_ && !path_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(path_, ignored);
    }
  }

  /// Creates a new spill file (O_EXCL|O_NOFOLLOW, 0600) named
  /// `spill-<32 random hex>-<stream>` and returns its fd and path. The
  /// stream suffix tells the files apart without a label next to the path
  /// (contract 20's lossy line lists bare paths). Throws infrastructure_error
  /// when it cannot.
  std::pair<unique_fd, std::filesystem::path> create_file(std::string_view stream) {
    std::lock_guard lock(mutex_);
    ensure_directory();
    for (int attempt = 0; attempt < 8; ++attempt) {
      auto path = path_ / fmt::format("{}-{}", random_name("spill-"), stream);
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd >= 0) {
        ::fchmod(fd, 0600);  // exact mode whatever the umask
        return {unique_fd(fd), std::move(path)};
      }
      if (errno != EEXIST) throw_syscall(fmt::format("open spill file {}", path.string()));
    }
    throw infrastructure_error("spill file: could not create a unique name");
  }

  /// Charges `bytes` about to be written to a spill file against the budget.
  /// Past it, the oldest settled spill files are removed first; when that is
  /// not enough the charge is refused (the writer then gives up its file, so
  /// the budget bounds the disk whatever one stream prints).
  bool charge(std::uint64_t bytes) {
    std::lock_guard lock(mutex_);
    total_ += bytes;
    while (total_ > budget_ && !settled_.empty()) {
      std::error_code ignored;
      std::filesystem::remove(settled_.front().path, ignored);
      total_ -= settled_.front().bytes;
      settled_.pop_front();
    }
    if (total_ <= budget_) return true;
    total_ -= bytes;
    return false;
  }

  /// A spill file that was given up (removed by its writer): its bytes no
  /// longer count.
  void release(std::uint64_t bytes) {
    std::lock_guard lock(mutex_);
    total_ -= std::min(total_, bytes);
  }

  /// A spill file is complete: from now on it may be removed to make room.
  void settled(const std::filesystem::path& file, std::uint64_t bytes) {
    std::lock_guard lock(mutex_);
    settled_.push_back({file, bytes});
  }

  /// The directory, or empty when no spill file was ever needed.
  std::filesystem::path path() const {
    std::lock_guard lock(mutex_);
    return path_;
  }

 private:
  struct entry {
    std::filesystem::path path;
    std::uint64_t bytes;
  };

  void ensure_directory() {
    if (!path_.empty()) return;
    auto base = parent_;
    if (base.empty()) {
      const char* tmpdir = std::getenv("TMPDIR");
      base = (tmpdir && *tmpdir) ? tmpdir : "/tmp";
    }
    std::string templ = (base / "bashexec-XXXXXXXXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw_syscall(fmt::format("mkdtemp {}", templ));
    path_ = templ;  // mkdtemp creates it 0700
  }

  std::filesystem::path parent_;
  std::uint64_t budget_;
  bool keep_;
  mutable std::mutex mutex_;
  std::filesystem::path path_;
  std::deque<entry> settled_;
  std::uint64_t total_ = 0;
};

}  // namespace bashexec::detail

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
#include <vector>
#include <system_error>

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>

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

/// Where spill directories may go by default, best first: outside every root
/// a confined command may write (never /tmp, which workspace-write grants),
/// and readable at the same path by later commands. A per-user 0700
/// `bashexec` directory under $XDG_RUNTIME_DIR when that is a private
/// directory of ours, then /var/tmp, then /dev/shm (which bwrap replaces
/// with a fresh /dev: its spill directory is bound back read-only).
inline std::vector<std::filesystem::path> default_spill_parents() {
  std::vector<std::filesystem::path> candidates;
  auto private_dir = [](const char* path) {
    struct stat info {};
    return ::lstat(path, &info) == 0 && S_ISDIR(info.st_mode) && info.st_uid == ::geteuid() &&
           (info.st_mode & 077) == 0;
  };
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime && runtime[0] == '/' && private_dir(runtime)) {
    std::filesystem::path dir = std::filesystem::path(runtime) / "bashexec";
    ::mkdir(dir.c_str(), 0700);  // EEXIST is fine; what is there is checked next
    if (private_dir(dir.c_str())) candidates.push_back(std::move(dir));
  }
  candidates.emplace_back("/var/tmp");
  candidates.emplace_back("/dev/shm");
  return candidates;
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

  /// The retention policy forgot the task that owned `file` (a settled
  /// spill file, or one the budget removed already): remove it and free its
  /// share of the budget.
  void forget(const std::filesystem::path& file) {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(settled_.begin(), settled_.end(), [&](const entry& e) { return e.path == file; });
    if (it == settled_.end()) return;  // removed earlier to make room
    std::error_code ignored;
    std::filesystem::remove(it->path, ignored);
    total_ -= std::min(total_, it->bytes);
    settled_.erase(it);
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
    auto base = parent_.empty() ? default_spill_parents().front() : parent_;
    // mkdtemp randomises exactly the trailing six X's (more would stay
    // literal X's), so the unpredictable part is our own getrandom name and
    // mkdtemp only adds its suffix and the atomic, exclusive 0700 mkdir.
    std::string templ = (base / random_name("bashexec-").substr(0, 21)).string() + "-XXXXXX";
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

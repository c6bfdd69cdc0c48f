// spill_directory: the executor's private directory of spill files —
// created lazily (mode 0700, unpredictable name stamped with its owner
// process), files created with O_EXCL|O_NOFOLLOW mode 0600 relative to the
// directory's descriptor, total size bounded, removed at disposal. Public
// vocabulary: an output policy's collector is constructed with the
// executor's spill_directory (output.hpp) and creates its spill files here.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bashexec/detail/kernel/shared_temp.hpp"
#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/unique_fd.hpp"

namespace bashexec {

namespace detail {

/// Where spill directories may go by default, best first: outside every root
/// a confined command may write (never /tmp, which workspace-write grants),
/// and readable at the same path by later commands. A per-user 0700
/// `bashexec` directory under $XDG_RUNTIME_DIR when that is a private
/// directory of ours, then /var/tmp, then /dev/shm (which bwrap replaces
/// with a fresh /dev: its spill directory is bound back read-only).
BASHEXEC_DECL std::vector<std::filesystem::path> default_spill_parents();

/// Name prefixes of spill directories: removed at disposal (swept once
/// their owner is gone), or kept (`keep_spill_dir`, never swept here).
inline constexpr std::string_view spill_dir_prefix = "bashexec-spill-";
inline constexpr std::string_view kept_spill_dir_prefix = "bashexec-kept-";

}  // namespace detail

/// Owns the private spill directory and enforces the retention rule: spill
/// files never hold more than `budget` bytes in total; to make room the
/// oldest settled files are removed first, and a stream that still does not
/// fit gives up its file (its path is then withheld). Files still being
/// written are never removed by another stream.
/// The parent must belong to this user or root and, when others may write
/// it, be sticky; the directory is made there with mkdirat and used only
/// through its descriptor, so nobody can redirect a spill file by swapping
/// a path. Making it first sweeps the parent of spill directories of this
/// user whose owner process is gone (a SIGKILLed executor's).
class spill_directory {
 public:
  spill_directory(std::filesystem::path parent, std::uint64_t budget, bool keep)
      : parent_(std::move(parent)), budget_(budget), keep_(keep) {}
  spill_directory(const spill_directory&) = delete;
  spill_directory& operator=(const spill_directory&) = delete;

  ~spill_directory();

  /// Creates a new spill file (O_EXCL|O_NOFOLLOW, 0600) named
  /// `spill-<32 random hex>-<stream>` and returns its fd and path. The
  /// stream suffix tells the files apart without a label next to the path
  /// (contract 20's lossy line lists bare paths). Throws infrastructure_error
  /// when it cannot.
  std::pair<unique_fd, std::filesystem::path> create_file(std::string_view stream);

  /// Charges `bytes` about to be written to a spill file against the budget.
  /// Past it, the oldest settled spill files are removed first; when that is
  /// not enough the charge is refused (the writer then gives up its file, so
  /// the budget bounds the disk whatever one stream prints).
  bool charge(std::uint64_t bytes);

  /// A spill file that was given up (removed by its writer): its bytes no
  /// longer count.
  void release(std::uint64_t bytes);

  /// Removes one of this directory's files (a writer giving it up).
  void remove_file(const std::filesystem::path& file) noexcept;

  /// A spill file is complete: from now on it may be removed to make room.
  void settled(const std::filesystem::path& file, std::uint64_t bytes);

  /// The retention policy forgot the task that owned `file` (a settled
  /// spill file, or one the budget removed already): remove it and free its
  /// share of the budget.
  void forget(const std::filesystem::path& file);

  /// The directory, or empty when no spill file was ever needed.
  std::filesystem::path path() const;

  /// The directory, made now if it does not exist yet (a spawn that must
  /// bind it read-only); throws infrastructure_error when it cannot be.
  std::filesystem::path ensure();

  /// Where the directory goes: the configured parent, else the first
  /// default one.
  std::filesystem::path parent() const;

 private:
  struct entry {
    std::filesystem::path path;
    std::uint64_t bytes;
  };

  void ensure_directory();

  std::filesystem::path parent_;
  std::uint64_t budget_;
  bool keep_;
  mutable std::mutex mutex_;
  std::filesystem::path path_;
  unique_fd parent_fd_;
  unique_fd dir_fd_;
  std::deque<entry> settled_;
  std::uint64_t total_ = 0;
};

namespace detail {
using bashexec::spill_directory;  // its name before it became public vocabulary
}  // namespace detail

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/impl/spill_directory.ipp"
#endif

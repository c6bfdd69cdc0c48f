// detail/kernel/shared_temp: directories bashexec creates or reuses in shared temp
// space (/var/tmp, /dev/shm): per user, reached without following links,
// checked for owner and mode before use, and removed only through
// descriptors — never through a path another user could swap. Entries are
// stamped with their owner process, so a later run can sweep what a killed
// one left behind.
#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// Sixteen random bytes as hex after `prefix`: names nobody can predict.
BASHEXEC_DECL std::string random_name(std::string_view prefix);

/// Opens the directory `path` for fd-relative work (following links: a
/// configured path is its operator's choice). Empty, errno set, on failure.
BASHEXEC_DECL unique_fd open_directory(const std::filesystem::path& path) noexcept;

/// Why the open directory `fd` is no place for this user's entries, or
/// empty: it must belong to this user or root, and a directory others may
/// write must be sticky (else they could rename our entries away).
BASHEXEC_DECL std::string shared_parent_problem(int fd);

/// Whether the open directory `fd` is this user's alone (owner, no group or
/// other bits): no per-user name is needed inside it.
BASHEXEC_DECL bool private_to_user(int fd) noexcept;

/// The directory `name` in `parent_fd`, created if missing, for this user
/// alone: mkdirat 0700, then openat O_NOFOLLOW|O_DIRECTORY and fstat — ours,
/// no group or other bits. A link, a file or a directory of someone else at
/// that name is refused: empty, and `why` says what was found.
BASHEXEC_DECL unique_fd open_private_directory(int parent_fd, const std::string& name, std::string& why);

/// Creates a new private directory `<prefix><owner stamp>-<random>` in
/// `parent_fd` (mkdirat 0700, never an existing one) and opens it as
/// above; returns its name. Throws infrastructure_error when it cannot.
BASHEXEC_DECL std::pair<unique_fd, std::string> make_stamped_directory(int parent_fd, std::string_view prefix);

/// Removes `name` from `dirfd` and, for a directory, everything beneath it,
/// never following a link; best effort.
BASHEXEC_DECL void remove_tree_at(int dirfd, const std::string& name) noexcept;

/// The bytes (st_size) of the files at and beneath `name`, links not followed.
BASHEXEC_DECL std::uint64_t tree_bytes_at(int dirfd, const std::string& name) noexcept;

/// This process as a name part, `<pid namespace>.<pid>.<start time>`:
/// enough to tell later whether it still runs.
BASHEXEC_DECL std::string owner_stamp();

/// Whether the process `stamp` names is gone: its pid is free or belongs to
/// a process started at another time. A stamp of another pid namespace, or
/// one that cannot be read, is never judged gone.
BASHEXEC_DECL bool owner_gone(std::string_view stamp);

/// A directory `<prefix><stamp>-…` in a shared directory, owned by this user.
struct stamped_entry {
  std::string name;
  std::string stamp;
  std::timespec modified{};
};

/// This user's directories in `dirfd` named `<prefix><stamp>-…`.
BASHEXEC_DECL std::vector<stamped_entry> stamped_entries(int dirfd, std::string_view prefix);

/// Removes this user's `<prefix><stamp>-…` directories in `dirfd` whose
/// owner is gone (killed before it could clean up); best effort.
BASHEXEC_DECL void sweep_dead_owners(int dirfd, std::string_view prefix) noexcept;

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/shared_temp.ipp"
#endif

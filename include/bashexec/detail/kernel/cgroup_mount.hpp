// detail/kernel/cgroup_mount: where the cgroup2 filesystem is mounted and which
// cgroup this process is in, read from /proc/self/mountinfo and
// /proc/self/cgroup.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

inline constexpr long cgroup2_magic = 0x63677270;  // CGROUP2_SUPER_MAGIC

/// The mount point of the cgroup2 filesystem and the path it shows (its
/// mountinfo "root"), from /proc/self/mountinfo; empty when none is mounted.
struct cgroup2_mount {
  std::filesystem::path point;
  std::string root;
};

BASHEXEC_DECL std::optional<cgroup2_mount> find_cgroup2_mount();

/// The host's own cgroup v2 path ("0::<path>" in /proc/self/cgroup).
BASHEXEC_DECL std::optional<std::string> current_cgroup2_path();

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/cgroup_mount.ipp"
#endif

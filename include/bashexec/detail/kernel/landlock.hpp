// detail/kernel/landlock: the Landlock kernel ABI (constants, structs, raw system
// calls) defined here rather than taken from <linux/landlock.h>, because
// distribution headers lag the kernel (Debian 12 lacks TRUNCATE and
// IOCTL_DEV). Numbers are the kernel's UAPI, stable across architectures.
#pragma once

#include <cstddef>
#include <cstdint>

#include <sys/syscall.h>
#include <unistd.h>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

// The three Landlock system calls share one number on every architecture.
#ifdef SYS_landlock_create_ruleset
inline constexpr long sys_landlock_create_ruleset = SYS_landlock_create_ruleset;
inline constexpr long sys_landlock_add_rule = SYS_landlock_add_rule;
inline constexpr long sys_landlock_restrict_self = SYS_landlock_restrict_self;
#else
inline constexpr long sys_landlock_create_ruleset = 444;
inline constexpr long sys_landlock_add_rule = 445;
inline constexpr long sys_landlock_restrict_self = 446;
#endif

inline constexpr std::uint32_t landlock_create_ruleset_version = 1U << 0;
inline constexpr int landlock_rule_path_beneath = 1;

// Filesystem access rights, with the ABI version that introduced each.
inline constexpr std::uint64_t landlock_access_fs_execute = 1ULL << 0;       // ABI 1
inline constexpr std::uint64_t landlock_access_fs_write_file = 1ULL << 1;    // ABI 1
inline constexpr std::uint64_t landlock_access_fs_read_file = 1ULL << 2;     // ABI 1
inline constexpr std::uint64_t landlock_access_fs_read_dir = 1ULL << 3;      // ABI 1
inline constexpr std::uint64_t landlock_access_fs_remove_dir = 1ULL << 4;    // ABI 1
inline constexpr std::uint64_t landlock_access_fs_remove_file = 1ULL << 5;   // ABI 1
inline constexpr std::uint64_t landlock_access_fs_make_char = 1ULL << 6;     // ABI 1
inline constexpr std::uint64_t landlock_access_fs_make_dir = 1ULL << 7;      // ABI 1
inline constexpr std::uint64_t landlock_access_fs_make_reg = 1ULL << 8;      // ABI 1
inline constexpr std::uint64_t landlock_access_fs_make_sock = 1ULL << 9;     // ABI 1
inline constexpr std::uint64_t landlock_access_fs_make_fifo = 1ULL << 10;    // ABI 1
inline constexpr std::uint64_t landlock_access_fs_make_block = 1ULL << 11;   // ABI 1
inline constexpr std::uint64_t landlock_access_fs_make_sym = 1ULL << 12;     // ABI 1
inline constexpr std::uint64_t landlock_access_fs_refer = 1ULL << 13;        // ABI 2
inline constexpr std::uint64_t landlock_access_fs_truncate = 1ULL << 14;     // ABI 3
inline constexpr std::uint64_t landlock_access_fs_ioctl_dev = 1ULL << 15;    // ABI 5

/// Every filesystem right the given ABI version understands. Handling a
/// right the kernel does not know makes landlock_create_ruleset fail.
constexpr std::uint64_t landlock_fs_rights_for_abi(int abi) noexcept {
  if (abi < 1) return 0;
  std::uint64_t rights = (1ULL << 13) - 1;  // ABI 1: bits 0..12
  if (abi >= 2) rights |= landlock_access_fs_refer;
  if (abi >= 3) rights |= landlock_access_fs_truncate;
  if (abi >= 5) rights |= landlock_access_fs_ioctl_dev;
  return rights;
}

/// Rights that may be granted on a non-directory (the kernel rejects others).
inline constexpr std::uint64_t landlock_file_rights =
    landlock_access_fs_execute | landlock_access_fs_write_file | landlock_access_fs_read_file |
    landlock_access_fs_truncate | landlock_access_fs_ioctl_dev;

/// Rights that only observe. Device ioctls are deliberately not among them:
/// TIOCSTI on a reopened /dev/tty would type commands into the host's shell.
inline constexpr std::uint64_t landlock_read_rights =
    landlock_access_fs_execute | landlock_access_fs_read_file | landlock_access_fs_read_dir;

// Network access rights (ABI 4): TCP only — UDP, raw and unix sockets are not
// governed by Landlock at all.
inline constexpr std::uint64_t landlock_access_net_bind_tcp = 1ULL << 0;     // ABI 4
inline constexpr std::uint64_t landlock_access_net_connect_tcp = 1ULL << 1;  // ABI 4
inline constexpr int landlock_net_abi = 4;

// Scopes (ABI 6): IPC that may not leave the domain.
inline constexpr std::uint64_t landlock_scope_abstract_unix_socket = 1ULL << 0;  // ABI 6
inline constexpr std::uint64_t landlock_scope_signal = 1ULL << 1;                // ABI 6
inline constexpr int landlock_scope_abi = 6;

/// The kernel's struct, grown by ABI: `handled_access_net` from 4, `scoped`
/// from 6. `landlock_ruleset_attr_size` passes only the prefix that is in use,
/// so a file-only ruleset looks exactly like an ABI 1 one to any kernel.
struct landlock_ruleset_attr {
  std::uint64_t handled_access_fs = 0;
  std::uint64_t handled_access_net = 0;
  std::uint64_t scoped = 0;
};

/// The size to pass for `attr`: the shortest prefix holding every non-zero field.
constexpr std::size_t landlock_ruleset_attr_size(const landlock_ruleset_attr& attr) noexcept {
  if (attr.scoped != 0) return sizeof(landlock_ruleset_attr);
  if (attr.handled_access_net != 0) return offsetof(landlock_ruleset_attr, scoped);
  return offsetof(landlock_ruleset_attr, handled_access_net);
}

struct [[gnu::packed]] landlock_path_beneath_attr {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
};

inline int landlock_create_ruleset(const landlock_ruleset_attr* attr, std::size_t size,
                                   std::uint32_t flags) noexcept {
  return static_cast<int>(::syscall(sys_landlock_create_ruleset, attr, size, flags));
}

inline int landlock_add_rule(int ruleset_fd, int rule_type, const void* rule_attr,
                             std::uint32_t flags) noexcept {
  return static_cast<int>(::syscall(sys_landlock_add_rule, ruleset_fd, rule_type, rule_attr, flags));
}

/// Async-signal-safe: a bare system call.
inline int landlock_restrict_self(int ruleset_fd, std::uint32_t flags) noexcept {
  return static_cast<int>(::syscall(sys_landlock_restrict_self, ruleset_fd, flags));
}

/// The kernel's Landlock ABI version, or -errno when Landlock is absent
/// (ENOSYS: not built in; EOPNOTSUPP: built in but not enabled at boot).
/// Queried once per process: the answer cannot change while we run.
BASHEXEC_DECL int landlock_abi() noexcept;

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/landlock.ipp"
#endif

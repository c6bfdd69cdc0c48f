// detail/kernel/seccomp_filter: the seccomp filter for what Landlock cannot govern,
// built with libseccomp (the library systemd, podman and runc use) rather
// than by hand: libseccomp knows every architecture's syscall numbers,
// multiplexed calls (i386's socketcall) and the x32 ABI, so this header only
// says WHICH calls are refused, by name, and never spells a number.
//
// Where things happen: the program is built ONCE per set of parts, in the
// parent (`seccomp_filter_cache`, lazily, thread-safe), exported from
// libseccomp as classic BPF (`seccomp_export_bpf` into a memfd, read back:
// libseccomp 2.5 has no export-to-memory) and kept as a plain
// `std::vector<sock_filter>`. The child — the async-signal-safe pre-exec
// hook, after PR_SET_NO_NEW_PRIVS and landlock_restrict_self — only loads
// that program with one seccomp(2) call (`install_seccomp_filter`); no
// libseccomp code ever runs after fork.
//
// Parts (combine freely; one program per spawn):
//   network          socket(2)/socketpair(2) of any family but AF_UNIX fail
//                    with EPERM; io_uring_setup(2) fails with ENOSYS (an
//                    io_uring SOCKET op would bypass the socket(2) check);
//                    socketcall(2) (i386), whose arguments live in memory a
//                    filter cannot read, is refused whole with EPERM.
//                    EPERM rather than EACCES: EACCES reads "Permission
//                    denied", Landlock's FILE-denial dialect, and would mark a
//                    failed network call as a denied file effect. The domain
//                    is compared as the full 64-bit argument (libseccomp
//                    2.5 compares 64 bits on 64-bit ABIs): a domain of 1
//                    with garbage in the high word, which the kernel would
//                    read as AF_UNIX, is refused too — stricter, never looser.
//   metadata_writes  every syscall that changes an inode's metadata fails
//                    with EACCES ("Permission denied" — the file-denial
//                    dialect on purpose: these ARE denied file effects).
//                    Landlock governs no metadata change at any ABI (chmod,
//                    chown, utimes, xattrs pass a read-only domain), so a
//                    read-only spawn adds this part. Syscalls only, no paths:
//                    an fchmod on a pipe or socket (stdout) is refused too,
//                    which is exact under read-only — nothing may change.
//                    ioctl(2) too, by its command, compared on the low 32
//                    bits of the second argument (the kernel's `cmd` is an
//                    unsigned int, so a caller cannot dodge the check with
//                    a high word): the inode-attribute setters `chattr` uses,
//                    in their 64-bit and 32-bit spellings on every ABI
//                    (compat_sys_ioctl accepts both). Every other ioctl
//                    passes (terminals, FS_IOC_GETFLAGS / lsattr, FIONREAD).
//                    io_uring_setup fails with ENOSYS (its xattr ops would
//                    go around the syscall list).
// Everything else is allowed.
//
// Architectures: x86_64 with its compat ABIs i386 and x32, aarch64 with arm32
// EABI; any other audit arch arriving on these machines gets ENOSYS.
// Elsewhere `seccomp_filter_supported` is false and callers must not claim
// what the filter would govern. Syscalls newer than libseccomp 2.5.4's
// tables (Debian 12) — setxattrat, removexattrat (Linux 6.13) and
// file_setattr (6.17) — cannot be named to it, and libseccomp refuses a bare
// number on a non-native ABI; they carry one number on every ABI (the
// kernel's unified numbering from 424 on; x32 adds its bit), so a 6-
// instruction arch-independent prefix refuses them ahead of libseccomp's
// program. Refusing a number an older kernel does not know is harmless.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include "bashexec/detail/kernel/seccomp_support.hpp"
#include "bashexec/detail/linkage.hpp"

// libseccomp's argument comparison, used only by the bodies (<seccomp.h>).
struct scmp_arg_cmp;

namespace bashexec::detail {

/// The parts one program combines.
struct seccomp_parts {
  bool network = false;
  bool metadata_writes = false;
  bool any() const noexcept { return network || metadata_writes; }
};

/// Syscalls refused under `metadata_writes`, by name; libseccomp maps each
/// to its number on every ABI of the filter, and skips a name an ABI lacks
/// (arm64 has no chmod, x86_64 no chown32).
inline constexpr auto seccomp_metadata_syscalls = std::to_array<const char*>({
    "chmod",        "fchmod",       "fchmodat",     "fchmodat2", "chown",     "fchown",
    "lchown",       "chown32",      "fchown32",     "lchown32",  "fchownat",  "utime",
    "utimes",       "futimesat",    "utimensat",    "utimensat_time64",       "setxattr",
    "lsetxattr",    "fsetxattr",    "removexattr",  "lremovexattr",           "fremovexattr",
});

/// Metadata syscalls libseccomp 2.5.4 cannot name: setxattrat (463) and
/// removexattrat (466), Linux 6.13; file_setattr (469), Linux 6.17. The same
/// number on every ABI (x32 with its bit, masked off by the prefix).
inline constexpr auto seccomp_unnamed_metadata_syscalls = std::to_array<std::uint32_t>({463, 466, 469});

/// ioctl commands refused under `metadata_writes`, compared on the low 32
/// bits of args[1]. Values from include/uapi/linux/fs.h and fs/ext4/ext4.h;
/// the test checks them against <linux/fs.h>.
inline constexpr auto seccomp_metadata_ioctls = std::to_array<std::uint32_t>({
    0x40086602,  // FS_IOC_SETFLAGS      _IOW('f', 2, long), 64-bit long
    0x40046602,  // FS_IOC32_SETFLAGS    _IOW('f', 2, int)
    0x401c5820,  // FS_IOC_FSSETXATTR    _IOW('X', 32, struct fsxattr)
    0x40087602,  // FS_IOC_SETVERSION    _IOW('v', 2, long)
    0x40047602,  // FS_IOC32_SETVERSION  _IOW('v', 2, int)
    0x40086604,  // EXT4_IOC_SETVERSION  _IOW('f', 4, long)
    0x40046604,  // EXT4_IOC32_SETVERSION _IOW('f', 4, int)
});

/// One built program; `program()` points into `code()`, so the object never
/// moves once built (it lives in a `seccomp_filter_cache`, or is held by
/// the caller in place).
class seccomp_filter {
 public:
  /// Builds the program for `parts` (at least one) with libseccomp. Throws
  /// std::system_error naming the libseccomp call that failed.
  explicit seccomp_filter(seccomp_parts parts);

  seccomp_filter(const seccomp_filter&) = delete;
  seccomp_filter& operator=(const seccomp_filter&) = delete;

  const sock_fprog& program() const noexcept { return prog_; }
  std::span<const sock_filter> code() const noexcept { return code_; }
  seccomp_parts parts() const noexcept { return parts_; }

 private:
  struct context_deleter {
    void operator()(void* ctx) const noexcept;
  };
  using context = std::unique_ptr<void, context_deleter>;

  static void check(int rc, const char* what);

  static constexpr std::uint32_t ret_errno(int error) noexcept {
    return SECCOMP_RET_ERRNO | (static_cast<std::uint32_t>(error) & SECCOMP_RET_DATA);
  }

  /// Refuses `seccomp_unnamed_metadata_syscalls` on every ABI with EACCES
  /// and otherwise falls through into libseccomp's program, which starts by
  /// loading the arch itself and jumps only forward inside itself. The x32
  /// bit is masked off; no native or compat number on these machines has
  /// bit 30 set otherwise.
  static std::vector<sock_filter> unnamed_prefix();

  /// Adds "`name` fails with `error`" (when `args` match). A name some ABI
  /// of the filter lacks is skipped there by libseccomp itself.
  static void refuse(void* ctx, const char* name, int error, const scmp_arg_cmp* arg = nullptr);

  static std::vector<sock_filter> build_with_libseccomp(seccomp_parts parts);

  /// libseccomp 2.5 exports only to a descriptor: a memfd, read back whole.
  static std::vector<sock_filter> export_program(void* ctx);

  seccomp_parts parts_;
  std::vector<sock_filter> code_;
  sock_fprog prog_{};
};

/// Built-once programs, one per combination of parts: the first spawn that
/// needs a combination builds it, every later one (any thread) reuses it. A
/// build that throws leaves the slot empty for the next caller to retry.
/// Neither copyable nor movable: spawns hold pointers into it (keep the
/// cache alive, e.g. behind a shared_ptr, as long as any may load one).
class seccomp_filter_cache {
 public:
  seccomp_filter_cache() = default;
  seccomp_filter_cache(const seccomp_filter_cache&) = delete;
  seccomp_filter_cache& operator=(const seccomp_filter_cache&) = delete;

  /// The program for `parts` (at least one).
  const seccomp_filter& get(seccomp_parts parts);

 private:
  std::array<std::once_flag, 4> once_;
  std::array<std::optional<seccomp_filter>, 4> filters_;
};

/// Installs `filter` on the calling thread. Async-signal-safe: one raw
/// system call (pre-exec hooks use no libc wrappers, see spawn/fork_exec.hpp).
/// Requires no_new_privs (or CAP_SYS_ADMIN). Returns 0 or an errno value.
BASHEXEC_DECL int install_seccomp_filter(const seccomp_filter& filter) noexcept;

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/seccomp_filter.ipp"
#endif

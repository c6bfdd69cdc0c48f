// detail/seccomp_filter: the seccomp filter for what Landlock cannot govern,
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
#include <cerrno>
#include <memory>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <seccomp.h>

#include "bashexec/detail/unique_fd.hpp"

namespace bashexec::detail {

/// The parts one program combines.
struct seccomp_parts {
  bool network = false;
  bool metadata_writes = false;
  bool any() const noexcept { return network || metadata_writes; }
};

#if defined(__x86_64__) || defined(__aarch64__)
inline constexpr bool seccomp_filter_supported = true;
#else
inline constexpr bool seccomp_filter_supported = false;
#endif

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

/// The compat ABIs each native one also filters (libseccomp's tokens).
#if defined(__x86_64__)
inline constexpr auto seccomp_compat_arches = std::to_array<std::uint32_t>({SCMP_ARCH_X86, SCMP_ARCH_X32});
#elif defined(__aarch64__)
inline constexpr auto seccomp_compat_arches = std::to_array<std::uint32_t>({SCMP_ARCH_ARM});
#else
inline constexpr std::array<std::uint32_t, 0> seccomp_compat_arches{};
#endif

/// One built program; `program()` points into `code()`, so the object never
/// moves once built (it lives in a `seccomp_filter_cache`, or is held by
/// the caller in place).
class seccomp_filter {
 public:
  /// Builds the program for `parts` (at least one) with libseccomp. Throws
  /// std::system_error naming the libseccomp call that failed.
  explicit seccomp_filter(seccomp_parts parts) : parts_(parts) {
    if (!parts.any()) throw std::logic_error("seccomp_filter: no part selected");
    if (!seccomp_filter_supported) throw std::logic_error("seccomp_filter: unsupported architecture");
    if (parts.metadata_writes) code_ = unnamed_prefix();
    const std::vector<sock_filter> body = build_with_libseccomp(parts);
    code_.insert(code_.end(), body.begin(), body.end());
    if (code_.size() > BPF_MAXINSNS) throw std::logic_error("seccomp_filter: program longer than BPF_MAXINSNS");
    prog_.len = static_cast<unsigned short>(code_.size());
    prog_.filter = code_.data();
  }

  seccomp_filter(const seccomp_filter&) = delete;
  seccomp_filter& operator=(const seccomp_filter&) = delete;

  const sock_fprog& program() const noexcept { return prog_; }
  std::span<const sock_filter> code() const noexcept { return code_; }
  seccomp_parts parts() const noexcept { return parts_; }

 private:
  struct context_deleter {
    void operator()(void* ctx) const noexcept { seccomp_release(ctx); }
  };
  using context = std::unique_ptr<void, context_deleter>;

  static void check(int rc, const char* what) {
    if (rc < 0) throw std::system_error(-rc, std::generic_category(), std::string("libseccomp: ") + what);
  }

  static constexpr std::uint32_t ret_errno(int error) noexcept {
    return SECCOMP_RET_ERRNO | (static_cast<std::uint32_t>(error) & SECCOMP_RET_DATA);
  }

  /// Refuses `seccomp_unnamed_metadata_syscalls` on every ABI with EACCES
  /// and otherwise falls through into libseccomp's program, which starts by
  /// loading the arch itself and jumps only forward inside itself. The x32
  /// bit is masked off; no native or compat number on these machines has
  /// bit 30 set otherwise.
  static std::vector<sock_filter> unnamed_prefix() {
    static_assert(seccomp_unnamed_metadata_syscalls.size() == 3, "the jump offsets below count three checks");
    constexpr auto nr = static_cast<std::uint32_t>(offsetof(seccomp_data, nr));
    const auto& n = seccomp_unnamed_metadata_syscalls;
    return {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, nr),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, ~0x40000000U),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, n[0], 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, n[1], 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, n[2], 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JA, 1, 0, 0),
        BPF_STMT(BPF_RET | BPF_K, ret_errno(EACCES)),
    };
  }

  /// Adds "`name` fails with `error`" (when `args` match). A name some ABI
  /// of the filter lacks is skipped there by libseccomp itself.
  static void refuse(void* ctx, const char* name, int error, const scmp_arg_cmp* arg = nullptr) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) throw std::logic_error(std::string("libseccomp does not know syscall ") + name);
    check(seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(static_cast<std::uint32_t>(error)), nr, arg ? 1U : 0U, arg),
          name);
  }

  static std::vector<sock_filter> build_with_libseccomp(seccomp_parts parts) {
    context ctx(seccomp_init(SCMP_ACT_ALLOW));
    if (!ctx) throw std::system_error(ENOMEM, std::generic_category(), "libseccomp: seccomp_init");
    check(seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS)), "bad-arch action");
    // A binary tree of syscall numbers instead of a linear chain: the kernel
    // emulates the program once per syscall number when it attaches it (its
    // allow-cache), so a shorter path is a cheaper attach.
    check(seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2), "binary-tree optimization");
    for (std::uint32_t arch : seccomp_compat_arches) check(seccomp_arch_add(ctx.get(), arch), "seccomp_arch_add");

    if (parts.network || parts.metadata_writes) refuse(ctx.get(), "io_uring_setup", ENOSYS);
    if (parts.network) {
      const scmp_arg_cmp not_unix = SCMP_A0_64(SCMP_CMP_NE, AF_UNIX);
      refuse(ctx.get(), "socket", EPERM, &not_unix);
      refuse(ctx.get(), "socketpair", EPERM, &not_unix);
      refuse(ctx.get(), "socketcall", EPERM);
    }
    if (parts.metadata_writes) {
      for (const char* name : seccomp_metadata_syscalls) refuse(ctx.get(), name, EACCES);
      for (std::uint32_t cmd : seccomp_metadata_ioctls) {
        const scmp_arg_cmp low_word = SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xffffffffULL, cmd);
        refuse(ctx.get(), "ioctl", EACCES, &low_word);
      }
    }
    return export_program(ctx.get());
  }

  /// libseccomp 2.5 exports only to a descriptor: a memfd, read back whole.
  static std::vector<sock_filter> export_program(void* ctx) {
    unique_fd fd(::memfd_create("bashexec-seccomp", MFD_CLOEXEC));
    if (!fd) throw std::system_error(errno, std::generic_category(), "memfd_create for the seccomp program");
    check(seccomp_export_bpf(ctx, fd.get()), "seccomp_export_bpf");
    const off_t size = ::lseek(fd.get(), 0, SEEK_END);
    if (size < 0) throw std::system_error(errno, std::generic_category(), "lseek on the seccomp program");
    if (size == 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0)
      throw std::logic_error("seccomp_export_bpf wrote no whole program");
    std::vector<sock_filter> code(static_cast<std::size_t>(size) / sizeof(sock_filter));
    const ssize_t got = ::pread(fd.get(), code.data(), static_cast<std::size_t>(size), 0);
    if (got != size) throw std::system_error(got < 0 ? errno : EIO, std::generic_category(), "reading the seccomp program");
    return code;
  }

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
  const seccomp_filter& get(seccomp_parts parts) {
    const std::size_t slot = (parts.network ? 2U : 0U) + (parts.metadata_writes ? 1U : 0U);
    std::call_once(once_[slot], [&] { filters_[slot].emplace(parts); });
    return *filters_[slot];
  }

 private:
  std::array<std::once_flag, 4> once_;
  std::array<std::optional<seccomp_filter>, 4> filters_;
};

/// Installs `filter` on the calling thread. Async-signal-safe: one raw
/// system call (pre-exec hooks use no libc wrappers, see spawn/fork_exec.hpp).
/// Requires no_new_privs (or CAP_SYS_ADMIN). Returns 0 or an errno value.
inline int install_seccomp_filter(const seccomp_filter& filter) noexcept {
  // SECCOMP_FILTER_FLAG_SPEC_ALLOW: by default a seccomp filter also turns on
  // the Speculative Store Bypass mitigation for the process, which slows the
  // whole command down; the filter here is about file and network effects,
  // not about side channels between the command and its own user.
  constexpr unsigned long spec_allow = 1UL << 2;
  constexpr unsigned long set_mode_filter = 1;  // SECCOMP_SET_MODE_FILTER
  if (::syscall(SYS_seccomp, set_mode_filter, spec_allow, &filter.program()) == 0) return 0;
  if (errno != EINVAL) return errno;
  // Kernels before 4.17 know no flags: the plain form.
  if (::syscall(SYS_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter.program(), 0, 0) != 0) return errno;
  return 0;
}

}  // namespace bashexec::detail

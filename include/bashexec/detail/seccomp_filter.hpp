// detail/seccomp_filter: a hand-written classic-BPF seccomp filter for what
// Landlock cannot govern, built in the parent from the parts one spawn needs
// and installed by the async-signal-safe pre-exec hook after
// PR_SET_NO_NEW_PRIVS and landlock_restrict_self. No libseccomp: the program
// is a short list of "this syscall number → this answer" checks.
//
// Parts (combine freely; one program per spawn):
//   network          socket(2)/socketpair(2) of any family but AF_UNIX fail
//                    with EPERM; io_uring_setup(2) fails with ENOSYS (an
//                    io_uring SOCKET op would bypass the socket(2) check).
//                    EPERM rather than EACCES: EACCES reads "Permission
//                    denied", Landlock's FILE-denial dialect, and would mark a
//                    failed network call as a denied file effect.
//   metadata_writes  every syscall that changes an inode's metadata fails
//                    with EACCES ("Permission denied" — the file-denial
//                    dialect on purpose: these ARE denied file effects).
//                    Landlock governs no metadata change at any ABI (chmod,
//                    chown, utimes, xattrs pass a read-only domain), so a
//                    read-only spawn adds this part. Syscalls only, no paths:
//                    an fchmod on a pipe or socket (stdout) is refused too,
//                    which is exact under read-only — nothing may change.
//                    ioctl(2) too, by its command (the low 32 bits of the
//                    second argument: the kernel's `cmd` is an unsigned int,
//                    so the high word is ignored here as the kernel ignores
//                    it): the inode-attribute setters `chattr` uses —
//                    FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR, FS_IOC_SETVERSION
//                    and ext4's EXT4_IOC_SETVERSION, each in its 64-bit and
//                    32-bit (`long` = 4) spelling on EVERY table, since
//                    compat_sys_ioctl accepts both — fail with EACCES.
//                    Landlock governs ioctls on device files only (ABI 5),
//                    not on the regular file or directory `chattr +i`
//                    opens read-only. Every other ioctl passes (terminals,
//                    FS_IOC_GETFLAGS / lsattr, FIONREAD, ...).
// Everything else is allowed.
//
// Architectures: x86_64 (the x32 bit is masked off, so x32 calls obey the
// same rules — of the syscalls here only ioctl has an x32-only number, 514,
// which the native table lists beside 16; i386 calls
// made by a 32-bit program are filtered by their own numbers, and
// socketcall(2), whose arguments live in memory a filter cannot read, is
// refused whole under `network`) and aarch64 (arm32 EABI compat likewise).
// Any other audit arch arriving on these machines gets ENOSYS. Elsewhere
// `seccomp_filter_supported` is false and callers must not claim what the
// filter would govern.
//
// Numbers come from the kernel's tables (arch/x86/entry/syscalls/
// syscall_{64,32}.tbl, scripts/syscall.tbl for arm64, arch/arm/tools/
// syscall.tbl for arm32), spelled out here because distribution headers lag
// the kernel: fchmodat2 (452, Linux 6.6), setxattrat/removexattrat (463/466,
// Linux 6.13) and file_setattr (469, Linux 6.17) carry one number on every
// architecture. Refusing a number an older kernel does not know is harmless.
#pragma once

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

namespace bashexec::detail {

/// What a filter rule does with a matching syscall.
struct seccomp_rule {
  std::uint32_t nr = 0;
  /// An errno value to fail with, or `check_domain`: allow only an AF_UNIX
  /// first argument, EPERM otherwise.
  int answer = 0;
  static constexpr int check_domain = -1;
};

/// The parts one program combines.
struct seccomp_parts {
  bool network = false;
  bool metadata_writes = false;
  bool any() const noexcept { return network || metadata_writes; }
};

#if defined(__x86_64__) || defined(__aarch64__)
inline constexpr bool seccomp_filter_supported = true;
// Shared by both architectures and their compat tables (numbers >= 424 are
// the same everywhere).
inline constexpr std::uint32_t seccomp_io_uring_setup = 425;
inline constexpr std::uint32_t seccomp_fchmodat2 = 452;
inline constexpr std::uint32_t seccomp_setxattrat = 463;
inline constexpr std::uint32_t seccomp_removexattrat = 466;
inline constexpr std::uint32_t seccomp_file_setattr = 469;

/// ioctl commands refused under `metadata_writes` (compared on the low 32
/// bits of args[1]), on every table: a compat caller may pass either
/// spelling (compat_sys_ioctl maps the 32-bit one and hands the 64-bit one
/// straight to do_vfs_ioctl), and refusing a spelling the native kernel
/// would answer ENOTTY costs nothing. Values from include/uapi/linux/fs.h
/// and fs/ext4/ext4.h; the test checks them against <linux/fs.h>.
inline constexpr auto seccomp_metadata_ioctls = std::to_array<std::uint32_t>({
    0x40086602,  // FS_IOC_SETFLAGS      _IOW('f', 2, long), 64-bit long
    0x40046602,  // FS_IOC32_SETFLAGS    _IOW('f', 2, int)
    0x401c5820,  // FS_IOC_FSSETXATTR    _IOW('X', 32, struct fsxattr)
    0x40087602,  // FS_IOC_SETVERSION    _IOW('v', 2, long)
    0x40047602,  // FS_IOC32_SETVERSION  _IOW('v', 2, int)
    0x40086604,  // EXT4_IOC_SETVERSION  _IOW('f', 4, long)
    0x40046604,  // EXT4_IOC32_SETVERSION _IOW('f', 4, int)
});
#else
inline constexpr bool seccomp_filter_supported = false;
#endif

#if defined(__x86_64__)
inline constexpr std::uint32_t seccomp_native_arch = AUDIT_ARCH_X86_64;
inline constexpr std::uint32_t seccomp_native_nr_mask = ~0x40000000U;  // __X32_SYSCALL_BIT
inline constexpr std::uint32_t seccomp_compat_arch = AUDIT_ARCH_I386;

inline constexpr std::array<seccomp_rule, 3> seccomp_native_network{{
    {41, seccomp_rule::check_domain},  // socket
    {53, seccomp_rule::check_domain},  // socketpair
    {seccomp_io_uring_setup, ENOSYS},
}};
inline constexpr std::array<seccomp_rule, 4> seccomp_compat_network{{
    {359, seccomp_rule::check_domain},  // socket
    {360, seccomp_rule::check_domain},  // socketpair
    {102, EPERM},                       // socketcall
    {seccomp_io_uring_setup, ENOSYS},
}};
/// ioctl: 16 (64-bit ABI) and 514 (x32's compat_sys_ioctl, x32 bit masked).
inline constexpr auto seccomp_native_ioctl = std::to_array<std::uint32_t>({16, 514});
inline constexpr auto seccomp_compat_ioctl = std::to_array<std::uint32_t>({54});
/// x86_64 (and x32, masked): syscall_64.tbl.
inline constexpr auto seccomp_native_metadata = std::to_array<std::uint32_t>({
    90,   // chmod
    91,   // fchmod
    268,  // fchmodat
    seccomp_fchmodat2,
    92,   // chown
    93,   // fchown
    94,   // lchown
    260,  // fchownat
    132,  // utime
    235,  // utimes
    261,  // futimesat
    280,  // utimensat
    188,  // setxattr
    189,  // lsetxattr
    190,  // fsetxattr
    197,  // removexattr
    198,  // lremovexattr
    199,  // fremovexattr
    seccomp_setxattrat,
    seccomp_removexattrat,
    seccomp_file_setattr,
});
/// i386: syscall_32.tbl (16- and 32-bit uid chown variants, time32 and
/// time64 utimensat).
inline constexpr auto seccomp_compat_metadata = std::to_array<std::uint32_t>({
    15,   // chmod
    94,   // fchmod
    306,  // fchmodat
    seccomp_fchmodat2,
    182,  // chown (16-bit uids)
    95,   // fchown (16-bit uids)
    16,   // lchown (16-bit uids)
    212,  // chown32
    207,  // fchown32
    198,  // lchown32
    298,  // fchownat
    30,   // utime
    271,  // utimes
    299,  // futimesat
    320,  // utimensat
    412,  // utimensat_time64
    226,  // setxattr
    227,  // lsetxattr
    228,  // fsetxattr
    235,  // removexattr
    236,  // lremovexattr
    237,  // fremovexattr
    seccomp_setxattrat,
    seccomp_removexattrat,
    seccomp_file_setattr,
});
#elif defined(__aarch64__)
inline constexpr std::uint32_t seccomp_native_arch = AUDIT_ARCH_AARCH64;
inline constexpr std::uint32_t seccomp_native_nr_mask = ~0U;
inline constexpr std::uint32_t seccomp_compat_arch = AUDIT_ARCH_ARM;

inline constexpr std::array<seccomp_rule, 3> seccomp_native_network{{
    {198, seccomp_rule::check_domain},  // socket
    {199, seccomp_rule::check_domain},  // socketpair
    {seccomp_io_uring_setup, ENOSYS},
}};
inline constexpr std::array<seccomp_rule, 4> seccomp_compat_network{{
    {281, seccomp_rule::check_domain},  // socket
    {288, seccomp_rule::check_domain},  // socketpair
    {102, EPERM},                       // socketcall (OABI only; refused whole like i386's)
    {seccomp_io_uring_setup, ENOSYS},
}};
inline constexpr auto seccomp_native_ioctl = std::to_array<std::uint32_t>({29});
inline constexpr auto seccomp_compat_ioctl = std::to_array<std::uint32_t>({54});
/// arm64: the generic table (scripts/syscall.tbl) has only the *at and fd
/// forms: no chmod, chown, lchown, utime, utimes or futimesat.
inline constexpr auto seccomp_native_metadata = std::to_array<std::uint32_t>({
    52,  // fchmod
    53,  // fchmodat
    seccomp_fchmodat2,
    55,  // fchown
    54,  // fchownat
    88,  // utimensat
    5,   // setxattr
    6,   // lsetxattr
    7,   // fsetxattr
    14,  // removexattr
    15,  // lremovexattr
    16,  // fremovexattr
    seccomp_setxattrat,
    seccomp_removexattrat,
    seccomp_file_setattr,
});
/// arm32 EABI compat: arch/arm/tools/syscall.tbl (utime is OABI-only there).
inline constexpr auto seccomp_compat_metadata = std::to_array<std::uint32_t>({
    15,   // chmod
    94,   // fchmod
    333,  // fchmodat
    seccomp_fchmodat2,
    182,  // chown (16-bit uids)
    95,   // fchown (16-bit uids)
    16,   // lchown (16-bit uids)
    212,  // chown32
    207,  // fchown32
    198,  // lchown32
    325,  // fchownat
    269,  // utimes
    326,  // futimesat
    348,  // utimensat
    412,  // utimensat_time64
    226,  // setxattr
    227,  // lsetxattr
    228,  // fsetxattr
    235,  // removexattr
    236,  // lremovexattr
    237,  // fremovexattr
    seccomp_setxattrat,
    seccomp_removexattrat,
    seccomp_file_setattr,
});
#endif

#if defined(__x86_64__) || defined(__aarch64__)

/// The filter program for one spawn; `prog` points into `code`, so the
/// object never moves once built (it lives behind a shared_ptr).
class seccomp_filter {
 public:
  /// Builds the program for `parts` (at least one). Throws std::logic_error
  /// if a jump would not fit classic BPF's 8-bit offsets (it cannot with the
  /// tables above; the check guards future edits).
  explicit seccomp_filter(seccomp_parts parts) : parts_(parts) {
    if (!parts.any()) throw std::logic_error("seccomp_filter: no part selected");
    build();
    prog_.len = static_cast<unsigned short>(code_.size());
    prog_.filter = code_.data();
  }

  seccomp_filter(const seccomp_filter&) = delete;
  seccomp_filter& operator=(const seccomp_filter&) = delete;

  const sock_fprog& program() const noexcept { return prog_; }
  std::span<const sock_filter> code() const noexcept { return code_; }
  seccomp_parts parts() const noexcept { return parts_; }

 private:
  // Jump targets, resolved once every instruction is placed.
  enum label : unsigned {
    next = 0,
    to_compat,
    to_check_domain,
    to_check_ioctl,
    to_allow,
    to_enosys,
    to_errno_base
  };

  struct pending {
    std::size_t at;
    unsigned jt_label;
    unsigned jf_label;
  };

  void emit(sock_filter instruction) { code_.push_back(instruction); }
  void jump_eq(std::uint32_t value, unsigned jt_label, unsigned jf_label) {
    fixups_.push_back({code_.size(), jt_label, jf_label});
    emit(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, value, 0, 0));
  }
  unsigned errno_label(int error) {
    for (std::size_t i = 0; i < errnos_.size(); ++i)
      if (errnos_[i] == error) return to_errno_base + static_cast<unsigned>(i);
    errnos_.push_back(error);
    return to_errno_base + static_cast<unsigned>(errnos_.size() - 1);
  }
  unsigned rule_label(const seccomp_rule& rule) {
    return rule.answer == seccomp_rule::check_domain ? static_cast<unsigned>(to_check_domain)
                                                     : errno_label(rule.answer);
  }

  template <std::size_t N, std::size_t M, std::size_t I>
  void table(const std::array<seccomp_rule, N>& network, const std::array<std::uint32_t, M>& metadata,
             const std::array<std::uint32_t, I>& ioctl) {
    if (parts_.network)
      for (const auto& rule : network) jump_eq(rule.nr, rule_label(rule), next);
    if (parts_.metadata_writes) {
      // io_uring's SETXATTR/FSETXATTR ops would go around the table below.
      if (!parts_.network) jump_eq(seccomp_io_uring_setup, errno_label(ENOSYS), next);
      for (std::uint32_t nr : metadata) jump_eq(nr, errno_label(EACCES), next);
      for (std::uint32_t nr : ioctl) jump_eq(nr, to_check_ioctl, next);
    }
    emit(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  }

  /// The low 32 bits of args[index] (both architectures above are
  /// little-endian; a big-endian build would read the second word).
  static constexpr std::uint32_t arg_low_word(std::size_t index) {
    constexpr std::size_t low_word_at = __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__ ? 4 : 0;
    return static_cast<std::uint32_t>(offsetof(seccomp_data, args) + index * sizeof(std::uint64_t) + low_word_at);
  }

  void build() {
    constexpr std::uint32_t nr = offsetof(seccomp_data, nr);
    constexpr std::uint32_t arch = offsetof(seccomp_data, arch);
    // The low 32 bits of args[0] (the domain is an int) and of args[1]
    // (ioctl's cmd, an unsigned int: the kernel drops the high word, so the
    // filter must too — requiring it zero would let a caller dodge the check
    // by setting it).
    constexpr std::uint32_t domain = arg_low_word(0);
    constexpr std::uint32_t ioctl_cmd = arg_low_word(1);
    (void)errno_label(ENOSYS);  // index 0: the answer for a foreign arch

    emit(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arch));
    jump_eq(seccomp_native_arch, next, to_compat);
    emit(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, nr));
    if (seccomp_native_nr_mask != ~0U) emit(BPF_STMT(BPF_ALU | BPF_AND | BPF_K, seccomp_native_nr_mask));
    table(seccomp_native_network, seccomp_native_metadata, seccomp_native_ioctl);

    // compat: the 32-bit table of the same machine; any other arch gets ENOSYS.
    place(to_compat);
    jump_eq(seccomp_compat_arch, next, errno_label(ENOSYS));
    emit(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, nr));
    table(seccomp_compat_network, seccomp_compat_metadata, seccomp_compat_ioctl);

    if (parts_.network) {
      place(to_check_domain);
      emit(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, domain));
      jump_eq(AF_UNIX, to_allow, errno_label(EPERM));
    }
    if (parts_.metadata_writes) {
      // Shared by both tables: the command set is the same on each.
      place(to_check_ioctl);
      emit(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ioctl_cmd));
      for (std::uint32_t cmd : seccomp_metadata_ioctls) jump_eq(cmd, errno_label(EACCES), next);
      emit(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    }
    place(to_allow);
    emit(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    for (std::size_t i = 0; i < errnos_.size(); ++i) {
      place(to_errno_base + static_cast<unsigned>(i));
      emit(BPF_STMT(BPF_RET | BPF_K,
                    SECCOMP_RET_ERRNO | (static_cast<std::uint32_t>(errnos_[i]) & SECCOMP_RET_DATA)));
    }

    for (const pending& fix : fixups_) {
      code_[fix.at].jt = offset(fix.at, fix.jt_label);
      code_[fix.at].jf = offset(fix.at, fix.jf_label);
    }
  }

  void place(unsigned target) {
    if (places_.size() <= target) places_.resize(target + 1, SIZE_MAX);
    places_[target] = code_.size();
  }

  unsigned char offset(std::size_t from, unsigned target) const {
    if (target == next) return 0;
    if (target >= places_.size() || places_[target] == SIZE_MAX || places_[target] <= from)
      throw std::logic_error("seccomp_filter: unplaced or backward jump target");
    const std::size_t distance = places_[target] - from - 1;
    if (distance > 255) throw std::logic_error("seccomp_filter: jump too far for classic BPF");
    return static_cast<unsigned char>(distance);
  }

  seccomp_parts parts_;
  std::vector<sock_filter> code_;
  sock_fprog prog_{};
  std::vector<pending> fixups_;
  std::vector<int> errnos_;
  std::vector<std::size_t> places_;
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
#else
/// No filter for this architecture: present so callers compile, never built
/// while `seccomp_filter_supported` is false.
class seccomp_filter {
 public:
  explicit seccomp_filter(seccomp_parts) { throw std::logic_error("seccomp_filter: unsupported architecture"); }
};
inline int install_seccomp_filter(const seccomp_filter&) noexcept { return ENOSYS; }
#endif

}  // namespace bashexec::detail

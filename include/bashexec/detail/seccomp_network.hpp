// detail/seccomp_network: a hand-written classic-BPF seccomp filter that
// takes the network away from a confined command where no namespace does
// (Landlock): socket(2) and socketpair(2) of any family but AF_UNIX fail with
// EPERM, io_uring_setup(2) fails with ENOSYS (an io_uring SOCKET op would
// bypass the socket(2) check). Everything else is allowed. No libseccomp: the
// program is a few fixed instructions, built in the parent and installed by
// the async-signal-safe pre-exec hook after PR_SET_NO_NEW_PRIVS.
//
// EPERM rather than EACCES: EACCES reads "Permission denied", Landlock's
// FILE-denial dialect, and would mark a failed network call as a denied file
// effect. EPERM ("Operation not permitted") is also what a firewall answers.
//
// Architectures: x86_64 (the x32 bit is masked off, so x32 calls obey the
// same rules; i386 calls made by a 32-bit program are filtered by their own
// numbers, and socketcall(2), whose arguments live in memory a filter cannot
// read, is refused whole) and aarch64 (arm32 compat likewise). Elsewhere
// `network_filter_supported` is false and callers must not claim the
// network is governed.
#pragma once

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

namespace bashexec::detail {

#if defined(__x86_64__)
inline constexpr bool network_filter_supported = true;
inline constexpr std::uint32_t seccomp_native_arch = AUDIT_ARCH_X86_64;
inline constexpr std::uint32_t seccomp_native_socket = 41;
inline constexpr std::uint32_t seccomp_native_socketpair = 53;
inline constexpr std::uint32_t seccomp_native_nr_mask = ~0x40000000U;  // __X32_SYSCALL_BIT
inline constexpr std::uint32_t seccomp_compat_arch = AUDIT_ARCH_I386;
inline constexpr std::uint32_t seccomp_compat_socket = 359;
inline constexpr std::uint32_t seccomp_compat_socketpair = 360;
#elif defined(__aarch64__)
inline constexpr bool network_filter_supported = true;
inline constexpr std::uint32_t seccomp_native_arch = AUDIT_ARCH_AARCH64;
inline constexpr std::uint32_t seccomp_native_socket = 198;
inline constexpr std::uint32_t seccomp_native_socketpair = 199;
inline constexpr std::uint32_t seccomp_native_nr_mask = ~0U;
inline constexpr std::uint32_t seccomp_compat_arch = AUDIT_ARCH_ARM;
inline constexpr std::uint32_t seccomp_compat_socket = 281;
inline constexpr std::uint32_t seccomp_compat_socketpair = 288;
#else
inline constexpr bool network_filter_supported = false;
#endif

#if defined(__x86_64__) || defined(__aarch64__)
// Shared by every architecture above (and by their compat tables).
inline constexpr std::uint32_t seccomp_io_uring_setup = 425;
inline constexpr std::uint32_t seccomp_compat_socketcall = 102;

/// The filter program; `prog` points into `code`, so the object must not
/// move once `prog` is handed to the kernel (it lives behind a shared_ptr).
struct network_filter {
  static constexpr std::size_t size = 20;
  std::array<sock_filter, size> code{};
  sock_fprog prog{};

  network_filter() noexcept {
    constexpr std::uint32_t nr = offsetof(seccomp_data, nr);
    constexpr std::uint32_t arch = offsetof(seccomp_data, arch);
    // The low 32 bits of args[0] (the domain is an int); both architectures
    // above are little-endian.
    constexpr std::uint32_t domain = offsetof(seccomp_data, args);
    constexpr std::uint32_t allow = SECCOMP_RET_ALLOW;
    constexpr std::uint32_t eperm = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
    constexpr std::uint32_t enosys = SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA);
    // Indices of the shared tails, jumped to from both tables.
    // Indices of the shared tails, jumped to from both tables.
    constexpr unsigned compat = 8, check_domain = 15, ret_eperm = 18, ret_enosys = 19;
    auto jump = [](unsigned from, unsigned to) { return static_cast<unsigned char>(to - from - 1); };
    code = {{
        /* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arch),
        /* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, seccomp_native_arch, 0, jump(1, compat)),
        /* 2 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, nr),
        /* 3 */ BPF_STMT(BPF_ALU | BPF_AND | BPF_K, seccomp_native_nr_mask),
        /* 4 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, seccomp_native_socket, jump(4, check_domain), 0),
        /* 5 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, seccomp_native_socketpair, jump(5, check_domain), 0),
        /* 6 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, seccomp_io_uring_setup, jump(6, ret_enosys), 0),
        /* 7 */ BPF_STMT(BPF_RET | BPF_K, allow),
        // compat: the 32-bit table of the same machine; any other arch gets ENOSYS.
        /* 8 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, seccomp_compat_arch, 0, jump(8, ret_enosys)),
        /* 9 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, nr),
        /* 10 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, seccomp_compat_socket, jump(10, check_domain), 0),
        /* 11 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, seccomp_compat_socketpair, jump(11, check_domain), 0),
        /* 12 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, seccomp_compat_socketcall, jump(12, ret_eperm), 0),
        /* 13 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, seccomp_io_uring_setup, jump(13, ret_enosys), 0),
        /* 14 */ BPF_STMT(BPF_RET | BPF_K, allow),
        // check_domain: args[0] of socket/socketpair.
        /* 15 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, domain),
        /* 16 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, jump(16, ret_eperm)),
        /* 17 */ BPF_STMT(BPF_RET | BPF_K, allow),
        /* 18 */ BPF_STMT(BPF_RET | BPF_K, eperm),
        /* 19 */ BPF_STMT(BPF_RET | BPF_K, enosys),
    }};
    prog.len = static_cast<unsigned short>(code.size());
    prog.filter = code.data();
  }

  network_filter(const network_filter&) = delete;
  network_filter& operator=(const network_filter&) = delete;
};

/// Installs `filter` on the calling thread. Async-signal-safe: one raw
/// system call (pre-exec hooks use no libc wrappers, see spawn/fork_exec.hpp).
/// Requires no_new_privs (or CAP_SYS_ADMIN). Returns 0 or an errno value.
inline int install_network_filter(const network_filter& filter) noexcept {
  if (::syscall(SYS_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter.prog, 0, 0) != 0) return errno;
  return 0;
}
#else
/// No filter for this architecture: present so callers compile, never used
/// while `network_filter_supported` is false.
struct network_filter {};
inline int install_network_filter(const network_filter&) noexcept { return ENOSYS; }
#endif

}  // namespace bashexec::detail

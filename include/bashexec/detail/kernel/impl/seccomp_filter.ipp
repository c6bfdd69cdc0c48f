// The bodies of detail/kernel/seccomp_filter.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/seccomp_filter.hpp"

#include <cerrno>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <system_error>

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <seccomp.h>

#include "bashexec/detail/kernel/unique_fd.hpp"

namespace bashexec::detail {

/// The compat ABIs each native one also filters (libseccomp's tokens).
#if defined(__x86_64__)
inline constexpr auto seccomp_compat_arches = std::to_array<std::uint32_t>({SCMP_ARCH_X86, SCMP_ARCH_X32});
#elif defined(__aarch64__)
inline constexpr auto seccomp_compat_arches = std::to_array<std::uint32_t>({SCMP_ARCH_ARM});
#else
inline constexpr std::array<std::uint32_t, 0> seccomp_compat_arches{};
#endif

BASHEXEC_DECL seccomp_filter::seccomp_filter(seccomp_parts parts) : parts_(parts) {
  if (!parts.any()) throw std::logic_error("seccomp_filter: no part selected");
  if (!seccomp_filter_supported) throw std::logic_error("seccomp_filter: unsupported architecture");
  if (parts.metadata_writes) code_ = unnamed_prefix();
  const std::vector<sock_filter> body = build_with_libseccomp(parts);
  code_.insert(code_.end(), body.begin(), body.end());
  if (code_.size() > BPF_MAXINSNS) throw std::logic_error("seccomp_filter: program longer than BPF_MAXINSNS");
  prog_.len = static_cast<unsigned short>(code_.size());
  prog_.filter = code_.data();
}

BASHEXEC_DECL void seccomp_filter::context_deleter::operator()(void* ctx) const noexcept { seccomp_release(ctx); }

BASHEXEC_DECL void seccomp_filter::check(int rc, const char* what) {
  if (rc < 0) throw std::system_error(-rc, std::generic_category(), std::string("libseccomp: ") + what);
}

BASHEXEC_DECL std::vector<sock_filter> seccomp_filter::unnamed_prefix() {
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

BASHEXEC_DECL void seccomp_filter::refuse(void* ctx, const char* name, int error, const scmp_arg_cmp* arg) {
  const int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR) throw std::logic_error(std::string("libseccomp does not know syscall ") + name);
  check(seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(static_cast<std::uint32_t>(error)), nr, arg ? 1U : 0U, arg),
        name);
}

BASHEXEC_DECL std::vector<sock_filter> seccomp_filter::build_with_libseccomp(seccomp_parts parts) {
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

BASHEXEC_DECL std::vector<sock_filter> seccomp_filter::export_program(void* ctx) {
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

BASHEXEC_DECL const seccomp_filter& seccomp_filter_cache::get(seccomp_parts parts) {
  const std::size_t slot = (parts.network ? 2U : 0U) + (parts.metadata_writes ? 1U : 0U);
  std::call_once(once_[slot], [&] { filters_[slot].emplace(parts); });
  return *filters_[slot];
}

BASHEXEC_DECL int install_seccomp_filter(const seccomp_filter& filter) noexcept {
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

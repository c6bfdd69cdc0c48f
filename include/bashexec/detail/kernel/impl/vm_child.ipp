// The bodies of detail/kernel/vm_child.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/vm_child.hpp"

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstring>

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bashexec/detail/kernel/unique_fd.hpp"

namespace bashexec::detail {

BASHEXEC_DECL BASHEXEC_CHILD_CODE void child_exit(int code) noexcept {
  for (;;) {
    child_barrier();
    ::syscall(SYS_exit_group, code);
  }
}

BASHEXEC_DECL all_signals_blocked::all_signals_blocked() noexcept {
  sigset_t all;
  std::memset(&all, 0xff, sizeof all);
  std::memset(&saved_, 0, sizeof saved_);
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &saved_, kernel_sigset_bytes);
}

BASHEXEC_DECL vfork_stack::vfork_stack() {
  const long page_size = ::sysconf(_SC_PAGESIZE);
  page_ = page_size > 0 ? static_cast<std::size_t>(page_size) : 4096;
  size_ = (vfork_stack_bytes + page_ - 1) / page_ * page_ + page_;
  void* base = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE,
                      -1, 0);
  if (base == MAP_FAILED) throw_syscall("mmap (child stack)");
  base_ = static_cast<char*>(base);
  if (::mprotect(base_, page_, PROT_NONE) != 0) {
    const int error = errno;
    ::munmap(base_, size_);
    throw_syscall("mprotect (child stack guard)", error);
  }
}

BASHEXEC_DECL vfork_stack::~vfork_stack() { ::munmap(base_, size_); }

}  // namespace bashexec::detail

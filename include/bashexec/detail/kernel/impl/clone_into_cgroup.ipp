// The bodies of detail/kernel/clone_into_cgroup.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/clone_into_cgroup.hpp"

#include <atomic>
#include <cerrno>

namespace bashexec::detail {

BASHEXEC_DECL long vfork_clone3(const clone_args_v2& args, int (*fn)(void*), void* arg) noexcept {
#if defined(__x86_64__)
  // fn and arg sit in callee-saved registers the kernel copies to the child;
  // rcx and r11 are the two that `syscall` overwrites. The child's stack top
  // is page-aligned, so rsp is 16-byte aligned at the call, as the ABI wants.
  long result;
  register int (*fn_reg)(void*) asm("r12") = fn;
  register void* arg_reg asm("r13") = arg;
  asm volatile(
      "syscall\n\t"
      "testq %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xorl %%ebp, %%ebp\n\t"  // the child's outermost frame
      "movq %%r13, %%rdi\n\t"
      "callq *%%r12\n\t"
      "movl %%eax, %%edi\n\t"
      "movl $231, %%eax\n\t"  // exit_group
      "syscall\n\t"
      "hlt\n"
      "1:"
      : "=a"(result)
      : "0"(435L), "D"(&args), "S"(sizeof args), "r"(fn_reg), "r"(arg_reg)
      : "rcx", "r11", "memory", "cc");
  return result;
#else
  (void)args;
  (void)fn;
  (void)arg;
  return -ENOSYS;
#endif
}

BASHEXEC_DECL std::atomic<bool>& clone_into_cgroup_refused() noexcept {
  static std::atomic<bool> refused{false};
  return refused;
}

}  // namespace bashexec::detail

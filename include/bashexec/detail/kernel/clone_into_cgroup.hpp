// detail/kernel/clone_into_cgroup: fork_exec's first way to start a child —
// clone3(CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_INTO_CGROUP) on the
// child's own stack, so the child is created inside its per-spawn cgroup
// and never migrates into it (issue 27).
//
// Why: writing a pid to cgroup.procs takes the threadgroup rwsem for
// writing, which waits for an RCU grace period unless a writer passed
// recently — 8–10 ms on an idle machine, i.e. on almost every call an agent
// makes (they arrive seconds apart). A child born in the cgroup pays none of
// it, and is contained from its first instruction.
//
// How: clone3 with a stack cannot go through syscall(): the child would
// return into libc's wrapper on a stack with no frame. A few instructions of
// inline assembly (as glibc's own clone3.S) make the call and, in the child,
// call `fn(arg)` on the new stack and exit_group with its result; `fn` is
// detail::child_main, which keeps the child's rules (fork_exec_child.hpp).
// Only x86_64 has the trampoline today; elsewhere `vfork_clone3` answers
// -ENOSYS and fork_exec falls back to clone() and the cgroup.procs write.
#pragma once

#include <atomic>
#include <cstdint>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

inline constexpr std::uint64_t clone_vm_flag = 0x00000100;              // CLONE_VM
inline constexpr std::uint64_t clone_vfork_flag = 0x00004000;           // CLONE_VFORK
inline constexpr std::uint64_t clone_into_cgroup_flag = 0x200000000ULL;  // CLONE_INTO_CGROUP (5.7+)

/// struct clone_args, version 2 (88 bytes: set_tid and cgroup, Linux 5.7+).
struct clone_args_v2 {
  std::uint64_t flags;
  std::uint64_t pidfd;
  std::uint64_t child_tid;
  std::uint64_t parent_tid;
  std::uint64_t exit_signal;
  std::uint64_t stack;  // lowest address; the kernel starts the child at stack + stack_size
  std::uint64_t stack_size;
  std::uint64_t tls;
  std::uint64_t set_tid;
  std::uint64_t set_tid_size;
  std::uint64_t cgroup;
};

/// Raw clone3(args) whose child runs `fn(arg)` on `args.stack` and exits
/// with its result. The parent gets the child's pid, or -errno (the child
/// never ran); -ENOSYS where this architecture has no trampoline. Sets no
/// errno.
BASHEXEC_DECL long vfork_clone3(const clone_args_v2& args, int (*fn)(void*), void* arg) noexcept;

/// Process-wide: set once the kernel or a seccomp profile refused
/// clone3(CLONE_INTO_CGROUP) (ENOSYS, EPERM, E2BIG or EINVAL); from then on
/// fork_exec joins cgroups by writing cgroup.procs in the child.
BASHEXEC_DECL std::atomic<bool>& clone_into_cgroup_refused() noexcept;

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/clone_into_cgroup.ipp"
#endif

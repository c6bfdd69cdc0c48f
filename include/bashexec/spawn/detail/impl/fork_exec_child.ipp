// The bodies of spawn/detail/fork_exec_child.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/spawn/detail/fork_exec_child.hpp"

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bashexec/detail/kernel/unique_fd.hpp"

namespace bashexec::detail {

// The child's steps are raw system calls (see the file comment): syscall()
// sets errno on failure — in the suspended parent thread's slot under
// CLONE_VM, which is accepted — and touches nothing else.

BASHEXEC_DECL BASHEXEC_CHILD_CODE void child_fail(int error_fd, child_stage stage, int error,
                                                  int index) noexcept {
  const child_report report{stage, error, index};
  while (::syscall(SYS_write, error_fd, &report, sizeof report) < 0 && errno == EINTR) {
  }
  child_exit(127);
}

BASHEXEC_DECL BASHEXEC_CHILD_CODE int child_main(void* arg) noexcept {
  const child_context& ctx = *static_cast<const child_context*>(arg);
  child_enter(ctx);
  child_finish(ctx);
}

BASHEXEC_DECL BASHEXEC_CHILD_CODE void child_enter(const child_context& ctx) noexcept {
  const int error_fd = ctx.error_fd;
  // Born pinned to the parent's CPU: the host's mask back before anything
  // else (it never moves this task; the exec may place it anywhere). A
  // failure leaves the command on one CPU, slower but otherwise the same.
  if (ctx.affinity) ::syscall(SYS_sched_setaffinity, 0, ctx.affinity_bytes, ctx.affinity);
  if (::syscall(SYS_setsid) < 0) child_fail(error_fd, child_stage::setsid, errno);
  // "0" is "the writing process"; a vfork child is its own thread group, so
  // only it moves, never the suspended parent.
  if (ctx.cgroup_procs_fd >= 0)
    while (::syscall(SYS_write, ctx.cgroup_procs_fd, "0", 1) != 1)
      if (errno != EINTR) child_fail(error_fd, child_stage::cgroup, errno);

  // Dispositions first, mask second: a signal arriving in between must find
  // the default action, never a host handler running in the child. The raw
  // call also resets glibc's two internal signals, which sigaction() refuses
  // (so their handlers could otherwise run here once unblocked). An all-zero
  // kernel sigaction is SIG_DFL, no flags, empty mask, on every layout.
  // Errors are ignored: exec resets handlers anyway; it is SIG_IGN that
  // would otherwise survive.
  unsigned long dfl[8] = {};
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::syscall(SYS_rt_sigaction, sig, dfl, nullptr, kernel_sigset_bytes);
  unsigned long empty[4] = {};
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, empty, nullptr, kernel_sigset_bytes);

  for (int i = 0; i < ctx.hook_count; ++i)
    if (int error = ctx.hooks[i].run(ctx.hooks[i].context); error != 0)
      child_fail(error_fd, child_stage::hook, error, i);
}

BASHEXEC_DECL BASHEXEC_CHILD_CODE void child_finish(const child_context& ctx) noexcept {
  int error_fd = ctx.error_fd;
  // Move the error pipe and every source above the target range before any
  // renumbering, so a source that already sits on a target number is not
  // clobbered. dup3 (not dup2, which some architectures lack) cannot see
  // equal numbers here: every scratch copy is >= count > its target.
  const int first_free = ctx.count;
  if (long moved = ::syscall(SYS_fcntl, error_fd, F_DUPFD_CLOEXEC, first_free); moved >= 0)
    error_fd = static_cast<int>(moved);
  else
    child_fail(error_fd, child_stage::dup, errno);
  for (int i = 0; i < ctx.count; ++i) {
    ctx.scratch[i] = static_cast<int>(::syscall(SYS_fcntl, ctx.sources[i], F_DUPFD_CLOEXEC, first_free));
    if (ctx.scratch[i] < 0) child_fail(error_fd, child_stage::dup, errno);
  }
  for (int i = 0; i < ctx.count; ++i)
    if (::syscall(SYS_dup3, ctx.scratch[i], i, 0) < 0) child_fail(error_fd, child_stage::dup, errno);
  // A session leader without a terminal takes the one on fd 0; it is this
  // command's own, so nothing is stolen (the argument 0 never steals).
  if (ctx.controlling_terminal && ::syscall(SYS_ioctl, 0, TIOCSCTTY, 0) != 0)
    child_fail(error_fd, child_stage::terminal, errno);

  if (ctx.workdir[0] != '\0' && ::syscall(SYS_chdir, ctx.workdir) != 0)
    child_fail(error_fd, child_stage::chdir, errno);

  // Everything from `count` up — host descriptors without O_CLOEXEC, the
  // scratch copies, the error pipe — closes at exec. The error pipe keeps
  // working until then, which is the point of close-on-exec over close.
  if (::syscall(sys_close_range, static_cast<unsigned>(first_free), ~0U, close_range_cloexec_flag) != 0) {
    if (errno != ENOSYS && errno != EINVAL) child_fail(error_fd, child_stage::cloexec, errno);
    // Kernels before 5.11: mark each possible descriptor.
    std::uint64_t limit[2] = {};  // struct rlimit64 {cur, max}
    std::uint64_t top = ::syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, nullptr, limit) == 0 ? limit[0] : 1024;
    if (top > 65536) top = 65536;
    for (int fd = first_free; fd < static_cast<int>(top); ++fd) ::syscall(SYS_fcntl, fd, F_SETFD, FD_CLOEXEC);
  }

  // prlimit64 on ourselves: the limits are per process (this child has its
  // own, no CLONE_THREAD), so the host's stay untouched.
  for (int i = 0; i < ctx.limit_count; ++i) {
    const std::uint64_t value[2] = {ctx.limits[i].soft, ctx.limits[i].hard};  // struct rlimit64
    if (::syscall(SYS_prlimit64, 0, ctx.limits[i].resource, value, nullptr) != 0)
      child_fail(error_fd, child_stage::rlimit, errno, i);
  }

  ::syscall(SYS_execve, ctx.path, ctx.argv, ctx.envp);
  child_fail(error_fd, child_stage::execve, errno);
}

}  // namespace bashexec::detail

// The bodies of spawn/fork_exec.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/spawn/fork_exec.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/detail/kernel/clone_into_cgroup.hpp"
#include "bashexec/detail/kernel/pidfd.hpp"
#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/text/c_strings.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/spawn/detail/fork_exec_child.hpp"

namespace bashexec {

BASHEXEC_DECL process_handle fork_exec::spawn(const launch_plan& plan) const {
  if (plan.argv.empty()) throw std::invalid_argument("launch_plan.argv must not be empty");

  std::vector<char*> argv = detail::c_string_array(plan.argv);
  std::vector<char*> envp = detail::c_string_array(plan.env);
  const std::string workdir = plan.workdir.string();

  detail::unique_fd dev_null;
  const std::vector<int> sources = detail::child_sources(plan, dev_null);
  std::vector<int> scratch(sources.size(), -1);

  detail::pipe_pair errors = detail::make_pipe();
  detail::child_context ctx{plan.argv.front().c_str(),
                            argv.data(),
                            envp.data(),
                            workdir.c_str(),
                            sources.data(),
                            scratch.data(),
                            static_cast<int>(sources.size()),
                            errors.write.get(),
                            plan.hooks.begin(),
                            static_cast<int>(plan.hooks.size()),
                            plan.limits.begin(),
                            static_cast<int>(plan.limits.size()),
                            plan.cgroup_procs_fd,
                            plan.controlling_terminal};

  auto [pid, pidfd] = clone_child(ctx, plan.cgroup_procs_fd >= 0 ? plan.cgroup_fd : -1);
  errors.write.reset();  // our copy: EOF must mean "the child exec'd or died"

  // After a vfork-style clone the child has already exec'd or exited, so
  // this returns at once; after a real fork it waits for the exec.
  detail::child_report report{};
  std::size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(&report);
  while (got < sizeof report) {
    ssize_t n = ::read(errors.read.get(), bytes + got, sizeof report - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got == 0) return process_handle(pid, std::move(pidfd));

  detail::reap_blocking(pid);
  if (got != sizeof report) throw infrastructure_error("fork_exec: truncated error report from the child");
  detail::throw_child_failure(plan, workdir, report);
}

BASHEXEC_DECL std::vector<int> detail::child_sources(const launch_plan& plan, unique_fd& dev_null) {
  auto stream = [&](int fd) {
    if (fd >= 0) return fd;
    if (!dev_null) {
      dev_null.reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
      if (!dev_null) throw_syscall("open /dev/null");
    }
    return dev_null.get();
  };
  std::vector<int> sources{stream(plan.stdin_fd), stream(plan.stdout_fd), stream(plan.stderr_fd)};
  sources.insert(sources.end(), plan.inherited_fds.begin(), plan.inherited_fds.end());
  return sources;
}

BASHEXEC_DECL bool fork_exec::born_in_cgroup(detail::child_context& ctx, int cgroup_fd, void* stack_top,
                                           pid_t& pid, int& pidfd) noexcept {
  if (cgroup_fd < 0 || detail::clone_into_cgroup_refused().load(std::memory_order_relaxed)) return false;
  detail::clone_args_v2 args{};
  args.flags = detail::clone_vm_flag | detail::clone_vfork_flag | detail::clone_pidfd_flag |
               detail::clone_into_cgroup_flag;
  args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<std::uint64_t>(static_cast<char*>(stack_top) - detail::vfork_stack_bytes);
  args.stack_size = detail::vfork_stack_bytes;
  args.cgroup = static_cast<std::uint64_t>(cgroup_fd);
  // The child is in its cgroup already: it must not write cgroup.procs.
  // (It reads `ctx` through the shared address space; we are suspended
  // until it exec'd or exited, so restoring the field after is race-free.)
  const int procs_fd = ctx.cgroup_procs_fd;
  ctx.cgroup_procs_fd = -1;
  // Where the child starts: born into another cgroup, a vfork child was
  // placed on the other, idle CPU about one call in four when calls are
  // spaced (waking it costs ~250 µs: 1.19x posix_spawn_executor at 20 ms
  // apart, 1.05x pinned). So this thread is pinned to its CPU around the
  // clone; the child inherits that and restores the host's mask at once.
  cpu_set_t host_mask;
  bool pinned = false;
  if (::sched_getaffinity(0, sizeof host_mask, &host_mask) == 0 && CPU_COUNT(&host_mask) > 1) {
    const int cpu = ::sched_getcpu();
    cpu_set_t here;
    CPU_ZERO(&here);
    if (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &host_mask)) {
      CPU_SET(cpu, &here);
      pinned = ::sched_setaffinity(0, sizeof here, &here) == 0;
    }
  }
  if (pinned) {
    ctx.affinity = &host_mask;
    ctx.affinity_bytes = sizeof host_mask;
  }
  const long result = detail::vfork_clone3(args, &detail::child_main, &ctx);
  if (pinned) ::sched_setaffinity(0, sizeof host_mask, &host_mask);
  ctx.affinity = nullptr;
  ctx.affinity_bytes = 0;
  ctx.cgroup_procs_fd = procs_fd;
  if (result >= 0) {
    pid = static_cast<pid_t>(result);
    return true;
  }
  pidfd = -1;
  // A kernel before 5.7 (EINVAL: unknown flag; E2BIG: larger clone_args;
  // ENOSYS before 5.3), a seccomp profile (ENOSYS, EPERM) or an architecture
  // without the trampoline: never again in this process. Anything else
  // (EAGAIN, ENOMEM, a cgroup refusing this child) goes to the clone() path
  // for this call, which reports it in its own terms.
  if (result == -ENOSYS || result == -EPERM || result == -E2BIG || result == -EINVAL)
    detail::clone_into_cgroup_refused().store(true, std::memory_order_relaxed);
  return false;
}

BASHEXEC_DECL fork_exec::cloned fork_exec::clone_child(detail::child_context& ctx, int cgroup_fd) {
  // Each path is tried until the kernel (or a seccomp filter) says it is
  // not there; the answer is kept for the life of the process.
  static std::atomic<bool> vfork_missing{false};
  static std::atomic<bool> clone3_missing{false};
  int pidfd = -1;
  pid_t pid = -1;
  int error = 0;
  const char* call = "clone";

  if (!vfork_missing.load(std::memory_order_relaxed)) {
    detail::vfork_stack stack;
    {
      detail::all_signals_blocked blocked;
      if (!born_in_cgroup(ctx, cgroup_fd, stack.top(), pid, pidfd)) {
        pid = ::clone(&detail::child_main, stack.top(),
                      CLONE_VM | CLONE_VFORK | static_cast<int>(detail::clone_pidfd_flag) | SIGCHLD, &ctx, &pidfd);
        // Only meaningful when clone() returned -1 (the child never ran);
        // after a successful clone errno holds whatever the child left in
        // this thread's slot.
        error = errno;
      }
    }
    // `stack` is unmapped here: CLONE_VFORK resumed us only after the
    // child exec'd or exited.
    if (pid < 0 && (error == EINVAL || error == ENOSYS || error == EPERM)) {
      vfork_missing.store(true);
      pidfd = -1;
    }
  }

  if (vfork_missing.load(std::memory_order_relaxed)) {
    detail::all_signals_blocked blocked;
    if (!clone3_missing.load(std::memory_order_relaxed)) {
      call = "clone3";
      detail::clone3_args args{};
      args.flags = detail::clone_pidfd_flag;
      args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
      args.exit_signal = SIGCHLD;
      pid = static_cast<pid_t>(::syscall(detail::sys_clone3, &args, sizeof args));
      if (pid == 0) detail::child_main(&ctx);
      if (pid < 0 && (errno == ENOSYS || errno == EPERM)) clone3_missing.store(true);
    }
    if (pid < 0 && clone3_missing.load(std::memory_order_relaxed)) {
      call = "fork";
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
      pid = ::_Fork();  // no atfork handlers: nothing may allocate in the child
#else
      pid = ::fork();
#endif
      if (pid == 0) detail::child_main(&ctx);
    }
    error = errno;
  }

  if (pid < 0) detail::throw_syscall(call, error);
  if (pidfd < 0) {
    pidfd = static_cast<int>(::syscall(detail::sys_pidfd_open, pid, 0));
    if (pidfd < 0) {
      error = errno;
      ::kill(pid, SIGKILL);
      detail::reap_blocking(pid);
      detail::throw_syscall("pidfd_open", error);
    }
  }
  return {pid, detail::unique_fd(pidfd)};
}

BASHEXEC_DECL void detail::throw_child_failure(const launch_plan& plan, const std::string& workdir,
                                              const child_report& report) {
  const char* text = std::strerror(report.error);
  switch (report.stage) {
    case child_stage::hook: {
      const auto i = static_cast<std::size_t>(report.index);
      const char* stage = i < plan.hooks.size() ? plan.hooks[i].stage : nullptr;
      throw pre_exec_failed(stage ? stage : "pre-exec", report.error);
    }
    case child_stage::chdir:
      throw infrastructure_error(fmt::format("chdir {}: {}", workdir, text));
    case child_stage::execve:
      throw infrastructure_error(fmt::format("execve {}: {}", plan.argv.front(), text));
    case child_stage::setsid:
      throw infrastructure_error(fmt::format("setsid: {}", text));
    case child_stage::dup:
      throw infrastructure_error(fmt::format("dup2: {}", text));
    case child_stage::cloexec:
      throw infrastructure_error(fmt::format("close_range: {}", text));
    case child_stage::rlimit: {
      const auto i = static_cast<std::size_t>(report.index);
      const std::string which = i < plan.limits.size() ? resource_name(plan.limits[i].resource) : "?";
      throw infrastructure_error(fmt::format("setrlimit {}: {}", which, text));
    }
    case child_stage::cgroup:
      throw infrastructure_error(fmt::format("join cgroup (write \"0\" to cgroup.procs): {}", text));
    case child_stage::receive:
      throw infrastructure_error(fmt::format("prespawned: receive the command: {}", text));
    case child_stage::terminal:
      throw infrastructure_error(fmt::format("TIOCSCTTY (take the command's terminal): {}", text));
  }
  throw infrastructure_error(fmt::format("fork_exec: child failed at stage {}: {}",
                                         static_cast<int>(report.stage), text));
}

}  // namespace bashexec

// The bodies of spawn/detail/warm_process.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/spawn/detail/warm_process.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/detail/kernel/clone_into_cgroup.hpp"
#include "bashexec/detail/kernel/pidfd.hpp"
#include "bashexec/detail/text/c_strings.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/spawn/fork_exec.hpp"

namespace bashexec::detail {

namespace prespawn {

/// Reads one child_report, or the "ready" byte when `ready` is given: true
/// with the report; false at end of file (or the byte). A partial report
/// throws.
inline bool read_report(int fd, child_report& report, bool* ready = nullptr) {
  std::size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(&report);
  for (;;) {
    const ssize_t n = ::recv(fd, bytes + got, sizeof report - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ECONNRESET) break;
    if (n < 0) throw_syscall("recv (prespawned report)");
    if (n == 0) break;
    if (ready && got == 0 && n == 1) {  // a report is one message, never one byte
      *ready = true;
      return false;
    }
    got += static_cast<std::size_t>(n);
    if (got == sizeof report) return true;
  }
  if (got == 0) return false;
  throw infrastructure_error("prespawned: truncated report from the waiting process");
}

}  // namespace prespawn

BASHEXEC_DECL warm_process warm_process::start(const launch_plan& key_plan, std::optional<cgroup> home) {
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) throw_syscall("socketpair");
  warm_process process;
  process.channel_.reset(ends[0]);
  unique_fd child_end(ends[1]);

  process.control_ = std::make_unique<waiter_control>();
  process.stack_ = std::make_unique<vfork_stack>();
  waiter_control& control = *process.control_;
  control.channel = child_end.get();
  control.enter.error_fd = child_end.get();
  control.enter.hooks = key_plan.hooks.begin();
  control.enter.hook_count = static_cast<int>(key_plan.hooks.size());

  int pidfd = -1;
  pid_t pid = -1;
  int error = 0;
  {
    all_signals_blocked blocked;
    if (home && !clone_into_cgroup_refused().load(std::memory_order_relaxed)) {
      // Born in its home cgroup: the claim moves nothing (clone_into_cgroup.hpp).
      clone_args_v2 args{};
      args.flags = clone_vm_flag | clone_pidfd_flag | clone_into_cgroup_flag;
      args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
      args.exit_signal = SIGCHLD;
      args.stack = reinterpret_cast<std::uint64_t>(static_cast<char*>(process.stack_->top()) - vfork_stack_bytes);
      args.stack_size = vfork_stack_bytes;
      args.cgroup = static_cast<std::uint64_t>(home->dir_fd());
      const long result = vfork_clone3(args, &waiting_child_main, &control);
      if (result >= 0) {
        pid = static_cast<pid_t>(result);
        process.home_.emplace(std::move(*home));
      } else {
        pidfd = -1;
        if (result == -ENOSYS || result == -EPERM || result == -E2BIG || result == -EINVAL)
          clone_into_cgroup_refused().store(true, std::memory_order_relaxed);
      }
    }
    if (pid < 0) {
      pid = ::clone(&waiting_child_main, process.stack_->top(),
                    CLONE_VM | static_cast<int>(clone_pidfd_flag) | SIGCHLD, &control, &pidfd);
      error = errno;
    }
  }
  home.reset();  // not born in it (or moved into the process): removed here
  child_end.reset();
  if (pid < 0) throw_syscall("clone (prespawned)", error);
  process.pid_ = pid;
  if (pidfd < 0) {  // a kernel before 5.2 ignores CLONE_PIDFD
    pidfd = static_cast<int>(::syscall(sys_pidfd_open, pid, 0));
    if (pidfd < 0) {
      error = errno;
      ::kill(pid, SIGKILL);
      reap_blocking(pid);
      process.pid_ = -1;
      throw_syscall("pidfd_open", error);
    }
  }
  process.pidfd_.reset(pidfd);

  // Wait for "ready": the hooks ran (this thread stays blocked while the
  // process's steps may set errno in its TLS; spawn/detail/prespawn_child.hpp).
  child_report report{};
  bool ready = false;
  if (prespawn::read_report(process.channel_.get(), report, &ready)) {
    process.discard();
    throw_child_failure(key_plan, key_plan.workdir.string(), report);
  }
  if (!ready) {
    process.discard();
    throw infrastructure_error("prespawned: the waiting process died before it was ready");
  }
  return process;
}

BASHEXEC_DECL std::optional<process_handle> warm_process::claim(const launch_plan& plan, int patience_ms) && {
  unique_fd dev_null;
  const std::vector<int> fds = child_sources(plan, dev_null);

  // Born in its home cgroup: the call is contained by that one. Else into
  // the call's cgroup before the command exists in the process (the cold
  // child writes "0" itself; this one is not running yet).
  if (home_ && plan.cgroup_procs_fd < 0) return std::nullopt;
  if (plan.cgroup_procs_fd >= 0 && !home_) {
    const std::string pid = std::to_string(pid_);
    ssize_t n;
    while ((n = ::write(plan.cgroup_procs_fd, pid.data(), pid.size())) < 0 && errno == EINTR) {
    }
    if (n < 0 && errno == ESRCH) return std::nullopt;
    if (n != static_cast<ssize_t>(pid.size()))
      throw infrastructure_error(
          fmt::format("join cgroup (write pid to cgroup.procs): {}", std::strerror(n < 0 ? errno : EIO)));
  }

  // The call's context, in this thread's memory, read by the process while
  // this thread waits below for the exec (as fork_exec's vfork child does).
  std::vector<char*> argv = c_string_array(plan.argv);
  std::vector<char*> envp = c_string_array(plan.env);
  const std::string workdir = plan.workdir.string();
  child_context ctx;
  ctx.path = plan.argv.front().c_str();
  ctx.argv = argv.data();
  ctx.envp = envp.data();
  ctx.workdir = workdir.c_str();
  ctx.limits = plan.limits.begin();
  ctx.limit_count = static_cast<int>(plan.limits.size());
  ctx.controlling_terminal = plan.controlling_terminal;

  claim_message message;
  message.context = reinterpret_cast<std::uintptr_t>(&ctx);
  message.fd_count = static_cast<std::int32_t>(fds.size());
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_claim_fds)] = {};
  iovec part{&message, sizeof message};
  msghdr header{};
  header.msg_iov = &part;
  header.msg_iovlen = 1;
  header.msg_control = control;
  header.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
  cmsghdr* rights = CMSG_FIRSTHDR(&header);
  rights->cmsg_level = SOL_SOCKET;
  rights->cmsg_type = SCM_RIGHTS;
  rights->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(rights), fds.data(), sizeof(int) * fds.size());

  ssize_t sent;
  while ((sent = ::sendmsg(channel_.get(), &header, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (sent < 0 && errno != EPIPE && errno != ECONNRESET) throw_syscall("sendmsg (prespawned claim)");

  // A process stopped while it waited (SIGSTOP from an unconfined command
  // of the host's user) would hold this call forever: one that has not taken
  // its command within `patience_ms` is dropped like a dead one. Once it
  // has, the wait is as unbounded as fork_exec's for its vfork child.
  if (sent >= 0) {
    pollfd ready{channel_.get(), POLLIN, 0};
    int polled;
    while ((polled = ::poll(&ready, 1, patience_ms)) < 0 && errno == EINTR) {
    }
    if (polled == 0 && !__atomic_load_n(&control_->claimed, __ATOMIC_ACQUIRE)) return std::nullopt;
  }

  // End of file at the exec — or a failed step's report. End of file
  // without the claimed flag: it died before it read the command.
  child_report report{};
  if (!prespawn::read_report(channel_.get(), report)) {
    if (sent < 0 || !__atomic_load_n(&control_->claimed, __ATOMIC_ACQUIRE)) return std::nullopt;
    channel_.reset();
    control_.reset();
    stack_.reset();  // its new image no longer uses it
    process_handle handle(std::exchange(pid_, -1), std::move(pidfd_));
    if (home_) {
      handle.place_in_cgroup(home_->release());
      home_.reset();
    }
    return handle;
  }
  discard();
  throw_child_failure(plan, workdir, report);
}

BASHEXEC_DECL bool warm_process::waiting() const noexcept {
  if (!pidfd_) return false;
  siginfo_t info{};
  int r;
  while ((r = ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info,
                       WEXITED | WSTOPPED | WNOHANG | WNOWAIT)) < 0 &&
         errno == EINTR) {
  }
  if (r < 0) return true;  // cannot tell: the claim's patience decides
  return info.si_pid == 0;
}

BASHEXEC_DECL void warm_process::discard() noexcept {
  channel_.reset();
  if (pidfd_) {
    ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    siginfo_t info{};
    while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info, WEXITED) < 0 &&
           errno == EINTR) {
    }
    pidfd_.reset();
  }
  pid_ = -1;
  // Only now that it is gone: its stack and control block, and its cgroup.
  control_.reset();
  stack_.reset();
  home_.reset();
}

}  // namespace bashexec::detail

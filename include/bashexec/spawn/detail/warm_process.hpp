// spawn/detail/warm_process: one waiting process of the prespawned spawn policy
// (spawn/prespawned.hpp) as the parent holds it — its pid and pidfd, the
// parent's end of its socket, its stack and control block — with the two
// things done with one: start it (for a key's hooks and limits) and hand it
// a call's plan (the claim). The process side is spawn/detail/prespawn_child.hpp.
#pragma once

#include <memory>
#include <optional>

#include <sys/types.h>

#include "bashexec/detail/kernel/cgroup.hpp"
#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/detail/text/fixed_list.hpp"
#include "bashexec/launch.hpp"
#include "bashexec/process_handle.hpp"
#include "bashexec/spawn/detail/fork_exec_child.hpp"
#include "bashexec/spawn/detail/prespawn_child.hpp"

namespace bashexec::detail {

/// A waiting process. Killed (SIGKILL through its pidfd) and reaped when let
/// go of without being handed out; its stack is unmapped only after that, or
/// after its exec.
class warm_process {
 public:
  /// Clones one waiting process that runs `hooks` (whose contexts must
  /// outlive it) and then waits. With a `home` cgroup (one the pool made
  /// beside the executor's per-spawn cgroups) it is created inside it by
  /// clone3(CLONE_INTO_CGROUP) where the kernel allows, so no call ever
  /// moves it; where it does not, `home` is removed and the claim moves it
  /// into the call's cgroup instead. Returns once it is waiting; throws
  /// infrastructure_error when the clone fails, and the hook's exception
  /// (pre_exec_failed, as fork_exec would) when a hook fails.
  static warm_process start(const launch_plan& key_plan, std::optional<cgroup> home = std::nullopt);

  warm_process() = default;
  warm_process(warm_process&&) noexcept = default;
  warm_process& operator=(warm_process&& other) noexcept {
    discard();
    pid_ = other.pid_;
    pidfd_ = std::move(other.pidfd_);
    channel_ = std::move(other.channel_);
    control_ = std::move(other.control_);
    stack_ = std::move(other.stack_);
    home_.reset();
    if (other.home_) home_.emplace(std::move(*other.home_));
    other.home_.reset();
    return *this;
  }
  ~warm_process() { discard(); }

  /// Hands `plan` to the process: the call's descriptors, argv, env and
  /// workdir. A process born in its home cgroup stays there, and the handle
  /// names that cgroup (process_handle::placed_in_cgroup); any other is moved
  /// into the plan's cgroup first. A process with a home and a plan without
  /// a cgroup do not match: empty. The handle once it
  /// exec'd; empty when it had died before it got the command, or did not
  /// take it within `patience` (it is stopped, or the machine is that
  /// loaded): the caller drops it and takes another. Throws what fork_exec
  /// would for a failing step.
  std::optional<process_handle> claim(const launch_plan& plan, int patience_ms = default_patience_ms) &&;
  static constexpr int default_patience_ms = 10000;

  pid_t pid() const noexcept { return pid_; }

  /// False when it is stopped (a SIGSTOP from a command of the host's
  /// user) or dead: a claim would wait for it in vain. One waitid that
  /// consumes nothing.
  bool waiting() const noexcept;

  /// SIGKILL, then the reap; nothing once handed out or discarded. Its home
  /// cgroup is removed after that.
  void discard() noexcept;

  /// Whether it was born in a home cgroup (tests).
  bool has_home() const noexcept { return home_.has_value(); }

 private:
  pid_t pid_ = -1;
  unique_fd pidfd_;
  unique_fd channel_;
  std::unique_ptr<waiter_control> control_;
  std::unique_ptr<vfork_stack> stack_;
  std::optional<cgroup> home_;
};

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/spawn/detail/impl/warm_process.ipp"
#endif

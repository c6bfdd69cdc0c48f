// process_handle: what a spawn policy hands back — one started child, the
// leader of its own session and process group, held through a pidfd.
//
// The engine touches the child only through this handle (reap, wait, signal
// the group), never through a raw pid of its own, so a spawn policy may hand
// out a process it created earlier (a pool of prespawned processes): all
// that matters is that the handle's pid leads the group the command runs in
// and that its pidfd reports that process's exit — and, under cgroup
// containment, that the process is in the plan's cgroup, or in one the
// policy made beside it and names here (`placed_in_cgroup`).
#pragma once

#include <csignal>
#include <filesystem>
#include <optional>
#include <utility>

#include <sys/types.h>

#include "bashexec/detail/kernel/pidfd.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/exit_facts.hpp"
#include "bashexec/unique_fd.hpp"

namespace bashexec {

class process_handle {
 public:
  process_handle() = default;
  /// Takes `pidfd`, a pidfd of `pid`, which must be the caller's own child.
  process_handle(pid_t pid, unique_fd pidfd) noexcept : pid_(pid), pidfd_(std::move(pidfd)) {}

  /// The child's pid, which is also its process-group and session id. It
  /// stays valid after the reap (as the group's name: members may outlive
  /// the leader).
  pid_t pid() const noexcept { return pid_; }
  /// The pidfd to poll for the exit; -1 once reaped (or for an empty handle).
  int pidfd() const noexcept { return pidfd_.get(); }
  /// True until the child has been reaped.
  bool unreaped() const noexcept { return static_cast<bool>(pidfd_); }

  /// Reaps the child if it has exited (the pidfd is closed then); empty
  /// while it runs or once already reaped.
  std::optional<exit_facts> try_reap();

  /// Blocks until the child exits and reaps it; nothing when already reaped.
  /// For paths that already killed the group (a run torn down early).
  void wait_blocking() noexcept;

  /// Sends `signo` to every member of the child's process group; a group
  /// already empty is fine.
  void signal_group(int signo) const noexcept {
    if (pid_ > 0) ::kill(-pid_, signo);
  }

  /// Under cgroup containment a policy may create its process, ahead of the
  /// call, in a cgroup of its own making instead of the plan's
  /// (launch_plan::cgroup_fd): one directly in the same parent directory,
  /// holding nothing else, whose name does not begin with `spawn-`. It names
  /// that cgroup here and lets go of it; the engine then contains the call
  /// by it (and reuses it afterwards) and returns the plan's unused one. The
  /// prespawned pool does this so that its waiting processes are born in
  /// their cgroup (a move into a cgroup costs a grace period on an idle
  /// machine). Empty: the process is in the plan's cgroup, if it has one.
  void place_in_cgroup(std::filesystem::path cgroup) { placed_in_cgroup_ = std::move(cgroup); }
  const std::filesystem::path& placed_in_cgroup() const noexcept { return placed_in_cgroup_; }

 private:
  pid_t pid_ = -1;
  unique_fd pidfd_;
  std::filesystem::path placed_in_cgroup_;
};

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/impl/process_handle.ipp"
#endif

// launch: the seam between policies. A confinement edits a `launch_plan`;
// a spawn policy turns it into a running process group (a `process_handle`,
// process_handle.hpp).
//
// Every spawn policy guarantees, for every child:
//   - it leads a new session and process group (sid == pgid == pid): kills
//     reach the group, and the command has no controlling terminal, so
//     /dev/tty fails at once and terminal signals (SIGTTIN, SIGTTOU,
//     SIGHUP of a closing terminal) cannot stop or kill it — unless the
//     plan asks for `controlling_terminal` (a terminal of the command's
//     own, spawn_capability::controlling_terminal);
//   - default signal dispositions and an empty signal mask;
//   - fds 0,1,2 from the plan (/dev/null for one left at -1),
//     `inherited_fds[i]` as fd 3+i, nothing else;
//   - the working directory and environment of the plan.
// A policy runs the plan's `hooks` (in order), applies its `limits` and joins
// its cgroup (`cgroup_procs_fd`) in the child before exec only if it has the
// matching capability (spawn.hpp); a policy without one must refuse a plan
// that needs it (std::invalid_argument naming the field) rather than start
// the command unhooked, unlimited or uncontained.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/types.h>

#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/detail/text/fixed_list.hpp"
#include "bashexec/errors.hpp"

namespace bashexec {

/// Work done in the child between fork and exec. It must be
/// async-signal-safe: no allocation, no locks. Under `fork_exec` it runs in a
/// CLONE_VM|CLONE_VFORK child on a small private stack while the parent
/// thread is suspended: it must not write memory the parent can see (errno
/// aside) nor rely on thread-local state other than errno.
/// Returns 0 or an errno value.
struct pre_exec_hook {
  int (*run)(const void* context) noexcept = nullptr;
  const void* context = nullptr;
  /// Names the step in error messages ("landlock_restrict_self").
  const char* stage = "pre-exec";

  explicit operator bool() const noexcept { return run != nullptr; }
};

/// One setrlimit for the child: `resource` is an RLIMIT_* value, `soft` and
/// `hard` are rlim_cur / rlim_max (RLIM_INFINITY for none).
struct resource_limit {
  int resource = -1;
  std::uint64_t soft = 0;
  std::uint64_t hard = 0;
};

/// The limits a child gets, in a fixed array: the child (which must not
/// allocate) walks it as is.
class resource_limit_set : public detail::fixed_list<resource_limit, 8> {
 public:
  /// Throws std::length_error past `capacity`.
  void add(resource_limit limit) { push(limit, "launch_plan.limits"); }
};

/// The plan's pre-exec hooks, run in the order they were added (a
/// confinement appends its own; several confinement steps stack). A fixed
/// array: the child walks it without allocating.
class pre_exec_hook_set : public detail::fixed_list<pre_exec_hook, 4> {
 public:
  /// Throws std::length_error past `capacity`, std::invalid_argument for a
  /// hook without a function.
  void add(pre_exec_hook hook) {
    if (!hook) throw std::invalid_argument("launch_plan.hooks: a pre-exec hook needs a function to run");
    push(hook, "launch_plan.hooks");
  }
};

/// "RLIMIT_AS", …, for messages; "resource N" for one without a name here.
BASHEXEC_DECL std::string resource_name(int resource);

/// What to start. `argv[0]` is an absolute path (no PATH search).
struct launch_plan {
  std::vector<std::string> argv;
  /// "NAME=value" entries, already scrubbed and merged.
  std::vector<std::string> env;
  std::filesystem::path workdir;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  /// stdin_fd is the slave of a pseudo-terminal made for this command: the
  /// child, a session leader, makes it its controlling terminal right after
  /// the renumbering (so its process group is the terminal's foreground
  /// group). A confinement whose runner must set the terminal inside its
  /// sandbox itself (bwrap) clears this and does so.
  bool controlling_terminal = false;
  /// Descriptors the child keeps, renumbered to 3, 4, … in order.
  std::vector<int> inherited_fds;
  /// Run in the child in order, before the descriptors are renumbered.
  pre_exec_hook_set hooks;
  /// Applied in the child right before exec (after the hooks), so nothing
  /// of the spawn machinery runs under them; they bind the command and
  /// everything it starts (a runner like bwrap included).
  resource_limit_set limits;
  /// When >= 0: the parent's descriptor (O_WRONLY|O_CLOEXEC) of a cgroup
  /// v2 `cgroup.procs`. The child writes "0" to it first thing after
  /// setsid, so the command and everything it starts — setsid or not —
  /// stay in that cgroup (executor_config::containment).
  int cgroup_procs_fd = -1;
  /// When >= 0 (with cgroup_procs_fd): the parent's descriptor of that same
  /// cgroup's directory (O_DIRECTORY|O_CLOEXEC). A policy that can create the
  /// child directly in it — fork_exec's clone3(CLONE_INTO_CGROUP), Linux
  /// 5.7+ — does so and never writes cgroup.procs: no migration, and the
  /// child is in the cgroup from its first instruction.
  int cgroup_fd = -1;
  /// Owns what the hooks' contexts point at, when their owner lets them
  /// outlive this call (the same hooks serve every call of its kind). A
  /// pooling spawn policy (spawn/prespawned.hpp) holds it to run the same
  /// hooks again, later, in a process for a future call. Empty: the contexts
  /// live only until `spawn` returns, so such a plan is never pooled.
  std::shared_ptr<const void> hook_owner;
  /// Paths a confined command may read at their own path but never write,
  /// rename or remove, whatever its mode grants around them (the executor's
  /// spill directory). A confinement that cannot make one read-only inside a
  /// writable root must keep it outside every root it grants instead.
  std::vector<std::filesystem::path> read_only_paths;
  /// The end of the call's own timeout (a foreground run): past it a spawn
  /// waits for nothing but the child's own steps — prespawned gives up on a
  /// waiting process that does not take the command by then. Empty (a
  /// background start): the policy's own bound.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

/// One of the plan's pre-exec hooks failed in the child (`stage` names it); the command never ran.
class pre_exec_failed : public infrastructure_error {
 public:
  pre_exec_failed(std::string stage, int error)
      : infrastructure_error(detail::syscall_message(stage, error)),
        stage_(std::move(stage)),
        error_(error) {}
  const std::string& stage() const noexcept { return stage_; }
  int error() const noexcept { return error_; }

 private:
  std::string stage_;
  int error_;
};

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/impl/launch.ipp"
#endif

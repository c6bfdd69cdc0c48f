// spawn/fork_exec: the spawn policy with every capability of a child-side
// step (spawn.hpp): pre-exec hooks (Landlock is applied natively in the
// child), resource limits and joining a cgroup before exec. This header is
// the parent's side — the clone ladder and the error report; what the child
// runs is spawn/detail/fork_exec_child.hpp.
//
// With a cgroup (launch_plan::cgroup_fd) the child is created in it by
// clone3(CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_INTO_CGROUP) on the
// same private stack (detail/kernel/clone_into_cgroup.hpp): no migration, which
// would cost 8–10 ms on an idle machine, and no moment outside the cgroup.
// The calling thread is pinned to its CPU around that clone and the child
// restores the host's mask first thing: born into another cgroup, the child
// was otherwise often placed on an idle CPU that wakes slowly (~250 µs of a
// spaced call; docs/benchmarks.md, "Where the child starts").
// Where the kernel (before 5.7), a seccomp profile or the architecture
// refuses that, the process falls back for good to the path below, whose
// child writes "0" to cgroup.procs before any command code runs.
//
// Otherwise it spawns the way glibc's posix_spawn does: glibc's clone() with
// CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD on a private mmap'd stack
// (256 KiB plus a PROT_NONE guard page), so the host's page tables are
// neither copied nor torn down and the cost does not grow with the host's
// size. The kernel writes the pidfd through clone()'s parent_tid argument;
// a kernel that ignores CLONE_PIDFD (before 5.2) leaves it at -1 and
// pidfd_open supplies it. If that clone fails with EINVAL/ENOSYS/EPERM
// (seccomp profiles, exotic kernels) the policy falls back, for the rest of
// the process, to a real fork: clone3(CLONE_PIDFD), then _Fork()+pidfd_open.
//
// A failing child step writes {stage, errno} to a close-on-exec error pipe
// and exits with 127; the parent reads the pipe to EOF — with CLONE_VFORK it
// only resumes once the child has exec'd or exited, so the read returns at
// once — reaps the child and throws: `pre_exec_failed(hook.stage, errno)` for
// a hook, otherwise `infrastructure_error` naming the step ("chdir /x: No
// such file or directory", "setrlimit RLIMIT_AS: …", "execve /bin/nope: …").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include <boost/hana/set.hpp>
#include <boost/hana/type.hpp>

#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/spawn.hpp"

namespace bashexec {

namespace detail {
struct child_context;  // spawn/detail/fork_exec_child.hpp
struct child_report;

/// The descriptors a child renumbers to 0, 1, 2, 3, …: the plan's stdin,
/// stdout and stderr — /dev/null (opened into `dev_null`, which the caller
/// keeps until the child exec'd) for one left at -1, rather than whatever
/// the host has on that number — then its inherited_fds.
BASHEXEC_DECL std::vector<int> child_sources(const launch_plan& plan, unique_fd& dev_null);

/// Turns a child's error report into the exception `spawn` throws:
/// `pre_exec_failed` for a hook, else `infrastructure_error` naming the step.
/// Shared by every spawn policy that runs the child of fork_exec_child.hpp.
[[noreturn]] BASHEXEC_DECL void throw_child_failure(const launch_plan& plan, const std::string& workdir,
                                                    const child_report& report);
}  // namespace detail

/// Spawn policy with pre-exec hooks, limits and cgroup joining: vfork-style
/// clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD) + execve, falling back to a
/// real fork.
struct fork_exec {
  static constexpr std::string_view name = "fork_exec";
  static constexpr auto capabilities = boost::hana::make_set(boost::hana::type_c<spawn_capability::pre_exec>,
                                                             boost::hana::type_c<spawn_capability::limits>,
                                                             boost::hana::type_c<spawn_capability::cgroup>,
      boost::hana::type_c<spawn_capability::controlling_terminal>);

  /// Stateless but for the process-wide memory of which clone works (atomic):
  /// const and safe to call from any number of threads.
  process_handle spawn(const launch_plan& plan) const;

 private:
  struct cloned {
    pid_t pid;
    detail::unique_fd pidfd;
  };

  /// `cgroup_fd` >= 0: the child's cgroup directory, to be born in.
  static cloned clone_child(detail::child_context& ctx, int cgroup_fd);

  /// clone3(CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_INTO_CGROUP) on
  /// the child's stack (detail/kernel/clone_into_cgroup.hpp); false when it is not
  /// to be used or the kernel refused (then `pid`/`pidfd` are untouched/-1).
  static bool born_in_cgroup(detail::child_context& ctx, int cgroup_fd, void* stack_top, pid_t& pid,
                             int& pidfd) noexcept;
};

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/spawn/impl/fork_exec.ipp"
#endif

// launch: the seam between policies. A confinement edits a `launch_plan`;
// a spawn policy turns it into a running process group (`spawned_process`).
//
// Every spawn policy guarantees, for every child:
//   - it leads a new session and process group (sid == pgid == pid): kills
//     reach the group, and the command has no controlling terminal, so
//     /dev/tty fails at once and terminal signals (SIGTTIN, SIGTTOU,
//     SIGHUP of a closing terminal) cannot stop or kill it;
//   - default signal dispositions and an empty signal mask;
//   - fds 0,1,2 from the plan, `inherited_fds[i]` as fd 3+i, nothing else;
//   - the working directory and environment of the plan.
// A policy with `supports_pre_exec` also runs the plan's hook, applies its
// `limits` and joins its cgroup (`cgroup_procs_fd`) in the child before exec;
// a policy without it must refuse a plan that carries any of them rather than
// start the command unhooked, unlimited or uncontained.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/types.h>

#include "bashexec/detail/unique_fd.hpp"
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
class resource_limit_set {
 public:
  static constexpr std::size_t capacity = 8;

  /// Throws std::length_error past `capacity`.
  void add(resource_limit limit) {
    if (size_ == capacity) throw std::length_error("resource_limit_set: more than 8 limits");
    items_[size_++] = limit;
  }
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  const resource_limit* begin() const noexcept { return items_.data(); }
  const resource_limit* end() const noexcept { return items_.data() + size_; }
  const resource_limit& operator[](std::size_t i) const noexcept { return items_[i]; }

 private:
  std::array<resource_limit, capacity> items_{};
  std::size_t size_ = 0;
};

/// "RLIMIT_AS", …, for messages; "resource N" for one without a name here.
inline std::string resource_name(int resource) {
  switch (resource) {
    case RLIMIT_AS: return "RLIMIT_AS";
    case RLIMIT_CPU: return "RLIMIT_CPU";
    case RLIMIT_FSIZE: return "RLIMIT_FSIZE";
    case RLIMIT_NOFILE: return "RLIMIT_NOFILE";
    case RLIMIT_NPROC: return "RLIMIT_NPROC";
    case RLIMIT_DATA: return "RLIMIT_DATA";
    case RLIMIT_STACK: return "RLIMIT_STACK";
    case RLIMIT_CORE: return "RLIMIT_CORE";
    default: return "resource " + std::to_string(resource);
  }
}

/// What to start. `argv[0]` is an absolute path (no PATH search).
struct launch_plan {
  std::vector<std::string> argv;
  /// "NAME=value" entries, already scrubbed and merged.
  std::vector<std::string> env;
  std::filesystem::path workdir;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  /// Descriptors the child keeps, renumbered to 3, 4, … in order.
  std::vector<int> inherited_fds;
  pre_exec_hook hook;
  /// Applied in the child right before exec (after the hook), so nothing
  /// of the spawn machinery runs under them; they bind the command and
  /// everything it starts (a runner like bwrap included).
  resource_limit_set limits;
  /// When >= 0: the parent's descriptor (O_WRONLY|O_CLOEXEC) of a cgroup
  /// v2 `cgroup.procs`. The child writes "0" to it first thing after
  /// setsid, so the command and everything it starts — setsid or not —
  /// stay in that cgroup (executor_config::containment).
  int cgroup_procs_fd = -1;
  /// Paths a confined command may read at their own path but never write,
  /// rename or remove, whatever its mode grants around them (the executor's
  /// spill directory). A confinement that cannot make one read-only inside a
  /// writable root must keep it outside every root it grants instead.
  std::vector<std::filesystem::path> read_only_paths;
};

/// A started child: its pid (also its process-group id) and a pidfd.
struct spawned_process {
  pid_t pid = -1;
  detail::unique_fd pidfd;
};

/// The pre-exec hook failed in the child; the command never ran.
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

// launch: the seam between policies. A confinement edits a `launch_plan`;
// a spawn policy turns it into a running process group (`spawned_process`).
//
// Every spawn policy guarantees, for every child:
//   - it leads a new process group (pgid == pid), so kills reach the group;
//   - default signal dispositions and an empty signal mask;
//   - fds 0,1,2 from the plan, `inherited_fds[i]` as fd 3+i, nothing else;
//   - the working directory and environment of the plan.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

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

// spawn/detail/fork_exec_child: the child side of fork_exec (spawn/fork_exec.hpp)
// — what runs between the clone and the exec. The child follows the rules of
// every CLONE_VM child (detail/kernel/vm_child.hpp): raw system calls, its
// own stack, no parent memory written but its scratch, errno read at once.
//
// The child, in order (every array it touches is built by the parent before
// the clone):
//   1. setsid() (a new session and process group, no controlling
//      terminal), then — when the plan has a cgroup_procs_fd and the child
//      was not born in that cgroup (detail/kernel/clone_into_cgroup.hpp) — write
//      "0" to it: the child joins its cgroup before any command code runs;
//   2. every signal disposition back to SIG_DFL (glibc's two internal
//      signals included), then an empty signal mask;
//   3. the plan's hooks, in order — BEFORE renumbering, so descriptor
//      numbers named in a hook's context (a Landlock ruleset fd) are still
//      the parent's;
//   4. stdin/stdout/stderr to 0/1/2 and inherited_fds[i] to 3+i (each source
//      first duplicated above the target range, so overlaps cannot clobber);
//      then, for a plan with controlling_terminal, TIOCSCTTY on fd 0 (the
//      session leader takes its terminal; its group becomes the foreground);
//   5. chdir(workdir) (skipped when the plan's workdir is empty);
//   6. every descriptor >= 3+inherited marked close-on-exec (close_range);
//   7. the plan's resource limits, each with prlimit64(0, …) — last, so
//      none of the steps above runs under them (an RLIMIT_NOFILE below the
//      host's descriptor numbers would break the renumbering and bound the
//      close-on-exec fallback loop);
//   8. execve(argv[0], argv, env).
// A failing step writes {stage, errno, index} to a close-on-exec error pipe
// and the child exits with 127 (exit_group: no atexit handlers, no stdio
// flush); the parent turns the report into an exception (spawn/fork_exec.hpp).
//
#pragma once

#include <cstddef>
#include <cstdint>

#include "bashexec/detail/kernel/vm_child.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/launch.hpp"

namespace bashexec::detail {

/// struct clone_args, version 0 (the fields clone3 has had since 5.3).
struct clone3_args {
  std::uint64_t flags;
  std::uint64_t pidfd;
  std::uint64_t child_tid;
  std::uint64_t parent_tid;
  std::uint64_t exit_signal;
  std::uint64_t stack;
  std::uint64_t stack_size;
  std::uint64_t tls;
};

/// Which child step failed; travels through the error pipe.
/// `receive`: a prespawned process could not read its command (spawn/detail/prespawn_child.hpp).
enum class child_stage : int { setsid = 1, hook, dup, chdir, cloexec, rlimit, execve, cgroup, receive, terminal };

struct child_report {
  child_stage stage;
  int error;
  int index;  // child_stage::rlimit / hook: which of the plan's limits / hooks
};

/// Everything the child needs, resolved in the parent before the clone.
struct child_context {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* workdir = nullptr;  // empty string: stay where we are
  const int* sources = nullptr;   // plan fds, in target order 0, 1, 2, 3, …
  int* scratch = nullptr;         // same length; the only parent memory the child writes
  int count = 0;
  int error_fd = -1;
  const pre_exec_hook* hooks = nullptr;  // run in order
  int hook_count = 0;
  const resource_limit* limits = nullptr;
  int limit_count = 0;
  int cgroup_procs_fd = -1;  // -1: no cgroup to join
  bool controlling_terminal = false;  // fd 0 becomes the controlling terminal (step 4)
  // When set: the CPU mask to restore first thing (a cpu_set_t of
  // `affinity_bytes` in the parent's memory). fork_exec pins its thread to
  // its CPU around clone3(CLONE_INTO_CGROUP), so the child starts there
  // (fork_exec.hpp, "Where the child starts"), and the child widens it back.
  const void* affinity = nullptr;
  unsigned affinity_bytes = 0;
};

// The child's steps (impl/fork_exec_child.ipp) are raw system calls and run
// on the child's own stack, by the rules of detail/kernel/vm_child.hpp.

[[noreturn]] BASHEXEC_CHILD_CODE BASHEXEC_DECL void child_fail(int error_fd, child_stage stage, int error, int index = 0) noexcept;

/// Runs in the cloned child, on its own stack. Never returns. `arg` is the
/// parent's `child_context`.
BASHEXEC_CHILD_CODE BASHEXEC_DECL int child_main(void* arg) noexcept;

/// Steps 1-3 of child_main: setsid, the cgroup, clean signals, the hooks.
/// What a prespawned process does before it waits for its command
/// (spawn/detail/prespawn_child.hpp); fork_exec's child goes on at once.
BASHEXEC_CHILD_CODE BASHEXEC_DECL void child_enter(const child_context& ctx) noexcept;

/// Steps 4-8 of child_main: renumbering, chdir, close-on-exec, limits,
/// execve. Needs `path`, `argv`, `envp`, `workdir`, `sources`/`scratch`/
/// `count`, `error_fd` and `limits` of `ctx`.
[[noreturn]] BASHEXEC_CHILD_CODE BASHEXEC_DECL void child_finish(const child_context& ctx) noexcept;

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/spawn/detail/impl/fork_exec_child.ipp"
#endif

// detail/fork_exec_child: the child side of fork_exec (spawn/fork_exec.hpp)
// — what runs between the clone and the exec, and the two guards the parent
// sets up around the clone (every signal blocked, a private stack).
//
// The child, in order (every array it touches is built by the parent before
// the clone):
//   1. setsid() (a new session and process group, no controlling
//      terminal), then — when the plan has a cgroup_procs_fd and the child
//      was not born in that cgroup (detail/clone_into_cgroup.hpp) — write
//      "0" to it: the child joins its cgroup before any command code runs;
//   2. every signal disposition back to SIG_DFL (glibc's two internal
//      signals included), then an empty signal mask;
//   3. the plan's hooks, in order — BEFORE renumbering, so descriptor
//      numbers named in a hook's context (a Landlock ruleset fd) are still
//      the parent's;
//   4. stdin/stdout/stderr to 0/1/2 and inherited_fds[i] to 3+i (each source
//      first duplicated above the target range, so overlaps cannot clobber);
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
// Rules for the child, which shares the parent's memory (CLONE_VM) while the
// calling thread is suspended (CLONE_VFORK). They hold for every function
// that runs there: child_main, child_enter, child_finish, child_fail,
// child_exit, the prespawned waiter (detail/prespawn_child.hpp), the
// user-namespace probe and step (detail/user_namespace.hpp), the hooks
// (landlock_apply and what it calls: capabilities, seccomp), the cgroup
// write and the resource limits (steps 1 and 7).
//   - Signals. The parent blocks every signal — all 64 bits, through the raw
//     system call, so glibc's internal SIGCANCEL/SIGSETXID too — around the
//     clone; the child inherits that mask, resets every disposition with raw
//     rt_sigaction and only then unblocks. No handler of the host ever runs
//     in the child on the shared address space. Dispositions are per process
//     (no CLONE_SIGHAND) and the mask per thread, so the host's are untouched.
//   - Memory. The child runs on its own stack and writes no parent memory
//     except the `scratch` array the parent set aside for it, and errno (see
//     below). Its own steps are raw syscall()s: no libc wrapper with hidden
//     state (cancellation, sanitizer interceptors, atexit), and it exits with
//     exit_group. Each hook must keep to the same rules (landlock_apply does:
//     at most three system calls — no_new_privs, restrict_self and the
//     network filter). Descriptors are per process (no CLONE_FILES), so the
//     child's dup/close-on-exec work never reaches the host's table. What
//     the child reads of the parent's memory — the context, its arrays, the
//     hooks' contexts — stays valid because the parent is suspended in
//     clone() with those objects in its frame (fork_exec), or keeps them on
//     the heap until it has read the child's end of file (prespawned).
//   - errno. Without CLONE_SETTLS the child uses the suspended thread's TLS,
//     so every errno the child (or the hook) sets lands in that thread's
//     errno slot. That is accepted rather than avoided with inline assembly:
//     the thread is suspended until the child execs or exits, so nothing
//     races with those writes, and the parent treats errno as meaningless
//     after clone() unless clone() itself returned -1 (then the child never
//     ran and errno is clone's own); it reads it on the very next statement.
//     As with any libc call, spawn() may change the caller's errno on success.
//     In the child, errno is read only right after the system call that
//     failed, in the same function, and passed on as a value (a return
//     value, a report field, an exit status) — never left for a caller.
//   - The optimiser. The compiler sees ordinary single-threaded code; it
//     does not know that the parent observes what the child does. GCC's
//     interprocedural pure/const analysis declares every function that
//     cannot return (noreturn and noexcept, or ending in an endless
//     exit_group loop) "looping pure" — its side effects are deemed
//     invisible, since no caller ever resumes — whatever it holds. With the
//     exit status computed on several paths into such a loop, -O3 copied
//     the loop once per status (loop unswitching) and control-dependent
//     dead code elimination kept one copy: the user-namespace probe exited
//     0 on every path. Hence: an entry point that clone() calls returns its
//     status where it can (glibc's clone() ends the child with it through
//     the raw exit system call) — a returning function keeps its result;
//     the only exit loop is child_exit's, which gets one status from its
//     caller and holds a child_barrier() (an empty asm with a memory
//     clobber, a side effect no pass may drop or merge) in every copy; and
//     a value the parent must see travels through a system call (a report
//     on the error pipe, the exit status) or an atomic store (the
//     waiter's `claimed`), never through a plain store to shared memory. `noipa` would say it more directly but draws a warning
//     on every inline (header-only) function. A Release build (-O3
//     -DNDEBUG) of the executor, sandbox, hardening, prespawned and tools
//     suites is part of the suite (docs/testing.md), the refused user
//     namespace among its entries.
//   - Stack. 256 KiB, mmap'd per spawn with a guard page below it (stacks
//     grow down on every architecture this targets), unmapped as soon as
//     clone() returns: CLONE_VFORK resumes the parent only once the child
//     has exec'd (its new image no longer uses the stack) or exited.
//   - Sanitizers. The child's functions are not instrumented for
//     AddressSanitizer: its bookkeeping (fake stacks, stack bounds of the
//     thread) is the parent thread's and must not be driven from a foreign
//     stack.
#pragma once

#include <csignal>
#include <cstddef>
#include <cstdint>

#include <sys/syscall.h>
#include <unistd.h>

#include "bashexec/detail/linkage.hpp"
#include "bashexec/launch.hpp"

// Marks a function that runs in a CLONE_VM child: no AddressSanitizer
// instrumentation (see "Sanitizers" above).
#if defined(__GNUC__) || defined(__clang__)
#define BASHEXEC_CHILD_CODE __attribute__((no_sanitize_address))
#else
#define BASHEXEC_CHILD_CODE
#endif

namespace bashexec::detail {

#ifdef SYS_clone3
inline constexpr long sys_clone3 = SYS_clone3;
#else
inline constexpr long sys_clone3 = 435;
#endif
#ifdef SYS_close_range
inline constexpr long sys_close_range = SYS_close_range;
#else
inline constexpr long sys_close_range = 436;
#endif
#ifdef SYS_pidfd_open
inline constexpr long sys_pidfd_open = SYS_pidfd_open;
#else
inline constexpr long sys_pidfd_open = 434;
#endif

inline constexpr std::uint64_t clone_pidfd_flag = 0x00001000;  // CLONE_PIDFD
inline constexpr unsigned close_range_cloexec_flag = 1U << 2;  // CLOSE_RANGE_CLOEXEC

/// The kernel's sigset_t (64 signals on most architectures), as the raw
/// rt_sig* calls want its size; glibc's NSIG is one past the highest signal.
inline constexpr std::size_t kernel_sigset_bytes = (NSIG - 1) / 8;

/// Usable stack for the CLONE_VM child: its own frames are a few hundred
/// bytes; the rest is headroom for the hook (Landlock's is at most three system calls).
inline constexpr std::size_t vfork_stack_bytes = 256 * 1024;

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
/// `receive`: a prespawned process could not read its command (detail/prespawn_child.hpp).
enum class child_stage : int { setsid = 1, hook, dup, chdir, cloexec, rlimit, execve, cgroup, receive };

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
  // When set: the CPU mask to restore first thing (a cpu_set_t of
  // `affinity_bytes` in the parent's memory). fork_exec pins its thread to
  // its CPU around clone3(CLONE_INTO_CGROUP), so the child starts there
  // (fork_exec.hpp, "Where the child starts"), and the child widens it back.
  const void* affinity = nullptr;
  unsigned affinity_bytes = 0;
};

// The child's steps (detail/impl/fork_exec_child.ipp) are raw system calls
// and run on the child's own stack; see the file comment.

/// A compiler barrier: the function that holds it visibly has side effects,
/// whatever GCC concludes about the calls around it (see "The optimiser").
inline void child_barrier() noexcept { asm volatile("" ::: "memory"); }

[[noreturn]] BASHEXEC_CHILD_CODE BASHEXEC_DECL void child_exit(int code) noexcept;

[[noreturn]] BASHEXEC_CHILD_CODE BASHEXEC_DECL void child_fail(int error_fd, child_stage stage, int error, int index = 0) noexcept;

/// Runs in the cloned child, on its own stack. Never returns. `arg` is the
/// parent's `child_context`.
BASHEXEC_CHILD_CODE BASHEXEC_DECL int child_main(void* arg) noexcept;

/// Steps 1-3 of child_main: setsid, the cgroup, clean signals, the hooks.
/// What a prespawned process does before it waits for its command
/// (detail/prespawn_child.hpp); fork_exec's child goes on at once.
BASHEXEC_CHILD_CODE BASHEXEC_DECL void child_enter(const child_context& ctx) noexcept;

/// Steps 4-8 of child_main: renumbering, chdir, close-on-exec, limits,
/// execve. Needs `path`, `argv`, `envp`, `workdir`, `sources`/`scratch`/
/// `count`, `error_fd` and `limits` of `ctx`.
[[noreturn]] BASHEXEC_CHILD_CODE BASHEXEC_DECL void child_finish(const child_context& ctx) noexcept;

/// Blocks every signal — all bits, glibc's internal ones included, as glibc's
/// own posix_spawn does — for its lifetime, so the child starts with no host
/// handler able to run (on the shared address space) before its dispositions
/// are reset. Raw system calls: pthread_sigmask would silently leave
/// SIGCANCEL and SIGSETXID unblocked.
class all_signals_blocked {
 public:
  all_signals_blocked() noexcept;
  ~all_signals_blocked() { ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &saved_, nullptr, kernel_sigset_bytes); }
  all_signals_blocked(const all_signals_blocked&) = delete;
  all_signals_blocked& operator=(const all_signals_blocked&) = delete;

 private:
  sigset_t saved_;
};

/// The CLONE_VM child's stack: `vfork_stack_bytes` read-write above one
/// PROT_NONE guard page, unmapped with the object.
class vfork_stack {
 public:
  vfork_stack();
  ~vfork_stack();
  vfork_stack(const vfork_stack&) = delete;
  vfork_stack& operator=(const vfork_stack&) = delete;

  /// The highest address: where a downward-growing stack starts.
  void* top() const noexcept { return base_ + size_; }

 private:
  char* base_ = nullptr;
  std::size_t size_ = 0;
  std::size_t page_ = 0;
};

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/impl/fork_exec_child.ipp"
#endif

// detail/kernel/vm_child: what every CLONE_VM|CLONE_VFORK child of the library
// shares — the rules its code follows, the raw system-call numbers, the two
// guards the parent sets up around the clone (every signal blocked, a private
// stack) and the one exit loop. fork_exec's child (spawn/detail/
// fork_exec_child.hpp), the prespawned waiter (spawn/detail/prespawn_child.hpp)
// and the user-namespace probe (detail/kernel/user_namespace.hpp) are such
// children.
//
// Rules for a child, which shares the parent's memory (CLONE_VM) while the
// calling thread is suspended (CLONE_VFORK). They hold for every function
// that runs there: child_main, child_enter, child_finish, child_fail,
// child_exit, the prespawned waiter (spawn/detail/prespawn_child.hpp), the
// user-namespace probe and step (detail/kernel/user_namespace.hpp), the hooks
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

/// A compiler barrier: the function that holds it visibly has side effects,
/// whatever GCC concludes about the calls around it (see "The optimiser").
inline void child_barrier() noexcept { asm volatile("" ::: "memory"); }

[[noreturn]] BASHEXEC_CHILD_CODE BASHEXEC_DECL void child_exit(int code) noexcept;

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
#include "bashexec/detail/kernel/impl/vm_child.ipp"
#endif

// spawn/detail/prespawn_child: the waiting process of the prespawned spawn policy
// (spawn/prespawned.hpp) — a process started ahead of its command that
// waits on a socket (SOCK_SEQPACKET) for it, then runs the very same steps as fork_exec's
// child (spawn/detail/fork_exec_child.hpp).
//
// It is cloned like fork_exec's child — CLONE_VM on a private mmap'd stack,
// every signal blocked around the clone — but without CLONE_VFORK: the
// parent goes on while it waits. Sharing the memory means the clone copies
// no page tables, the host's pages never turn copy-on-write, and the exec
// tears nothing down; a fork-ahead measured 1.5x a cold spawn for exactly
// those costs (docs/benchmarks.md). The waiting process, in order:
//   1. child_enter: setsid, default dispositions and an empty mask, the
//      plan's hooks (a Landlock domain is enforced here, before any command
//      is known);
//   2. closes every descriptor but its end of the socket — its table is its
//      own (no CLONE_FILES), so it holds nothing of the host while it waits —
//      and writes one byte: "ready";
//   3. blocks in recvmsg for a `claim_message`: the address of the parent's
//      `child_context` for this call (argv, env, workdir, limits, built in
//      the parent's memory as fork_exec builds them) and, as SCM_RIGHTS, the
//      stream descriptors in target order; sets the control block's
//      `claimed` flag;
//   4. child_finish: renumbering, chdir, close-on-exec, limits, execve of
//      exactly the plan's argv. Its socket is close-on-exec, so the parent
//      reads end of file once the exec happened, or a `child_report` when a
//      step failed — the same report, and exception, as fork_exec.
// End of file before a claim (the pool closed its end, or the host died)
// makes the process exit 0 without running anything.
//
// The rules of fork_exec's child hold (raw system calls only, no ASan
// instrumentation, own stack), with one difference: the parent thread is
// not suspended. errno writes of a failing step land in the TLS of the
// thread that cloned it (the pool's refill thread): between the clone and
// "ready" that thread is blocked reading the socket; while the process
// waits, nothing it does fails or sets errno (default dispositions: no
// signal interrupts recvmsg with EINTR); at the claim, a failing step's
// errno can race with the refill thread's own errno — at worst a wrong
// errno text in a report, never memory corruption. The parent reads the
// context only while it blocks on the socket, so the context stays valid
// until the exec.
#pragma once

#include <cstdint>

#include "bashexec/detail/linkage.hpp"
#include "bashexec/spawn/detail/fork_exec_child.hpp"

namespace bashexec::detail {

/// The most descriptors one claim passes (the kernel's SCM_MAX_FD is 253);
/// a plan with more is served cold.
inline constexpr int max_claim_fds = 64;

/// What the parent sets up for one waiting process before the clone; lives
/// (on the heap) until the process exec'd or was reaped.
struct waiter_control {
  /// Step 1's context: the key's hooks; `error_fd` is `channel`.
  child_context enter;
  /// The process's end of its socket (the same number in its table).
  int channel = -1;
  /// Set (release) once the process holds its command: from then on an end
  /// of file means the exec happened, not a death before the claim.
  int claimed = 0;
};

/// The fixed part of a claim; the descriptors ride along with it.
struct claim_message {
  std::uint64_t context = 0;  // address of the parent's child_context
  std::int32_t fd_count = 0;
  std::int32_t reserved = 0;
};

/// The waiting process (clone()'s function). `arg` is its waiter_control.
BASHEXEC_CHILD_CODE BASHEXEC_DECL int waiting_child_main(void* arg) noexcept;

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/spawn/detail/impl/prespawn_child.ipp"
#endif

// detail/kernel/input_wait_probe: "is this command waiting for input?",
// answered from the kernel's own state rather than from its output or a
// timer (docs/terminals.md).
//
// The probe walks the command's process tree from the process the executor
// spawned (/proc/<pid>/task/<tid>/children: setsid and namespaces do not
// hide a child from its parent) and classifies every thread:
//   - running or in uninterruptible sleep (R, D): busy — not waiting;
//   - asleep in read/readv/pread on the command's input (its terminal, or
//     /dev/tty naming that terminal, or its stdin pipe), or in
//     poll/ppoll/select/pselect6/epoll_wait on a set that holds the input
//     for reading (the set read from the process's memory, the epoll
//     interest list from /proc/<pid>/fdinfo): a reader;
//   - asleep waiting for something else that only another process or an
//     event can end (wait4, waitid, futex, pause, a read/poll on any other
//     descriptor): idle;
//   - asleep in anything else (nanosleep, clock_nanosleep, an unknown call),
//     or not readable at all: busy — the command can go on without input.
// The command waits for input when there is a reader — on a terminal, one
// in the terminal's foreground process group — and no busy thread. So
// `sleep`, a compile, a pipe between two of its own processes, or a
// background reader beside a foreground that works are never reported.
//
// Reading another process's syscall state and memory needs ptrace access
// (PTRACE_MODE_ATTACH): the executor's own descendants, which it has as
// root and as their user (Yama's scope 1 allows descendants).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// What the command's input is, as /proc names it.
struct input_identity {
  /// The terminal's slave device (st_rdev); 0 for a command on pipes.
  dev_t terminal = 0;
  /// The stdin pipe (st_dev, st_ino); 0 on a terminal.
  dev_t pipe_device = 0;
  ino_t pipe_inode = 0;
};

/// A thread of the command blocked reading its input.
struct blocked_reader {
  pid_t pid = 0;     // its process
  std::string call;  // "read", "poll", "select", "epoll_wait"
};

/// The reader when the command rooted at `root` waits for input; empty when
/// it does not (or when the evidence cannot be read: never a guess).
BASHEXEC_DECL std::optional<blocked_reader> probe_input_wait(pid_t root, const input_identity& input) noexcept;

/// The processes a runner's pid namespace holds for its command: every
/// descendant of `runner` but the runner itself and its children (the
/// namespace's init). Empty when none can be read.
BASHEXEC_DECL std::vector<pid_t> command_processes(pid_t runner) noexcept;

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/input_wait_probe.ipp"
#endif

// detail/kernel/pseudo_terminal: a command's own pseudo-terminal — the
// master the executor reads and writes (non-blocking, close-on-exec), the
// slave the command gets as stdin, stdout, stderr and controlling terminal —
// and the few terminal operations the executor performs on the master.
#pragma once

#include <string>
#include <sys/types.h>

#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/terminal.hpp"

namespace bashexec::detail {

struct pseudo_terminal {
  unique_fd master;
  unique_fd slave;
};

/// A new terminal pair of `size`. The slave is opened through the master
/// (TIOCGPTPEER, no path lookup) where the kernel has it, else by its name.
/// Output post-processing maps nothing (no ONLCR): the command's "\n" is
/// what the executor reads, as from a pipe.
BASHEXEC_DECL pseudo_terminal open_pseudo_terminal(terminal_size size);

/// TIOCSWINSZ: the kernel sends SIGWINCH to the foreground group.
BASHEXEC_DECL void resize_terminal(int master, terminal_size size);

/// The terminal's foreground process group (as this pid namespace numbers
/// it), or -1 when it has none or it cannot be read.
BASHEXEC_DECL pid_t terminal_foreground_group(int master) noexcept;

/// The character the line discipline turns into `which` (VINTR, VEOF, …)
/// under the terminal's current settings; `fallback` when it cannot be read
/// or is disabled.
BASHEXEC_DECL char terminal_control_character(int master, int which, char fallback) noexcept;

/// The terminal is in non-canonical ("raw") mode: input is taken key by key.
BASHEXEC_DECL bool terminal_is_raw(int master) noexcept;

/// The slave's device number (st_rdev): how /proc tells a process's
/// descriptor or controlling terminal is this terminal.
BASHEXEC_DECL dev_t terminal_device(int slave);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/pseudo_terminal.ipp"
#endif

// detail/kernel/process_group: signalling a child's whole process group and telling
// what is left of it, from the kernel's own facts in /proc/<pid>/stat.
// A zombie ('Z'/'X') is gone: an init that does not reap orphans must not
// make a kill wait forever. A live member is either running or exiting:
// PF_EXITING is set when it begins do_exit, before it closes its files — our
// pipes' end of file — a moment before it turns zombie. Seen in that moment
// it is on its way out by itself, not a leftover to kill.
#pragma once

#include <csignal>
#include <string_view>

#include <sys/types.h>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// Signals every member of group `pgid`; ESRCH (already empty) is fine.
inline void signal_group(pid_t pgid, int signo) noexcept { ::kill(-pgid, signo); }

/// PF_EXITING from the kernel's <linux/sched.h>: set at the start of do_exit,
/// before the process closes its files; it never clears.
inline constexpr unsigned long pf_exiting = 0x00000004;

/// The facts of /proc/<pid>/stat the leftover rule needs.
struct member_stat {
  char state = 0;
  pid_t pgrp = 0;
  unsigned long flags = 0;

  bool zombie() const noexcept { return state == 'Z' || state == 'X'; }
  /// Not a zombie, and not on its way out.
  bool running() const noexcept { return !zombie() && (flags & pf_exiting) == 0; }
  /// Not a zombie yet, but on its way out.
  bool exiting() const noexcept { return !zombie() && (flags & pf_exiting) != 0; }
};

/// What is left of a group of processes: members still running, members
/// on their way out (zombies are not counted).
struct member_census {
  bool running = false;
  bool exiting = false;

  bool any_live() const noexcept { return running || exiting; }
  void add(const member_stat& st) noexcept {
    running = running || st.running();
    exiting = exiting || st.exiting();
  }
  member_census& operator|=(const member_census& other) noexcept {
    running = running || other.running;
    exiting = exiting || other.exiting;
    return *this;
  }
};

/// Reads fields 3 (state), 5 (pgrp) and 9 (flags) of /proc/<pid_name>/stat;
/// false when the process is gone or the file cannot be parsed.
BASHEXEC_DECL bool read_member_stat(const char* pid_name, member_stat& out) noexcept;

/// Adds process `pid` (when it still exists) to `census`.
BASHEXEC_DECL void count_process(pid_t pid, member_census& census) noexcept;

/// The members of group `pgid`; the scan stops at the first running one.
BASHEXEC_DECL member_census census_group(pid_t pgid) noexcept;

/// True while group `pgid` has a member that is not a zombie (running or
/// exiting: a kill is over once every member is a zombie or gone).
inline bool group_has_live_members(pid_t pgid) noexcept { return census_group(pgid).any_live(); }

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/process_group.ipp"
#endif

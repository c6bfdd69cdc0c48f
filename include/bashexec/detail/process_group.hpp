// detail/process_group: signalling a child's whole process group and telling
// whether any live member is left, from the kernel's own facts in
// /proc/<pid>/stat. Not live: a zombie ('Z'/'X': an init that does not reap
// orphans must not make a kill wait forever) and a process that is already
// exiting (PF_EXITING: it has begun do_exit, so it closes its files — our
// pipes' end of file — a moment before it turns zombie; seen in that moment
// it is on its way out, not left over).
#pragma once

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string_view>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

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

  /// Neither a zombie nor on its way out.
  bool live() const noexcept { return state != 'Z' && state != 'X' && (flags & pf_exiting) == 0; }
};

/// Reads fields 3 (state), 5 (pgrp) and 9 (flags) of /proc/<pid_name>/stat;
/// false when the process is gone or the file cannot be parsed.
inline bool read_member_stat(const char* pid_name, member_stat& out) noexcept {
  char path[sizeof "/proc//stat" + sizeof(dirent::d_name)];
  std::snprintf(path, sizeof path, "/proc/%s/stat", pid_name);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // The command name may hold spaces and parens: fields start after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (!p) return false;
  char state = 0;
  int ppid = 0, pgrp = 0, session = 0, tty = 0, tpgid = 0;
  unsigned long flags = 0;
  if (std::sscanf(p + 1, " %c %d %d %d %d %d %lu", &state, &ppid, &pgrp, &session, &tty, &tpgid, &flags) != 7)
    return false;
  out = {state, static_cast<pid_t>(pgrp), flags};
  return true;
}

/// True while `pid` exists, is not a zombie and is not exiting.
inline bool process_is_live(pid_t pid) noexcept {
  char name[24];
  std::snprintf(name, sizeof name, "%d", static_cast<int>(pid));
  member_stat st;
  return read_member_stat(name, st) && st.live();
}

/// True while group `pgid` has a live member (neither zombie nor exiting).
inline bool group_has_live_members(pid_t pgid) noexcept {
  if (::kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  DIR* dir = ::opendir("/proc");
  if (!dir) return true;  // cannot tell: assume alive, the caller bounds the wait
  bool any_alive = false;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    member_stat st;
    if (read_member_stat(entry->d_name, st) && st.pgrp == pgid && st.live()) {
      any_alive = true;
      break;
    }
  }
  ::closedir(dir);
  return any_alive;
}

}  // namespace bashexec::detail

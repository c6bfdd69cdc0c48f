// detail/process_group: signalling a child's whole process group and telling
// whether any live member is left (zombies do not count: an init that does
// not reap orphans must not make a kill wait forever).
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

/// Reads field 3 (state) and 5 (pgrp) of /proc/<pid>/stat.
inline bool stat_member(const char* pid_name, pid_t pgid, bool& alive) noexcept {
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
  int ppid = 0, pgrp = 0;
  if (std::sscanf(p + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) return false;
  if (pgrp != pgid) return false;
  alive = state != 'Z' && state != 'X';
  return true;
}

/// True while group `pgid` has a member that is not a zombie.
inline bool group_has_live_members(pid_t pgid) noexcept {
  if (::kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  DIR* dir = ::opendir("/proc");
  if (!dir) return true;  // cannot tell: assume alive, the caller bounds the wait
  bool any_alive = false;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    bool alive = false;
    if (stat_member(entry->d_name, pgid, alive) && alive) {
      any_alive = true;
      break;
    }
  }
  ::closedir(dir);
  return any_alive;
}

}  // namespace bashexec::detail

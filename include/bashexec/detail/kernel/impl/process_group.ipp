// The bodies of detail/kernel/process_group.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/process_group.hpp"

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

namespace bashexec::detail {

BASHEXEC_DECL bool read_member_stat(const char* pid_name, member_stat& out) noexcept {
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

BASHEXEC_DECL void count_process(pid_t pid, member_census& census) noexcept {
  char name[24];
  std::snprintf(name, sizeof name, "%d", static_cast<int>(pid));
  member_stat st;
  if (read_member_stat(name, st)) census.add(st);
}

BASHEXEC_DECL member_census census_group(pid_t pgid) noexcept {
  member_census census;
  if (::kill(-pgid, 0) != 0 && errno == ESRCH) return census;
  DIR* dir = ::opendir("/proc");
  if (!dir) {
    census.running = true;  // cannot tell: assume alive, the caller bounds the wait
    return census;
  }
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    member_stat st;
    if (read_member_stat(entry->d_name, st) && st.pgrp == pgid) {
      census.add(st);
      if (census.running) break;
    }
  }
  ::closedir(dir);
  return census;
}

}  // namespace bashexec::detail

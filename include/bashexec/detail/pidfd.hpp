// detail/pidfd: race-free handles on our own children (pidfd_open, waitid).
#pragma once

#include <optional>

#include <csignal>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bashexec/detail/unique_fd.hpp"

namespace bashexec::detail {

inline unique_fd pidfd_open(pid_t pid) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) throw_syscall("pidfd_open");
  return unique_fd(fd);  // pidfds are close-on-exec by definition
}

/// How a reaped child ended.
struct exit_facts {
  std::optional<int> exit_code;
  std::optional<int> signal;
};

/// Reaps the child behind `pidfd` if it has exited; empty while it runs.
inline std::optional<exit_facts> try_reap(int pidfd) {
  siginfo_t info{};
  for (;;) {
    if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED | WNOHANG) == 0)
      break;
    if (errno == EINTR) continue;
    throw_syscall("waitid");
  }
  if (info.si_pid == 0) return std::nullopt;
  exit_facts facts;
  if (info.si_code == CLD_EXITED)
    facts.exit_code = info.si_status;
  else
    facts.signal = info.si_status;
  return facts;
}

/// Blocks until the child exits and reaps it (used on error paths).
inline void reap_blocking(pid_t pid) noexcept {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace bashexec::detail

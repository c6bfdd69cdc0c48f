// The bodies of detail/kernel/pidfd.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/pidfd.hpp"

#include <cerrno>
#include <optional>

#include <csignal>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace bashexec::detail {

BASHEXEC_DECL unique_fd pidfd_open(pid_t pid) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) throw_syscall("pidfd_open");
  return unique_fd(fd);  // pidfds are close-on-exec by definition
}

BASHEXEC_DECL std::optional<exit_facts> try_reap(int pidfd) {
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

BASHEXEC_DECL void reap_blocking(pid_t pid) noexcept {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace bashexec::detail

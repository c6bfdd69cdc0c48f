// The bodies of detail/kernel/user_namespace.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/user_namespace.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bashexec/detail/kernel/vm_child.hpp"

namespace bashexec::detail {

BASHEXEC_CHILD_CODE BASHEXEC_DECL int write_proc_self_file(const char* path, const char* text, std::size_t length) noexcept {
  const long fd = ::syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const long written = ::syscall(SYS_write, fd, text, length);
  const int error = written < 0 ? errno : static_cast<std::size_t>(written) == length ? 0 : EIO;
  ::syscall(SYS_close, fd);
  return error;
}

BASHEXEC_CHILD_CODE BASHEXEC_DECL std::size_t format_identity_map(char* out, unsigned long id) noexcept {
  char digits[24];
  std::size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + id % 10);
    id /= 10;
  } while (id != 0);
  std::size_t length = 0;
  for (int copy = 0; copy < 2; ++copy) {
    for (std::size_t i = n; i > 0; --i) out[length++] = digits[i - 1];
    out[length++] = ' ';
  }
  out[length++] = '1';
  out[length++] = '\n';
  return length;
}

BASHEXEC_CHILD_CODE BASHEXEC_DECL int enter_own_user_namespace() noexcept {
  const unsigned long uid = static_cast<unsigned long>(::syscall(SYS_geteuid));
  const unsigned long gid = static_cast<unsigned long>(::syscall(SYS_getegid));
  if (::syscall(SYS_unshare, CLONE_NEWUSER) != 0) return errno;
  // EACCES: an undumpable host's /proc files are root's. EPERM: the kernel
  // refuses the map itself (uid 0 without CAP_SETFCAP). Either way the
  // namespace stays usable, unmapped.
  // Linux < 3.19 has no setgroups file and no such rule.
  int error = write_proc_self_file("/proc/self/setgroups", "deny", 4);
  if (error == ENOENT) error = 0;
  char line[48];
  if (error == 0) error = write_proc_self_file("/proc/self/uid_map", line, format_identity_map(line, uid));
  if (error == 0) error = write_proc_self_file("/proc/self/gid_map", line, format_identity_map(line, gid));
  return error == EACCES || error == EPERM ? 0 : error;
}

BASHEXEC_CHILD_CODE BASHEXEC_DECL int user_namespace_probe_child(void*) noexcept {
  int error = enter_own_user_namespace();
  if (error == 0 && ::syscall(SYS_unshare, CLONE_NEWNS) != 0) error = errno;
  if (error == 0 && ::syscall(SYS_mount, nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) error = errno;
  // Returned, not passed to an exit loop here: glibc's clone() ends the
  // child with this value (raw exit), and a function that returns keeps
  // its result (spawn/detail/fork_exec_child.hpp, "The optimiser").
  return error == 0 ? 0 : (error & 0xff) == 0 ? 255 : error & 0xff;
}

BASHEXEC_DECL bool user_namespace_available() noexcept {
  static const bool available = [] {
    try {
      vfork_stack stack;
      pid_t pid = -1;
      {
        all_signals_blocked blocked;
        pid = ::clone(&user_namespace_probe_child, stack.top(), CLONE_VM | CLONE_VFORK | SIGCHLD, nullptr);
      }
      if (pid < 0) return false;
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return false;
      return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    } catch (...) {  // the stack's mmap failed: no answer is "no"
      return false;
    }
  }();
  return available;
}

}  // namespace bashexec::detail

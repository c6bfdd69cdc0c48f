// detail/user_namespace: giving an unprivileged confined child the powers
// root's hook uses — a private mount namespace, an empty bounding set — by
// moving it into a user namespace of its own, with the caller's uid and gid
// mapped 1:1 (as `unshare -r` does, but to the same ids, not to 0).
//
// The step runs in fork_exec's CLONE_VM | CLONE_VFORK child: bare system
// calls only, no allocation. unshare(CLONE_NEWUSER) implies CLONE_THREAD and
// CLONE_FS, so the kernel requires a single-member thread group and an
// unshared fs_struct; a vfork child is its own thread group (no
// CLONE_THREAD) with its own fs_struct (no CLONE_FS), and sharing the mm is
// no obstacle (only setns into a user namespace refuses a shared mm). The
// child writes its own maps, which an unprivileged process may do for
// exactly one id each — its effective uid and gid — after denying
// setgroups(2) for the gid map.
//
// What the command then sees: its own uid and gid unchanged; every other id
// — root's files, other users' processes, supplementary groups it still
// holds — reads as the overflow ids (65534, "nobody"/"nogroup"), exactly as
// under an unprivileged bwrap. Access checks still use the real ids: a file
// owned by root stays root's, whatever `ls -l` prints.
//
// An undumpable host (PR_SET_DUMPABLE 0, `harden_host_process`) cannot
// write the maps: the child shares its memory until exec, so its /proc
// files belong to root and opening them fails with EACCES (and root without
// CAP_SETFCAP may not map uid 0: EPERM). The namespace is then kept without
// maps — the powers it is entered for (a mount namespace,
// dropping the bounding set) need none — and the command sees its own uid
// and gid as the overflow ids too, while it still acts as the caller: files
// it creates are the caller's, and every access check uses the real ids.
//
// Whether the kernel allows it (user.max_user_namespaces > 0, Debian's
// kernel.unprivileged_userns_clone, no LSM or seccomp profile refusing it)
// is probed once per process by doing it: `user_namespace_available()`.
#pragma once

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

#include "bashexec/detail/fork_exec_child.hpp"

// Code that runs in the CLONE_VM child: no AddressSanitizer instrumentation
// (see detail/fork_exec_child.hpp, "Sanitizers").
#if defined(__GNUC__) || defined(__clang__)
#define BASHEXEC_DETAIL_USERNS_CHILD __attribute__((no_sanitize_address))
#else
#define BASHEXEC_DETAIL_USERNS_CHILD
#endif

namespace bashexec::detail {

/// Writes `length` bytes of `text` to a /proc/self file in one write, as
/// the id-map files demand. Returns 0 or an errno value.
BASHEXEC_DETAIL_USERNS_CHILD inline int write_proc_self_file(const char* path, const char* text, std::size_t length) noexcept {
  const long fd = ::syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const long written = ::syscall(SYS_write, fd, text, length);
  const int error = written < 0 ? errno : static_cast<std::size_t>(written) == length ? 0 : EIO;
  ::syscall(SYS_close, fd);
  return error;
}

/// "<id> <id> 1\n" into `out` (at least 36 bytes); returns the length.
BASHEXEC_DETAIL_USERNS_CHILD inline std::size_t format_identity_map(char* out, unsigned long id) noexcept {
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

/// Moves the calling process into a new user namespace in which its
/// effective uid and gid map to themselves (unmapped when the host is
/// undumpable: see the header comment); it then holds every capability
/// there (and none over the host's resources). Async-signal-safe. Returns 0
/// or an errno value (EPERM, ENOSPC at user.max_user_namespaces, EINVAL).
BASHEXEC_DETAIL_USERNS_CHILD inline int enter_own_user_namespace() noexcept {
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

/// The probe's child: the user namespace and a private mount namespace in
/// it, exactly as a spawn's hook would make them; exits with 0 or the errno.
BASHEXEC_DETAIL_USERNS_CHILD inline int user_namespace_probe_child(void*) noexcept {
  int error = enter_own_user_namespace();
  if (error == 0 && ::syscall(SYS_unshare, CLONE_NEWNS) != 0) error = errno;
  if (error == 0 && ::syscall(SYS_mount, nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) error = errno;
  for (;;) ::syscall(SYS_exit_group, error == 0 ? 0 : (error & 0xff) == 0 ? 255 : error & 0xff);
}

/// Whether this process can give a child a user namespace of its own (and a
/// mount namespace inside it). Asked once per process by cloning a child
/// that tries — a sysctl alone would miss an LSM or seccomp profile that
/// refuses the unshare — and remembered: the answer costs one spawn.
inline bool user_namespace_available() noexcept {
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

#undef BASHEXEC_DETAIL_USERNS_CHILD

// detail/capabilities: leaving a confined child with no capabilities at all,
// and a read-only view of chosen paths in a private mount namespace — the
// async-signal-safe steps a pre-exec hook (Landlock's) runs before exec.
//
// Why by hand rather than libcap: these run in fork_exec's CLONE_VM child,
// where only bare system calls are allowed (no allocation, no libc state);
// libcap's cap_* objects allocate. The calls are few and stable ABI.
#pragma once

#include <cerrno>
#include <cstdint>

#include <linux/capability.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace bashexec::detail {

/// Empties every capability set of the calling process: the bounding set
/// (so an exec — of a root shell, of a file with capabilities — can grant
/// nothing back), the ambient, inheritable, permitted and effective sets.
/// Root keeps uid 0 but none of root's powers. Dropping the bounding set
/// needs CAP_SETPCAP: a caller without it (not root) has nothing in its
/// other sets to begin with, and no_new_privs keeps exec from adding any,
/// so EPERM there is skipped. Returns 0 or an errno value.
inline int drop_all_capabilities() noexcept {
  for (long cap = 0; cap < 64; ++cap) {
    if (::syscall(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) continue;
    if (errno == EINVAL) break;  // past the kernel's last capability
    if (errno == EPERM) break;   // no CAP_SETPCAP: not privileged (see above)
    return errno;
  }
  if (::syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) return errno;
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capset, &header, none) != 0) return errno;
  return 0;
}

/// Whether the calling thread holds `cap` in its effective set now (the
/// parent asks before planning a step that needs it).
inline bool has_effective_capability(int cap) noexcept {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  return (data[cap / 32].effective >> (cap % 32)) & 1U;
}

/// Moves the caller into a private mount namespace in which each of
/// `paths` (absolute, existing) is a read-only bind of itself. Needs
/// CAP_SYS_ADMIN; the host's mounts are untouched, and a command left with
/// no capabilities (and under Landlock, which refuses every mount call)
/// cannot undo it. Returns 0 or an errno value.
inline int bind_read_only_in_private_mount_namespace(const char* const* paths, int count) noexcept {
  if (count == 0) return 0;
  if (::syscall(SYS_unshare, CLONE_NEWNS) != 0) return errno;
  // Nothing we do here may propagate back to the host's namespace.
  if (::syscall(SYS_mount, nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  for (int i = 0; i < count; ++i) {
    if (::syscall(SYS_mount, paths[i], paths[i], nullptr, MS_BIND | MS_REC, nullptr) != 0) return errno;
    if (::syscall(SYS_mount, nullptr, paths[i], nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0)
      return errno;
  }
  return 0;
}

}  // namespace bashexec::detail

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
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace bashexec::detail {

/// Empties every capability set of the calling process: the bounding set
/// (so an exec — of a root shell, of a file with capabilities — can grant
/// nothing back), the ambient, inheritable, permitted and effective sets.
/// Root keeps uid 0 but none of root's powers. Dropping the bounding set
/// needs CAP_SETPCAP — root has it, and so has an ordinary user's child in
/// a user namespace of its own (detail/user_namespace.hpp). A caller with
/// neither (user namespaces refused) has nothing in its other sets to begin
/// with, and no_new_privs keeps exec from adding any, so EPERM there is
/// skipped. Returns 0 or an errno value.
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

/// The mount flags a read-only remount of the mount holding `path` must
/// keep: inside a user namespace the kernel locks nosuid, nodev, noexec and
/// the atime mode of mounts inherited from the host, and a remount that
/// would clear one fails with EPERM; outside one, clearing them would
/// quietly loosen the bind (a nosuid workspace with a setuid-capable .git).
/// Returns 0 and sets `flags`, or an errno value.
inline int mount_flags_to_keep(const char* path, unsigned long& flags) noexcept {
  struct statfs info;
#if defined(__LP64__)
  if (::syscall(SYS_statfs, path, &info) != 0) return errno;
#else
  if (::statfs(path, &info) != 0) return errno;  // struct statfs64 under _FILE_OFFSET_BITS=64
#endif
  flags = 0;
  if (info.f_flags & ST_NOSUID) flags |= MS_NOSUID;
  if (info.f_flags & ST_NODEV) flags |= MS_NODEV;
  if (info.f_flags & ST_NOEXEC) flags |= MS_NOEXEC;
  if (info.f_flags & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (info.f_flags & ST_NOATIME)
    flags |= MS_NOATIME;
  else if (info.f_flags & ST_RELATIME)
    flags |= MS_RELATIME;
  else
    flags |= MS_STRICTATIME;  // the kernel would otherwise default the remount to relatime
  return 0;
}

/// Moves the caller into a private mount namespace in which each of
/// `paths` (absolute, existing) is a read-only bind of itself. Needs
/// CAP_SYS_ADMIN over the caller's user namespace (root, or a child in a
/// user namespace of its own: detail/user_namespace.hpp); the host's mounts
/// are untouched, and a command left with no capabilities (and under
/// Landlock, which refuses every mount call) cannot undo it. Returns 0 or
/// an errno value.
inline int bind_read_only_in_private_mount_namespace(const char* const* paths, int count) noexcept {
  if (count == 0) return 0;
  if (::syscall(SYS_unshare, CLONE_NEWNS) != 0) return errno;
  // Nothing we do here may propagate back to the host's namespace.
  if (::syscall(SYS_mount, nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  for (int i = 0; i < count; ++i) {
    if (::syscall(SYS_mount, paths[i], paths[i], nullptr, MS_BIND | MS_REC, nullptr) != 0) return errno;
    unsigned long kept = 0;
    if (int error = mount_flags_to_keep(paths[i], kept); error != 0) return error;
    if (::syscall(SYS_mount, nullptr, paths[i], nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | kept, nullptr) != 0)
      return errno;
  }
  return 0;
}

}  // namespace bashexec::detail

// The bodies of detail/kernel/capabilities.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/capabilities.hpp"

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

BASHEXEC_DECL int drop_all_capabilities() noexcept {
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

BASHEXEC_DECL bool has_effective_capability(int cap) noexcept {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  return (data[cap / 32].effective >> (cap % 32)) & 1U;
}

BASHEXEC_DECL int mount_flags_to_keep(const char* path, unsigned long& flags) noexcept {
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

BASHEXEC_DECL int bind_read_only_in_private_mount_namespace(const char* const* paths, int count) noexcept {
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

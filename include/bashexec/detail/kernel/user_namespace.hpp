// detail/kernel/user_namespace: giving an unprivileged confined child the powers
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

#include <cstddef>

#include "bashexec/detail/kernel/vm_child.hpp"
#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// Writes `length` bytes of `text` to a /proc/self file in one write, as
/// the id-map files demand. Returns 0 or an errno value.
BASHEXEC_CHILD_CODE BASHEXEC_DECL int write_proc_self_file(const char* path, const char* text, std::size_t length) noexcept;

/// "<id> <id> 1\n" into `out` (at least 36 bytes); returns the length.
BASHEXEC_CHILD_CODE BASHEXEC_DECL std::size_t format_identity_map(char* out, unsigned long id) noexcept;

/// Moves the calling process into a new user namespace in which its
/// effective uid and gid map to themselves (unmapped when the host is
/// undumpable: see the header comment); it then holds every capability
/// there (and none over the host's resources). Async-signal-safe. Returns 0
/// or an errno value (EPERM, ENOSPC at user.max_user_namespaces, EINVAL).
BASHEXEC_CHILD_CODE BASHEXEC_DECL int enter_own_user_namespace() noexcept;

/// The probe's child: the user namespace and a private mount namespace in
/// it, exactly as a spawn's hook would make them; returns (so clone()'s
/// child exits with) 0, or the errno (255 when its low byte is 0).
BASHEXEC_CHILD_CODE BASHEXEC_DECL int user_namespace_probe_child(void*) noexcept;

/// Whether this process can give a child a user namespace of its own (and a
/// mount namespace inside it). Asked once per process by cloning a child
/// that tries — a sysctl alone would miss an LSM or seccomp profile that
/// refuses the unshare — and remembered: the answer costs one spawn.
BASHEXEC_DECL bool user_namespace_available() noexcept;

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/user_namespace.ipp"
#endif

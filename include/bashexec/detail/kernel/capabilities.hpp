// detail/kernel/capabilities: leaving a confined child with no capabilities at all,
// and a read-only view of chosen paths in a private mount namespace — the
// async-signal-safe steps a pre-exec hook (Landlock's) runs before exec.
//
// Why by hand rather than libcap: these run in fork_exec's CLONE_VM child,
// where only bare system calls are allowed (no allocation, no libc state);
// libcap's cap_* objects allocate. The calls are few and stable ABI.
#pragma once

// CAP_* for has_effective_capability.
#include <linux/capability.h>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// Empties every capability set of the calling process: the bounding set
/// (so an exec — of a root shell, of a file with capabilities — can grant
/// nothing back), the ambient, inheritable, permitted and effective sets.
/// Root keeps uid 0 but none of root's powers. Dropping the bounding set
/// needs CAP_SETPCAP — root has it, and so has an ordinary user's child in
/// a user namespace of its own (detail/kernel/user_namespace.hpp). A caller with
/// neither (user namespaces refused) has nothing in its other sets to begin
/// with, and no_new_privs keeps exec from adding any, so EPERM there is
/// skipped. Returns 0 or an errno value.
BASHEXEC_DECL int drop_all_capabilities() noexcept;

/// Whether the calling thread holds `cap` in its effective set now (the
/// parent asks before planning a step that needs it).
BASHEXEC_DECL bool has_effective_capability(int cap) noexcept;

/// The mount flags a read-only remount of the mount holding `path` must
/// keep: inside a user namespace the kernel locks nosuid, nodev, noexec and
/// the atime mode of mounts inherited from the host, and a remount that
/// would clear one fails with EPERM; outside one, clearing them would
/// quietly loosen the bind (a nosuid workspace with a setuid-capable .git).
/// Returns 0 and sets `flags`, or an errno value.
BASHEXEC_DECL int mount_flags_to_keep(const char* path, unsigned long& flags) noexcept;

/// Moves the caller into a private mount namespace in which each of
/// `paths` (absolute, existing) is a read-only bind of itself. Needs
/// CAP_SYS_ADMIN over the caller's user namespace (root, or a child in a
/// user namespace of its own: detail/kernel/user_namespace.hpp); the host's mounts
/// are untouched, and a command left with no capabilities (and under
/// Landlock, which refuses every mount call) cannot undo it. Returns 0 or
/// an errno value.
BASHEXEC_DECL int bind_read_only_in_private_mount_namespace(const char* const* paths, int count) noexcept;

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/capabilities.ipp"
#endif

// host_hardening: one call for a program that embeds an executor, so the
// commands it runs cannot read its environment, memory or descriptors
// through /proc (docs/security.md, "Embedding the executor").
//
// What it is for: a confined command cannot reach the host's /proc entries
// anyway (bwrap: a pid namespace; Landlock: ptrace-class access denied across
// domains), but an unconfined one (`danger-full-access`, `local_executor`)
// runs as the same user, and the kernel lets a same-user process read
// /proc/<pid>/environ, open /proc/<pid>/mem and follow /proc/<pid>/fd/N of a
// dumpable process. An undumpable process's /proc entries belong to root and
// need CAP_SYS_PTRACE over it: so a non-root command loses them, and so does
// ptrace attach. Root with its capabilities (an unconfined root command) is
// NOT stopped by this; only confinement stops it.
//
// Side effects, all the kernel's: no core dumps of the host; the flag is reset
// when the process changes its credentials (setuid, setgid, capset) or execs,
// so call it after any such change. Children are unaffected once they exec.
// Under Landlock, an ordinary user's undumpable host cannot write its child's
// user-namespace id maps: the command then sees its uid and gid as the
// overflow ids (65534) while keeping the caller's real ones (see
// detail/kernel/user_namespace.hpp).
#pragma once

#include "bashexec/detail/linkage.hpp"

namespace bashexec {

/// Makes the calling process undumpable (PR_SET_DUMPABLE 0). Throws
/// infrastructure_error when the kernel refuses.
BASHEXEC_DECL void harden_host_process();

/// Whether the calling process is undumpable now (hardened, or made so by
/// the kernel after a credential change).
BASHEXEC_DECL bool host_process_hardened() noexcept;

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/impl/host_hardening.ipp"
#endif

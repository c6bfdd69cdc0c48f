// detail/kernel/pidfd: race-free handles on our own children (pidfd_open, waitid).
#pragma once

#include <optional>

#include <sys/types.h>

#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/exit_facts.hpp"

namespace bashexec::detail {

BASHEXEC_DECL unique_fd pidfd_open(pid_t pid);

using bashexec::exit_facts;  // public vocabulary (exit_facts.hpp)

/// Reaps the child behind `pidfd` if it has exited; empty while it runs.
BASHEXEC_DECL std::optional<exit_facts> try_reap(int pidfd);

/// Blocks until the child exits and reaps it (used on error paths).
BASHEXEC_DECL void reap_blocking(pid_t pid) noexcept;

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/pidfd.ipp"
#endif

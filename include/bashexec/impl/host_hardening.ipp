// The bodies of host_hardening.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/host_hardening.hpp"

#include <sys/prctl.h>

#include "bashexec/detail/kernel/unique_fd.hpp"

namespace bashexec {

BASHEXEC_DECL void harden_host_process() {
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) detail::throw_syscall("prctl PR_SET_DUMPABLE 0");
}

BASHEXEC_DECL bool host_process_hardened() noexcept { return ::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0; }

}  // namespace bashexec

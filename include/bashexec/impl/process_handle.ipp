// The bodies of process_handle.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/process_handle.hpp"

#include <cerrno>
#include <optional>

#include <sys/types.h>
#include <sys/wait.h>

namespace bashexec {

BASHEXEC_DECL std::optional<exit_facts> process_handle::try_reap() {
  if (!pidfd_) return std::nullopt;
  auto facts = detail::try_reap(pidfd_.get());
  if (facts) pidfd_.reset();
  return facts;
}

BASHEXEC_DECL void process_handle::wait_blocking() noexcept {
  if (!pidfd_) return;
  siginfo_t info{};
  while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info, WEXITED) < 0 &&
         errno == EINTR) {
  }
  pidfd_.reset();
}

}  // namespace bashexec

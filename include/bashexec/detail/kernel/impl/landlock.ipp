// The bodies of detail/kernel/landlock.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/landlock.hpp"

#include <cerrno>

namespace bashexec::detail {

BASHEXEC_DECL int landlock_abi() noexcept {
  static const int abi = [] {
    int version = landlock_create_ruleset(nullptr, 0, landlock_create_ruleset_version);
    return version >= 0 ? version : -errno;
  }();
  return abi;
}

}  // namespace bashexec::detail

// The bodies of confinement.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/confinement.hpp"

#include <stdexcept>
#include <string>
#include <string_view>

namespace bashexec::detail {

BASHEXEC_DECL void refuse_unconfined_mode(std::string_view policy, sandbox_mode mode) {
  if (mode == sandbox_mode::danger_full_access)
    throw std::invalid_argument(std::string(policy) + ": danger-full-access is not confined; do not prepare it");
}

}  // namespace bashexec::detail

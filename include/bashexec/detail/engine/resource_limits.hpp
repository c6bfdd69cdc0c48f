// detail/engine/resource_limits: `resource_limits` (config) → the plan's
// `resource_limit_set` — soft = hard = the configured value, clamped to the
// host's current hard limit so a limit only ever tightens.
#pragma once

#include "bashexec/config.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/launch.hpp"

namespace bashexec::detail {

/// Read per spawn (a getrlimit each): the host's limits may change.
BASHEXEC_DECL resource_limit_set plan_limits(const resource_limits& limits);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/engine/impl/resource_limits.ipp"
#endif

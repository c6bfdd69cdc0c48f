// The bodies of detail/engine/spill_placement.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/spill_placement.hpp"

#include <system_error>

#include <fmt/core.h>

#include "bashexec/spill_directory.hpp"

namespace bashexec::detail {

BASHEXEC_DECL std::filesystem::path choose_spill_parent(const executor_config& config,
                                                        const std::filesystem::path& workspace_root, bool confining) {
  if (config.spill_parent) return *config.spill_parent;
  const auto candidates = default_spill_parents();
  if (confining)
    for (const auto& candidate : candidates)
      if (!writable_root_holding(candidate, workspace_root)) return candidate;
  return candidates.front();  // under a writable root: each workspace-write spawn binds it read-only
}

}  // namespace bashexec::detail

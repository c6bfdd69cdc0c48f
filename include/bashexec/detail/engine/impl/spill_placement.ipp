// The bodies of detail/engine/spill_placement.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/spill_placement.hpp"

#include <stdexcept>
#include <system_error>

#include <fmt/core.h>

#include "bashexec/detail/spill_directory.hpp"

namespace bashexec::detail {

BASHEXEC_DECL std::filesystem::path choose_spill_parent(const executor_config& config,
                                                        const std::filesystem::path& workspace_root, bool confining) {
  if (config.spill_parent) {
    if (confining)
      if (auto root = writable_root_holding(*config.spill_parent, workspace_root))
        throw std::invalid_argument(fmt::format(
            "spill_parent {} lies under {}, which workspace-write commands may write; spill files must be "
            "readable but never writable by confined commands: choose a directory outside it",
            config.spill_parent->string(), root->string()));
    return *config.spill_parent;
  }
  const auto candidates = default_spill_parents();
  if (confining)
    for (const auto& candidate : candidates)
      if (!writable_root_holding(candidate, workspace_root)) return candidate;
  return candidates.front();
}

}  // namespace bashexec::detail

// The bodies of detail/engine/spill_placement.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/spill_placement.hpp"

#include <algorithm>
#include <system_error>

#include <fmt/core.h>

#include "bashexec/detail/spill_directory.hpp"

namespace bashexec::detail {

BASHEXEC_DECL std::optional<std::filesystem::path> writable_root_holding(const std::filesystem::path& path,
                                                                         const std::filesystem::path& workspace_root) {
  std::error_code ignored;
  const auto target = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ignored), ignored);
  for (const std::filesystem::path& root : {std::filesystem::path("/tmp"), workspace_root}) {
    const auto base = std::filesystem::weakly_canonical(root, ignored);
    if (std::mismatch(base.begin(), base.end(), target.begin(), target.end()).first == base.end()) return root;
  }
  return std::nullopt;
}

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

// detail/engine/spill_placement: where an executor's spill directory goes.
// A confining executor keeps spill files outside every root a confined
// command may write — Landlock cannot make a path read-only inside a root it
// grants — so nothing a command runs can write, rename or remove them.
#pragma once

#include <filesystem>
#include <optional>

#include "bashexec/config.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/detail/writable_roots.hpp"

namespace bashexec::detail {

/// The spill parent: a confining executor refuses a configured one under a
/// writable root (std::invalid_argument naming spill_parent) and skips such
/// default candidates.
BASHEXEC_DECL std::filesystem::path choose_spill_parent(const executor_config& config,
                                                        const std::filesystem::path& workspace_root, bool confining);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/engine/impl/spill_placement.ipp"
#endif

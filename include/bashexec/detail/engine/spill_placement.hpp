// detail/engine/spill_placement: where an executor's spill directory goes.
// A confining executor keeps spill files outside every root a confined
// command may write when it can, so nothing a command runs can write,
// rename or remove them. Where every place lies under one (a workspace of
// `/`), a workspace-write spawn makes the directory first and binds it
// read-only at its own path (bwrap always; Landlock in its private mount
// namespace, and refuses the spawn where it cannot make one).
#pragma once

#include <filesystem>
#include <optional>

#include "bashexec/config.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/detail/trust/writable_roots.hpp"

namespace bashexec::detail {

/// The spill parent: the configured one, else the first default candidate
/// outside every writable root (for a confining executor), else the first.
/// A workspace-write spawn binds a spill directory under a writable root
/// read-only (launch_builder).
BASHEXEC_DECL std::filesystem::path choose_spill_parent(const executor_config& config,
                                                        const std::filesystem::path& workspace_root, bool confining);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/engine/impl/spill_placement.ipp"
#endif

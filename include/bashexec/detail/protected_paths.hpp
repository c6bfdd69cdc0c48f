// detail/protected_paths: where `sandbox.protected_paths` are under a
// workspace root right now — shared by the bwrap profile and Landlock's hook,
// which both bind them read-only (Landlock only where it can have a mount
// namespace; elsewhere it reports `partial`).
#pragma once

#include <filesystem>
#include <vector>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// Whether any protected path (relative, checked by `validate`) exists under
/// `root`, symlinks followed.
BASHEXEC_DECL bool any_protected_path_exists(const std::filesystem::path& root,
                                             const std::vector<std::filesystem::path>& protected_paths);

/// The protected paths that exist under `root`, as the absolute locations
/// inside the workspace that must stay read-only (no trailing separator). A
/// symlink is resolved: bind mounts cannot land on one (bwrap fails "Unable
/// to mount source on destination"), and its target is what a write would
/// reach. A target outside the workspace is dropped — outside the writable
/// bind it is read-only already — and so is a dangling link.
BASHEXEC_DECL std::vector<std::filesystem::path> existing_protected_paths(
    const std::filesystem::path& root, const std::vector<std::filesystem::path>& protected_paths);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/impl/protected_paths.ipp"
#endif

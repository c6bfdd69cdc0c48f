// confinement/detail/protected_paths: what must stay read-only under `workspace-write`
// in a workspace right now (docs/security.md "Protected paths") — shared by
// the bwrap profile and Landlock's hook, which both bind each of them
// read-only over the writable workspace (Landlock only where it can have a
// mount namespace; elsewhere it reports `partial`).
#pragma once

#include <cstddef>
#include <filesystem>
#include <vector>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// `sandbox_config::protected_scan_limit`'s default (a test keeps them
/// equal): directory entries read looking for nested repositories.
inline constexpr std::size_t default_protected_scan_limit = 200000;

/// The configured protected paths that exist under `root`, as the absolute
/// locations inside the workspace that must stay read-only (no trailing
/// separator). A symlink is resolved: bind mounts cannot land on one (bwrap
/// fails "Unable to mount source on destination"), and its target is what a
/// write would reach. A target outside the workspace is dropped — outside
/// the writable bind it is read-only already — and so is a dangling link.
BASHEXEC_DECL std::vector<std::filesystem::path> existing_protected_paths(
    const std::filesystem::path& root, const std::vector<std::filesystem::path>& protected_paths);

/// Everything a workspace-write spawn under `root` must not write: the
/// existing configured paths and, when `.git` is one of them, every
/// repository a human may use there —
///   - each `.git` entry found walking `root` (symlinks not followed, `.git`
///     not entered): a directory, or a gitdir file with the gitdir it names
///     and that gitdir's `commondir`;
///   - the repository enclosing `root`, found upwards as git finds it;
///   - the `core.hooksPath` each of their config files (`config`,
///     `config.worktree`, the common dir's `config`) names, and every file
///     they `include`, read by confinement/detail/git_config.hpp, never by running git;
///   - a directory the walk cannot read (what it holds is unknown).
/// A workspace of / is not walked (workspace-write there grants the whole
/// tree; docs/security.md "Protected paths"): only the configured paths.
/// Only locations inside the workspace are returned (outside it everything
/// is read-only already), resolved, minimal (none lies under another).
/// Throws sandbox_unavailable rather than leave a repository writable:
/// when the walk would read more than `scan_limit` directory entries, or a
/// hooks path or included file inside the workspace does not exist yet (a
/// command could create it, and a bind cannot cover what does not exist).
BASHEXEC_DECL std::vector<std::filesystem::path> protected_locations(
    const std::filesystem::path& root, const std::vector<std::filesystem::path>& protected_paths,
    std::size_t scan_limit = default_protected_scan_limit);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/confinement/detail/impl/protected_paths.ipp"
#endif

// detail/trust/writable_roots: the roots a confined command may write under
// workspace-write (the workspace and /tmp, contract 13), and whether a path
// lies under one. Whatever the host later reads as trusted — spill files, the
// programs it executes — must lie outside them.
#pragma once

#include <filesystem>
#include <optional>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// The writable root (/tmp or the workspace, as workspace-write grants
/// them) that `path` lies under, if any; both sides are compared with
/// symlinks resolved.
BASHEXEC_DECL std::optional<std::filesystem::path> writable_root_holding(const std::filesystem::path& path,
                                                                         const std::filesystem::path& workspace_root);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/trust/impl/writable_roots.ipp"
#endif

// confinement/detail/bwrap_profile: the bwrap-shaped arguments that confine one spawn
// (docs/contract.md item 14), shared by `bwrap` and `runner_command` (any
// bwrap-compatible runner); what each argument promises is explained in
// confinement/bwrap.hpp.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "bashexec/confinement/detail/protected_paths.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/network_access.hpp"
#include "bashexec/sandbox_mode.hpp"

namespace bashexec::detail {

/// The profile confining one spawn under `mode`. Never called for
/// danger-full-access. Under workspace-write the protected locations of
/// `root` (confinement/detail/protected_paths.hpp: `protected_paths`, and every
/// repository when they name `.git`, reading at most `scan_limit` entries)
/// are bound read-only over the workspace bind; then each of
/// `read_only_paths` that exists. A confined `network` ends the list with
/// `--unshare-net`. Throws sandbox_unavailable when the protected locations
/// cannot be established.
BASHEXEC_DECL std::vector<std::string> bwrap_profile_args(sandbox_mode mode, const std::filesystem::path& root,
                                                        const std::vector<std::filesystem::path>& protected_paths = {},
                                                        network_access network = network_access::full,
                                                        const std::vector<std::filesystem::path>& read_only_paths = {},
                                                        std::size_t scan_limit = default_protected_scan_limit);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/confinement/detail/impl/bwrap_profile.ipp"
#endif

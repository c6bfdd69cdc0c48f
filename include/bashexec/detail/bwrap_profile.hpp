// detail/bwrap_profile: the bwrap-shaped arguments that confine one spawn
// (docs/contract.md item 14), shared by `bwrap` and `runner_command` (any
// bwrap-compatible runner); what each argument promises is explained in
// confinement/bwrap.hpp.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "bashexec/detail/linkage.hpp"
#include "bashexec/network_access.hpp"
#include "bashexec/sandbox_mode.hpp"

namespace bashexec::detail {

/// The profile confining one spawn under `mode`. Never called for
/// danger-full-access. Protected paths that exist under `root` are bound
/// read-only over the workspace bind (workspace-write only), then each of
/// `read_only_paths` that exists. A confined `network` ends the list with
/// `--unshare-net`.
BASHEXEC_DECL std::vector<std::string> bwrap_profile_args(sandbox_mode mode, const std::filesystem::path& root,
                                                        const std::vector<std::filesystem::path>& protected_paths = {},
                                                        network_access network = network_access::full,
                                                        const std::vector<std::filesystem::path>& read_only_paths = {});

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/impl/bwrap_profile.ipp"
#endif

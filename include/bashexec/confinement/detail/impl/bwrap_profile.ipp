// The bodies of confinement/detail/bwrap_profile.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/confinement/detail/bwrap_profile.hpp"

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "bashexec/confinement/detail/protected_paths.hpp"
#include "bashexec/network_access.hpp"
#include "bashexec/sandbox_mode.hpp"

namespace bashexec::detail {

BASHEXEC_DECL std::vector<std::string> bwrap_profile_args(sandbox_mode mode, const std::filesystem::path& root,
                                                        const std::vector<std::filesystem::path>& protected_paths,
                                                        network_access network,
                                                        const std::vector<std::filesystem::path>& read_only_paths,
                                                        std::size_t scan_limit) {
  std::vector<std::string> args{"--ro-bind", "/",     "/",          "--dev", "/dev",
                                "--unshare-pid", "--proc", "/proc", "--cap-drop", "ALL", "--die-with-parent"};
  if (mode == sandbox_mode::workspace_write) {
    const std::string dir = root.string();
    args.insert(args.end(), {"--tmpfs", "/tmp", "--bind", dir, dir});
    for (const auto& path : protected_locations(root, protected_paths, scan_limit))
      args.insert(args.end(), {"--ro-bind", path.string(), path.string()});
  }
  for (const auto& path : read_only_paths) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) args.insert(args.end(), {"--ro-bind", path.string(), path.string()});
  }
  if (isolates_network(network)) args.emplace_back("--unshare-net");
  return args;
}

}  // namespace bashexec::detail

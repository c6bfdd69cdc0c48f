// The bodies of detail/protected_paths.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/protected_paths.hpp"

#include <system_error>
#include <utility>

namespace bashexec::detail {

BASHEXEC_DECL bool any_protected_path_exists(const std::filesystem::path& root,
                                             const std::vector<std::filesystem::path>& protected_paths) {
  for (const auto& relative : protected_paths) {
    std::error_code ec;
    if (std::filesystem::exists(root / relative, ec)) return true;
  }
  return false;
}

BASHEXEC_DECL std::vector<std::filesystem::path> existing_protected_paths(
    const std::filesystem::path& root, const std::vector<std::filesystem::path>& protected_paths) {
  std::vector<std::filesystem::path> found;
  std::error_code ec;
  const std::filesystem::path real_root = std::filesystem::canonical(root, ec);
  if (ec) return found;
  for (const auto& relative : protected_paths) {
    const std::filesystem::path target = std::filesystem::canonical(root / relative, ec);
    if (ec) continue;  // missing or dangling
    const std::filesystem::path inside = target.lexically_relative(real_root);
    if (inside.empty() || *inside.begin() == "..") continue;
    std::filesystem::path path = (root / inside).lexically_normal();
    if (path.filename().empty()) path = path.parent_path();  // "…/ws/." normalises to "…/ws/"
    found.push_back(std::move(path));
  }
  return found;
}

}  // namespace bashexec::detail

// detail/protected_paths: where `sandbox.protected_paths` are under a
// workspace root right now — shared by the bwrap profile and Landlock's hook,
// which both bind them read-only (Landlock only where it can have a mount
// namespace; elsewhere it reports `partial`).
#pragma once

#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

namespace bashexec::detail {

/// Whether any protected path (relative, checked by `validate`) exists under
/// `root`, symlinks followed.
inline bool any_protected_path_exists(const std::filesystem::path& root,
                                      const std::vector<std::filesystem::path>& protected_paths) {
  for (const auto& relative : protected_paths) {
    std::error_code ec;
    if (std::filesystem::exists(root / relative, ec)) return true;
  }
  return false;
}

/// The protected paths that exist under `root`, as the absolute locations
/// inside the workspace that must stay read-only (no trailing separator). A
/// symlink is resolved: bind mounts cannot land on one (bwrap fails "Unable
/// to mount source on destination"), and its target is what a write would
/// reach. A target outside the workspace is dropped — outside the writable
/// bind it is read-only already — and so is a dangling link.
inline std::vector<std::filesystem::path> existing_protected_paths(
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

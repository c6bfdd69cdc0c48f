// The bodies of detail/trust/writable_roots.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/trust/writable_roots.hpp"

#include <algorithm>
#include <system_error>

namespace bashexec::detail {

BASHEXEC_DECL std::optional<std::filesystem::path> writable_root_holding(const std::filesystem::path& path,
                                                                         const std::filesystem::path& workspace_root) {
  std::error_code ignored;
  const auto target = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ignored), ignored);
  for (const std::filesystem::path& root : {std::filesystem::path("/tmp"), workspace_root}) {
    const auto base = std::filesystem::weakly_canonical(root, ignored);
    if (std::mismatch(base.begin(), base.end(), target.begin(), target.end()).first == base.end()) return root;
  }
  return std::nullopt;
}

}  // namespace bashexec::detail

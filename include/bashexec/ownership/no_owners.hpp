// ownership/no_owners: store no owner at all — for single-tenant harnesses
// where every task is open to every caller.
#pragma once

#include <optional>
#include <string_view>

#include "bashexec/ownership.hpp"

namespace bashexec {

/// Stores nothing: every task is ownerless and open to every caller.
struct no_owners {
  static constexpr std::string_view name = "no_owners";
  static std::optional<owner_token> keep(const std::optional<owner_token>&) { return std::nullopt; }
  static bool may_access(const std::optional<owner_token>&, const std::optional<owner_token>&) { return true; }
};

}  // namespace bashexec

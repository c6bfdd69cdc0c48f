// ownership/tracked_owners: store each background task's owner token
// verbatim, so that only its owner may read or kill it (docs/contract.md
// items 11 and 19).
#pragma once

#include <optional>
#include <string_view>

#include "bashexec/ownership.hpp"

namespace bashexec {

/// Stores each task's owner token verbatim. An owned task is open to its
/// owner only (the empty token is an owner like any other, and a caller
/// without a session is not it); an ownerless task is open to everyone.
struct tracked_owners {
  static constexpr std::string_view name = "tracked_owners";
  static std::optional<owner_token> keep(const std::optional<owner_token>& owner) { return owner; }
  static bool may_access(const std::optional<owner_token>& stored, const std::optional<owner_token>& caller) {
    return !stored || stored == caller;
  }
};

}  // namespace bashexec

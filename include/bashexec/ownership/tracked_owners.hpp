// ownership/tracked_owners: store each background task's owner token
// verbatim, so a tool layer can fence tasks per session (contract 11, 19).
#pragma once

#include <optional>
#include <string_view>

#include "bashexec/ownership.hpp"

namespace bashexec {

/// Stores each task's owner token verbatim.
struct tracked_owners {
  static constexpr std::string_view name = "tracked_owners";
  static std::optional<owner_token> keep(const std::optional<owner_token>& owner) { return owner; }
};

}  // namespace bashexec

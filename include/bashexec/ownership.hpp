// ownership: the owner-token policies of background tasks (contract 11).
//
// Minimal complete definition of an ownership policy `P`:
//   static std::optional<owner_token> keep(const std::optional<owner_token>&);
// `keep` decides what is stored with a task; the executor never interprets it.
#pragma once

#include <concepts>
#include <optional>
#include <string_view>

#include "bashexec/ids.hpp"

namespace bashexec {

template <class P>
concept ownership_policy = requires(const std::optional<owner_token>& owner) {
  { P::keep(owner) } -> std::same_as<std::optional<owner_token>>;
};

}  // namespace bashexec

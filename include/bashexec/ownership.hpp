// ownership: the owner-token policies of background tasks (docs/contract.md
// items 11 and 19): what is stored with a task, and who may use it.
//
// Minimal complete definition of an ownership policy `P`:
//   static std::optional<owner_token> keep(const std::optional<owner_token>& requested);
//     what is stored with a task started for `requested`; the executor
//     stores it verbatim and never interprets it.
//   static bool may_access(const std::optional<owner_token>& stored,
//                          const std::optional<owner_token>& caller);
//     whether `caller` (empty: a caller without a session) may read or kill
//     a task that stores `stored`. The executor answers
//     `may_access(id, caller)` with it; the tool layer's owner fence asks it.
#pragma once

#include <concepts>
#include <optional>
#include <string_view>

#include "bashexec/ids.hpp"

namespace bashexec {

template <class P>
concept ownership_policy = requires(const std::optional<owner_token>& owner) {
  { P::keep(owner) } -> std::same_as<std::optional<owner_token>>;
  { P::may_access(owner, owner) } -> std::same_as<bool>;
};

}  // namespace bashexec

// owner_prefix: an out-of-tree ownership policy (docs/extending.md). Only
// tokens that name a session ("session-…") fence a task; any other token
// (a harness's internal caller, a cron job) leaves the task open to all.
// Tokens are still never interpreted beyond that: a fenced task stores its
// token verbatim and is its owner's only. It uses only bashexec's installed
// headers and passes the ownership laws.
#pragma once

#include <optional>
#include <string_view>

#include <bashexec/ids.hpp>
#include <bashexec/ownership.hpp>

namespace example {

struct owner_prefix {
  static constexpr std::string_view name = "owner_prefix";
  static constexpr std::string_view prefix = "session-";

  // What is stored with a task: the token verbatim, or nothing at all.
  static std::optional<bashexec::owner_token> keep(const std::optional<bashexec::owner_token>& requested) {
    if (requested && requested->value().starts_with(prefix)) return requested;
    return std::nullopt;
  }
  // Who may read or kill it: anyone when nothing is stored, else its owner.
  static bool may_access(const std::optional<bashexec::owner_token>& stored,
                         const std::optional<bashexec::owner_token>& caller) {
    return !stored || stored == caller;
  }
};

static_assert(bashexec::ownership_policy<owner_prefix>);

}  // namespace example

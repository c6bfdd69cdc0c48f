// laws/ownership: the laws every ownership policy keeps (ownership.hpp,
// docs/contract.md items 11 and 19), as a function a policy's author runs
// against their own type, from any test framework or none:
//   auto report = bashexec::laws::check_ownership_laws<my_policy>();
//   if (!report.passed()) …print report.violations…
// The laws, over tokens that differ only in case, spacing, a prefix, a NUL
// or multi-byte text, session-shaped ones, and the empty token (an owner
// like any other):
//   - stored verbatim or not at all: `keep(x)` is `x` or empty, never another
//     token, and the same every time; `keep(empty)` invents no owner;
//   - ownerless is open: a task that stores no owner is open to every
//     caller, a caller without a session included;
//   - owned is its owner's only: a task that stores `x` is open to `x` and
//     to no other caller (nor to a caller without a session);
//   - the executor obeys the policy: a background task started for `x`
//     stores `keep(x)` (snapshot and `owner_of`, before and after it
//     settled), and `may_access` answers what the policy answers;
//     `may_access` on an unknown id throws unknown_task.
// The shipped policies pass them (tests/laws/test_ownership_laws.cpp); so must a
// new one (docs/extending.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "bashexec/basic_executor.hpp"
#include "bashexec/impl/basic_executor.hpp"  // composes its own executor over the policy
#include "bashexec/errors.hpp"
#include "bashexec/ids.hpp"
#include "bashexec/laws/detail/scratch.hpp"
#include "bashexec/laws/report.hpp"
#include "bashexec/ownership.hpp"
#include "bashexec/policies.hpp"

namespace bashexec::laws {

namespace detail {

/// Tokens a policy that interprets them would confuse.
inline std::vector<owner_token> ownership_tokens() {
  return {owner_token("alice"),         owner_token("Alice"),         owner_token(" alice"),
          owner_token("alice "),        owner_token("alice-2"),       owner_token(""),
          owner_token("session-alice"), owner_token("session-Alice"), owner_token("session-"),
          owner_token(std::string("a\0b", 3)), owner_token("séance ☃"), owner_token("bash-1")};
}

inline std::string describe(const std::optional<owner_token>& token) {
  return token ? fmt::format("\"{}\"", token->value()) : std::string("none");
}

}  // namespace detail

/// Checks ownership policy `P` against the ownership laws above.
template <class P>
  requires ownership_policy<P>
report check_ownership_laws() {
  namespace d = detail;
  report result;
  std::string name = "ownership policy";
  if constexpr (requires { P::name; }) name = std::string(std::string_view(P::name));
  const auto tokens = d::ownership_tokens();
  std::vector<std::optional<owner_token>> callers(tokens.begin(), tokens.end());
  callers.push_back(std::nullopt);  // a caller without a session
  auto law = [&](std::string_view what, auto&& body) { d::check_law(result, name, what, body); };

  law("an owner is stored verbatim or not at all", [&](auto violated) {
    if (auto kept = P::keep(std::nullopt)) violated(fmt::format("keep(none) invented the owner {}", d::describe(kept)));
    for (const auto& token : tokens) {
      const auto kept = P::keep(token);
      if (kept && *kept != token)
        violated(fmt::format("keep({}) stored {}, another token", d::describe(token), d::describe(kept)));
      if (P::keep(token) != kept) violated(fmt::format("keep({}) answered differently twice", d::describe(token)));
    }
  });

  law("a task that stores no owner is open to every caller", [&](auto violated) {
    for (const auto& caller : callers)
      if (!P::may_access(std::nullopt, caller))
        violated(fmt::format("an ownerless task is closed to caller {}", d::describe(caller)));
  });

  law("a task that stores an owner is open to that owner only", [&](auto violated) {
    for (const auto& token : tokens) {
      const auto stored = P::keep(token);
      if (!stored) continue;
      for (const auto& caller : callers) {
        const bool expected = caller == stored;
        if (P::may_access(stored, caller) != expected)
          violated(fmt::format("a task owned by {} is {} to caller {}", d::describe(stored),
                               expected ? "closed" : "open", d::describe(caller)));
      }
    }
  });

  law("the executor stores what keep returns and asks may_access", [&](auto violated) {
    executor_config config;
    config.cwd = "/";
    config.kill_grace = std::chrono::milliseconds(300);
    config.error_sink = [](std::string_view) {};
    basic_executor<policies<own_with<P>>> executor(config);
    std::vector<std::optional<owner_token>> requested(tokens.begin(), tokens.end());
    requested.push_back(std::nullopt);
    for (const auto& owner : requested) {
      const auto expected = P::keep(owner);
      const task_id id = executor.start(executor.resolve({.command = "true", .owner = owner}));
      if (executor.owner_of(id) != expected)
        violated(fmt::format("a running task started for {} stores {}, keep said {}", d::describe(owner),
                             d::describe(executor.owner_of(id)), d::describe(expected)));
      const task_snapshot done = executor.wait(id);
      if (done.owner != expected || executor.owner_of(id) != expected)
        violated(fmt::format("a settled task started for {} stores {} (snapshot {}), keep said {}",
                             d::describe(owner), d::describe(executor.owner_of(id)), d::describe(done.owner),
                             d::describe(expected)));
      for (const auto& caller : callers)
        if (executor.may_access(id, caller) != P::may_access(expected, caller))
          violated(fmt::format("the executor's may_access for a task of {} and caller {} is not the policy's",
                               d::describe(owner), d::describe(caller)));
    }
    try {
      (void)executor.may_access(task_id("bash-999999"), std::nullopt);
      violated("may_access on an unknown id did not throw");
    } catch (const unknown_task&) {
    }
  });
  return result;
}

}  // namespace bashexec::laws

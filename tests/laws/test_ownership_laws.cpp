// The ownership laws (bashexec/laws/ownership.hpp: stored verbatim or not
// at all, ownerless is open, owned is its owner's only, the executor obeys
// the policy; docs/contract.md items 11 and 19) over every shipped
// ownership policy, each its own test case, and the negative controls the
// laws must catch.
#include <optional>
#include <string>

#include <catch2/catch.hpp>

#include <bashexec/laws/ownership.hpp>
#include <bashexec/ownership/no_owners.hpp>
#include <bashexec/ownership/tracked_owners.hpp>

#include "../../docs/examples/extending/owner_prefix.hpp"

using namespace bashexec;

namespace {

std::string joined(const laws::report& report) {
  std::string all;
  for (const auto& violation : report.violations) all += violation + "\n";
  return all;
}

/// Interprets tokens: stores them lower-cased, so "Alice" owns alice's tasks.
struct folds_case {
  static constexpr std::string_view name = "folds_case";
  static std::optional<owner_token> keep(const std::optional<owner_token>& owner) {
    if (!owner) return std::nullopt;
    std::string folded = owner->value();
    for (char& c : folded) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return owner_token(folded);
  }
  static bool may_access(const std::optional<owner_token>& stored, const std::optional<owner_token>& caller) {
    return !stored || stored == keep(caller);
  }
};

/// Stores owners but lets a caller without a session into every task.
struct sessionless_pass {
  static constexpr std::string_view name = "sessionless_pass";
  static std::optional<owner_token> keep(const std::optional<owner_token>& owner) { return owner; }
  static bool may_access(const std::optional<owner_token>& stored, const std::optional<owner_token>& caller) {
    return !stored || !caller || stored == caller;
  }
};

}  // namespace

TEMPLATE_TEST_CASE("ownership laws: every shipped ownership policy, and the out-of-tree one, keeps them (contract 11, 19)",
                   "[ownership][laws]", tracked_owners, no_owners, example::owner_prefix) {
  const laws::report report = laws::check_ownership_laws<TestType>();
  REQUIRE_FALSE(report.unavailable);
  for (const auto& violation : report.violations) FAIL_CHECK(violation);
  CHECK(report.verdict() == laws::verdict::laws_hold);
}

TEST_CASE("ownership laws: a policy that interprets tokens breaks them (negative control)", "[ownership][laws]") {
  const laws::report report = laws::check_ownership_laws<folds_case>();
  INFO(joined(report));
  REQUIRE(report.verdict() == laws::verdict::broken);
  CHECK_THAT(joined(report), Catch::Contains("folds_case: an owner is stored verbatim or not at all"));
  CHECK_THAT(joined(report), Catch::Contains("a task that stores an owner is open to that owner only"));
}

TEST_CASE("ownership laws: a policy that opens owned tasks to callers without a session breaks them (negative "
          "control)",
          "[ownership][laws]") {
  const laws::report report = laws::check_ownership_laws<sessionless_pass>();
  INFO(joined(report));
  REQUIRE(report.verdict() == laws::verdict::broken);
  CHECK_THAT(joined(report), Catch::Contains("open to caller none"));
}

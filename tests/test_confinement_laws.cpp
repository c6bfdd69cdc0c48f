// The confinement laws (bashexec/laws/confinement.hpp: writes denied per
// mode, /dev/null writable, denial dialect recognized; docs/contract.md items
// 13, 16, 17) over every shipped confining policy, through a real executor —
// one law instead of a copy of the same case per backend. A policy this
// machine cannot run (no bwrap, no Landlock) WARNs "skipped: …".
//
// The policies are listed to Catch2's TEMPLATE_TEST_CASE: each is then its
// own test case, named by its type, which a Hana loop inside one case would
// hide.
#include <cctype>
#include <string>

#include <catch2/catch.hpp>

#include <bashexec/confinement/bwrap.hpp>
#include <bashexec/confinement/chain.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/confinement/runner_command.hpp>
#include <bashexec/laws/confinement.hpp>

using namespace bashexec;

namespace {

/// How the laws configure each policy: bwrap itself as the operator's
/// bwrap-compatible runner.
template <class C>
typename C::config config_for() {
  return {};
}
template <>
runner_command::config config_for<runner_command>() {
  return {.argv = {"bwrap"}, .failure_signatures = {"bwrap: "}};
}

/// A "confinement" that wraps nothing: the negative control the laws must
/// catch.
struct confines_nothing {
  static constexpr bool confines = true;
  static constexpr bool needs_pre_exec = false;
  static constexpr std::string_view name = "confines_nothing";
  using config = no_config;
  confines_nothing(const sandbox_config&, const config&) {}
  confined_launch prepare(sandbox_mode mode, const std::filesystem::path&, launch_plan&) const {
    confined_launch launch;
    launch.info.mode = mode;
    launch.info.level = enforcement::full;
    return launch;
  }
  std::optional<std::string> runner_failure(confined_launch&, std::string_view, std::string_view) const {
    return std::nullopt;
  }
  bool is_denial(std::string_view) const { return false; }
};

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE(
    "confinement laws: writes are denied per mode, /dev/null stays writable and the denial dialect is recognized, "
    "through run and start (contract 13, 16, 17)",
    "[confinement][laws]", bwrap, landlock, runner_command, (chain<bwrap, landlock>)) {
  const laws::report report = laws::check_confinement_laws<TestType>(config_for<TestType>());
  if (report.unavailable) {
    WARN("skipped: " << TestType::name << " cannot confine here: " << *report.unavailable);
    return;
  }
  for (const auto& violation : report.violations) FAIL_CHECK(violation);
  CHECK(report.passed());
}

TEST_CASE("confinement laws: a policy that confines nothing breaks them (the laws' negative control)",
          "[confinement][laws]") {
  const laws::report report = laws::check_confinement_laws<confines_nothing>();
  REQUIRE_FALSE(report.unavailable);
  CHECK_FALSE(report.passed());
  std::string all;
  for (const auto& violation : report.violations) all += violation + "\n";
  CHECK_THAT(all, Catch::Contains("writes denied per mode"));
}

TEMPLATE_TEST_CASE("confinement laws: each backend's denial dialect is matched ignoring case, and not the other's "
                   "(contract 16)",
                   "[confinement][laws]", bwrap, landlock) {
  const sandbox_config shared;
  const TestType policy(shared);
  REQUIRE_FALSE(TestType::denial_dialects.empty());
  for (std::string_view dialect : TestType::denial_dialects) {
    CHECK(policy.is_denial("bash: line 1: /x: " + upper(dialect)));
    CHECK(policy.is_denial(std::string(dialect)));
  }
  CHECK_FALSE(policy.is_denial(""));
  CHECK_FALSE(policy.is_denial("bash: line 1: exit 3"));
  const std::string_view other = std::is_same_v<TestType, bwrap> ? "permission denied" : "read-only file system";
  CHECK_FALSE(policy.is_denial(std::string(other)));
}

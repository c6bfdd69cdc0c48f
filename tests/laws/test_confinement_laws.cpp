// The confinement laws (bashexec/laws/confinement.hpp: the runner starts,
// writes denied per mode, the shell's own working directory, /dev/null
// writable, denial dialect recognized, a kill is prompt, protected paths,
// read-only paths, network; docs/contract.md items 4, 13, 16, 17) over every
// shipped confining policy, through a real executor — one law instead of a
// copy of the same case per backend. A policy this machine cannot run (no
// bwrap, no Landlock) WARNs "skipped: …". Each broken policy the laws once
// passed is kept below as a negative control the laws must fail.
//
// The policies are listed to Catch2's TEMPLATE_TEST_CASE: each is then its
// own test case, named by its type, which a Hana loop inside one case would
// hide.
#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

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

/// A negative control: bwrap, except that under workspace-write the
/// shell's own working directory is bound read-only over itself — the
/// broken workspace-write the laws once passed (relative writes inside the
/// workspace failed, absolute ones from outside it worked).
struct cwd_read_only {
  static constexpr bool confines = true;
  static constexpr bool needs_pre_exec = false;
  static constexpr std::string_view name = "cwd_read_only";
  using config = bwrap::config;
  cwd_read_only(const sandbox_config& shared, const config& own) : inner_(shared, own) {}
  confined_launch prepare(sandbox_mode mode, const std::filesystem::path& root, launch_plan& plan) const {
    const std::string workdir = plan.workdir.string();
    confined_launch launch = inner_.prepare(mode, root, plan);
    // bwrap's options end at the first "--" (setpriv and the command follow):
    // the bind goes last among them, over the workspace's writable bind.
    const auto end_of_options = std::find(plan.argv.begin(), plan.argv.end(), "--");
    if (mode == sandbox_mode::workspace_write && end_of_options != plan.argv.end())
      plan.argv.insert(end_of_options, {"--ro-bind", workdir, workdir});
    return launch;
  }
  std::optional<std::string> runner_failure(confined_launch& launch, std::string_view err, std::string_view out) const {
    return inner_.runner_failure(launch, err, out);
  }
  bool is_denial(std::string_view err) const { return inner_.is_denial(err); }

 private:
  bwrap inner_;
};

/// A negative control: bwrap under a runner that swallows SIGTERM (it
/// ignores it, and so does everything it starts), so every kill waits the
/// full grace for the SIGKILL — the broken runner the laws once passed (a
/// 200 ms timeout returned after 3.2 s).
struct swallows_term {
  static constexpr bool confines = true;
  static constexpr bool needs_pre_exec = false;
  static constexpr std::string_view name = "swallows_term";
  using config = bwrap::config;
  swallows_term(const sandbox_config& shared, const config& own) : inner_(shared, own) {}
  confined_launch prepare(sandbox_mode mode, const std::filesystem::path& root, launch_plan& plan) const {
    confined_launch launch = inner_.prepare(mode, root, plan);
    const std::vector<std::string> runner{"/bin/bash", "-c", "trap '' TERM; exec \"$@\"", "swallows_term"};
    plan.argv.insert(plan.argv.begin(), runner.begin(), runner.end());
    return launch;
  }
  std::optional<std::string> runner_failure(confined_launch& launch, std::string_view err, std::string_view out) const {
    return inner_.runner_failure(launch, err, out);
  }
  bool is_denial(std::string_view err) const { return inner_.is_denial(err); }

 private:
  bwrap inner_;
};

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string joined(const laws::report& report) {
  std::string all;
  for (const auto& violation : report.violations) all += violation + "\n";
  return all;
}

/// Whether bwrap can confine here at all (the controls built on it need it).
bool bwrap_unavailable(std::string& why) {
  executor_config config;
  config.error_sink = [](std::string_view) {};
  basic_executor<policies<spawn_with<fork_exec>, confine_with<bwrap>>> executor(config);
  try {
    if (executor.run(executor.resolve({.command = "true"})).exit_code == 0) return false;
    why = "`true` failed under bwrap";
    return true;
  } catch (const sandbox_unavailable& error) {
    why = error.what();
    return true;
  }
}

/// The laws' report on a negative control that runs bwrap; empty, with the
/// reason printed, where bwrap cannot confine here.
template <class Policy, class... Config>
std::optional<laws::report> bwrap_control_report(const Config&... config) {
  std::string why;
  if (bwrap_unavailable(why)) {
    WARN("skipped: the control runs bwrap, which cannot confine here: " << why);
    return std::nullopt;
  }
  return laws::check_confinement_laws<Policy>(config...);
}

}  // namespace

TEMPLATE_TEST_CASE(
    "confinement laws: writes are denied per mode (the cwd's own too), /dev/null stays writable, the denial "
    "dialect is recognized, kills are prompt, protected and read-only paths and the network setting hold, "
    "through run and start (contract 4, 13, 16, 17)",
    "[confinement][laws]", bwrap, landlock, runner_command, (chain<bwrap, landlock>)) {
  const laws::report report = laws::check_confinement_laws<TestType>(config_for<TestType>());
  for (const auto& note : report.not_checked) WARN("not checked: " << note);
  switch (report.verdict()) {
    case laws::verdict::unavailable:
      WARN("skipped: " << TestType::name << " cannot confine here: " << *report.unavailable);
      return;
    case laws::verdict::broken:
      for (const auto& violation : report.violations) FAIL_CHECK(violation);
      break;
    case laws::verdict::laws_hold:
      break;
  }
  CHECK(report.passed());
}

TEST_CASE("confinement laws: a policy that confines nothing breaks them (the laws' negative control)",
          "[confinement][laws]") {
  const laws::report report = laws::check_confinement_laws<confines_nothing>();
  REQUIRE_FALSE(report.unavailable);
  CHECK(report.verdict() == laws::verdict::broken);
  CHECK_THAT(joined(report), Catch::Contains("writes denied per mode"));
}

TEST_CASE("confinement laws: a workspace-write whose shell cwd stays on a read-only mount breaks them (negative "
          "control)",
          "[confinement][laws]") {
  const auto control = bwrap_control_report<cwd_read_only>();
  if (!control) return;
  const laws::report& report = *control;
  INFO(joined(report));
  REQUIRE_FALSE(report.unavailable);
  REQUIRE(report.verdict() == laws::verdict::broken);
  CHECK_THAT(joined(report), Catch::Contains("the shell's own working directory (workspace-write)"));
}

TEST_CASE("confinement laws: a runner that swallows SIGTERM, so a kill waits the whole grace, breaks them "
          "(negative control)",
          "[confinement][laws]") {
  const auto control = bwrap_control_report<swallows_term>();
  if (!control) return;
  const laws::report& report = *control;
  INFO(joined(report));
  REQUIRE_FALSE(report.unavailable);
  REQUIRE(report.verdict() == laws::verdict::broken);
  CHECK_THAT(joined(report), Catch::Contains("a kill is prompt (read-only)"));
  CHECK_THAT(joined(report), Catch::Contains("a kill is prompt (read-only, background)"));
}

TEST_CASE("confinement laws: a broken runner (an unknown option) is a violation, not \"unavailable\" (negative "
          "control)",
          "[confinement][laws]") {
  const auto control = bwrap_control_report<runner_command>(
      runner_command::config{.argv = {"bwrap", "--bashexec-no-such-option"}, .failure_signatures = {"bwrap: "}});
  if (!control) return;
  const laws::report& report = *control;
  INFO(joined(report));
  CHECK_FALSE(report.unavailable);
  REQUIRE(report.verdict() == laws::verdict::broken);
  CHECK_THAT(joined(report), Catch::Contains("the runner starts") && Catch::Contains("--bashexec-no-such-option"));
}

TEST_CASE("confinement laws: a runner refused by the machine is unavailable, a runner misused is broken",
          "[confinement][laws]") {
  CHECK(laws::detail::machine_refused("bwrap: No permissions to create new namespace, likely because the kernel "
                                      "does not allow non-privileged user namespaces"));
  CHECK(laws::detail::machine_refused("bwrap: Creating new namespace failed: Operation not permitted"));
  CHECK(laws::detail::machine_refused("BWRAP: SETTING UP UID MAP: PERMISSION DENIED"));
  CHECK_FALSE(laws::detail::machine_refused("bwrap: Unknown option --bashexec-no-such-option"));
  CHECK_FALSE(laws::detail::machine_refused("prlimit: failed to execute nosuch: No such file or directory"));
  CHECK_FALSE(laws::detail::machine_refused(""));
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

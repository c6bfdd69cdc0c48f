// The spawn laws (bashexec/laws/spawn.hpp: session, descriptors, failures,
// the plan's environment, workdir and stdin, signals, hooks, concurrency,
// no child left) over every shipped spawn policy and the out-of-tree ones
// of docs/examples/extending, each its own test case; a spawner that
// breaks a law is the negative control. Then what is not a law of any one
// policy: the hook array, how an executor builds its policy from its config
// and the policy's own settings, and what an executor derives from it.

#include <catch2/catch.hpp>

#include "executor_test_support.hpp"
#include "../../docs/examples/extending/counting_spawner.hpp"
#include "../../docs/examples/extending/journaling_spawner.hpp"

#include <filesystem>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <sys/resource.h>

#include <bashexec/basic_executor.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/executor_traits.hpp>
#include <bashexec/laws/spawn.hpp>
#include <bashexec/spawn/fork_exec.hpp>
#include <bashexec/spawn/posix_spawn.hpp>
#include <bashexec/spawn/prespawned.hpp>

namespace fs = std::filesystem;
using namespace bashexec;
using example::journaling_spawner;

namespace {

/// The settings each policy is checked with: its defaults, but a journal in
/// a scratch place for the journaling example.
template <class S>
spawn_config_t<S> settings_for() {
  return {};
}
template <>
journaling_spawner::config settings_for<journaling_spawner>() {
  return {.journal = fs::path("/var/tmp") / ("bashexec-laws-journal-" + std::to_string(::getpid())),
          .max_spawns = 100000};
}

std::string joined(const laws::report& report) {
  std::string all;
  for (const auto& violation : report.violations) all += violation + "\n";
  return all;
}

/// fork_exec, but every child gets one variable more than its plan: the
/// negative control the laws must catch.
struct adds_a_variable {
  static constexpr std::string_view name = "adds_a_variable";
  static constexpr auto capabilities = spawn_capabilities_of<fork_exec>;
  process_handle spawn(const launch_plan& plan) const {
    refuse_unsupported<adds_a_variable>(plan);
    launch_plan changed = plan;
    changed.env.push_back("BASHEXEC_INJECTED=1");
    return inner.spawn(changed);
  }
  fork_exec inner;
};

/// A spawner whose only constructor the executor cannot call.
struct needs_an_int {
  static constexpr std::string_view name = "needs_an_int";
  explicit needs_an_int(int) {}
  process_handle spawn(const launch_plan& plan) const { return fork_exec{}.spawn(plan); }
};

}  // namespace

TEMPLATE_TEST_CASE("spawn laws: every shipped and out-of-tree spawn policy keeps them (contract 2, 3, 4, 8)",
                   "[spawn_laws]", posix_spawner, fork_exec, prespawned, counting_spawner, journaling_spawner) {
  const auto settings = settings_for<TestType>();
  const laws::report report = laws::check_spawn_laws<TestType>(settings);
  if constexpr (std::is_same_v<TestType, journaling_spawner>) fs::remove(settings.journal);
  REQUIRE_FALSE(report.unavailable);
  for (const auto& violation : report.violations) FAIL_CHECK(violation);
  CHECK(report.verdict() == laws::verdict::laws_hold);
}

TEST_CASE("spawn laws: a spawner that adds to the plan's environment breaks them (the laws' negative control)",
          "[spawn_laws]") {
  const laws::report report = laws::check_spawn_laws<adds_a_variable>();
  INFO(joined(report));
  REQUIRE(report.verdict() == laws::verdict::broken);
  CHECK_THAT(joined(report), Catch::Contains("adds_a_variable: the environment is exactly the plan's"));
}

TEST_CASE("spawn laws: the hook array is fixed, and a full one says so instead of dropping a hook",
          "[spawn_laws]") {
  launch_plan plan;
  for (std::size_t i = 0; i < pre_exec_hook_set::capacity; ++i)
    plan.hooks.add({[](const void*) noexcept { return 0; }, nullptr, "hook"});
  CHECK_THROWS_WITH(plan.hooks.add({[](const void*) noexcept { return 0; }, nullptr, "one too many"}),
                    "launch_plan.hooks: more than 4 entries");
  CHECK_THROWS_AS(plan.hooks.add(pre_exec_hook{}), std::invalid_argument);
  CHECK(plan.hooks.size() == pre_exec_hook_set::capacity);
}

TEST_CASE("spawn laws: an executor holds one policy instance, built from its config, for run and start alike",
          "[spawn_laws]") {
  auto config = test_support::fast_config();
  config.limits.max_open_files = 512;
  basic_executor<policies<spawn_with<counting_spawner>>> executor(config);
  CHECK(executor.spawner().limited());
  exec_request request;
  request.command = "ulimit -n";
  CHECK(executor.run(executor.resolve(request)).out.text == "512\n");
  CHECK(executor.run(executor.resolve(request)).exit_code == 0);
  auto id = executor.start(executor.resolve(request));
  CHECK(executor.wait(id).exit_code == 0);
  CHECK(executor.spawner().spawned() == 3);
}

// How the executor builds its spawn policy (spawn.hpp): the first
// constructor of the list the policy has; its own settings only when that
// constructor takes them.
static_assert(std::is_same_v<spawn_config_t<journaling_spawner>, journaling_spawner::config>);
static_assert(std::is_same_v<spawn_config_t<counting_spawner>, no_spawn_config>);
static_assert(std::is_same_v<spawn_config_t<fork_exec>, no_spawn_config>);
// prespawned reads executor_config::prespawn: its nested config is not a second place for it.
static_assert(std::is_same_v<spawn_config_t<prespawned>, no_spawn_config>);
static_assert(spawn_constructible<journaling_spawner> && spawn_constructible<prespawned>);
static_assert(!spawn_constructible<needs_an_int>);

TEST_CASE("spawn laws: a spawn policy with settings of its own gets them from the executor, validated",
          "[spawn_laws]") {
  auto settings = settings_for<journaling_spawner>();
  settings.max_spawns = 2;
  {
    basic_executor<policies<spawn_with<journaling_spawner>>> executor(test_support::fast_config(), {}, settings);
    CHECK(executor.spawner().settings().journal == settings.journal);
    CHECK(executor.run(executor.resolve({.command = "true"})).exit_code == 0);
    CHECK(executor.wait(executor.start(executor.resolve({.command = "true"}))).exit_code == 0);
    CHECK(executor.spawner().spawned() == 2);
    // Its own limit, from its own settings.
    CHECK_THROWS_WITH(executor.run(executor.resolve({.command = "true"})), Catch::Contains("max_spawns (2)"));
  }
  CHECK(laws::detail::read_text(settings.journal).find("/bin/bash") == 0);
  fs::remove(settings.journal);

  using executor_type = basic_executor<policies<spawn_with<journaling_spawner>>>;
  CHECK_THROWS_WITH(executor_type(test_support::fast_config(), {}, {.journal = "relative.log"}),
                    Catch::Contains("journaling.journal must be an absolute path"));
  CHECK_THROWS_AS(executor_type(test_support::fast_config(), {}, {.max_spawns = 0}), std::invalid_argument);
}

// What an executor can do follows from its policies (executor_traits.hpp).
// The default composition (local_executor) spawns with fork_exec, so it can
// contain by cgroup; posix_spawner (posix_spawn_executor) cannot.
using local_policies = policies<>;
using posix_spawn_policies = policies<spawn_with<posix_spawner>>;
using landlock_policies = policies<spawn_with<fork_exec>, confine_with<landlock>>;
static_assert(!executor_can<local_policies, executor_capability::confines>);
static_assert(executor_can<local_policies, spawn_capability::pre_exec>);
static_assert(executor_can<local_policies, spawn_capability::cgroup>);
static_assert(!executor_can<posix_spawn_policies, spawn_capability::pre_exec>);
static_assert(!executor_can<posix_spawn_policies, spawn_capability::cgroup>);
static_assert(executor_can<landlock_policies, executor_capability::confines>);
static_assert(executor_can<landlock_policies, executor_capability::needs_pre_exec>);
static_assert(executor_can<landlock_policies, spawn_capability::pre_exec>);
static_assert(executor_can<landlock_policies, spawn_capability::limits>);
static_assert(!executor_can<landlock_policies, spawn_capability::prespawned>);

TEST_CASE("spawn laws: an executor describes what its policies let it do", "[spawn_laws]") {
  CHECK(describe_executor<posix_spawn_policies>() ==
        "confines commands: no, its confinement needs pre-exec hooks: no, run pre-exec hooks in the child: no, "
        "apply resource limits in the child before exec: no, join a cgroup in the child before exec: no, give "
        "the child a controlling terminal: yes, hand out processes started ahead of the call: no");
  CHECK_THAT(describe_executor<landlock_policies>(),
             Catch::StartsWith("confines commands: yes, its confinement needs pre-exec hooks: yes, run pre-exec "
                               "hooks in the child: yes"));
}

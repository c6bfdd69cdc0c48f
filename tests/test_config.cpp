// Resolution and configuration (docs/contract.md item 1): defaults, the timeout
// cap, validation messages that name the field, a tiny output cap.
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include <bashexec/confinement/chain.hpp>
#include <bashexec/confinement/runner_command.hpp>
#include <bashexec/local_executor.hpp>
#include <bashexec/sandbox_executor.hpp>

#include "executor_test_support.hpp"

using namespace bashexec;
using namespace std::chrono_literals;

namespace {
using runner_executor = basic_executor<policies<spawn_with<fork_exec>, confine_with<runner_command>>>;
using runner_chain = chain<runner_command, bwrap, landlock>;
}  // namespace

namespace {

/// Runs `f` and returns the std::invalid_argument message it threw ("" if none).
template <class F>
std::string invalid_argument_message(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("contract 1: a request without options resolves to the documented defaults", "[config][contract-1]") {
  local_executor executor;
  const exec_spec spec = executor.resolve({.command = "true"});
  CHECK(spec.command == "true");
  CHECK(spec.timeout == 120000ms);
  CHECK(spec.stdout_max_bytes == 64000u);
  CHECK(spec.workdir == std::filesystem::current_path());
  CHECK_FALSE(spec.owner.has_value());
  CHECK_FALSE(spec.mode.has_value());
  CHECK(executor.config().kill_grace == 3000ms);
  CHECK(executor.config().max_timeout == 600000ms);
  CHECK_FALSE(executor.default_mode().has_value());
}

TEST_CASE("contract 1: a requested timeout above the cap is clamped to 600000 ms", "[config][contract-1]") {
  local_executor executor;
  CHECK(executor.resolve({.command = "true", .timeout = 10'000'000ms}).timeout == 600000ms);
  CHECK(executor.resolve({.command = "true", .timeout = 600001ms}).timeout == 600000ms);
  CHECK(executor.resolve({.command = "true", .timeout = 599999ms}).timeout == 599999ms);
  CHECK(executor.resolve({.command = "true", .timeout = 1ms}).timeout == 1ms);
}

TEST_CASE("contract 1: the workdir defaults to the configured cwd, else the process cwd", "[config][contract-1]") {
  test_support::temp_dir dir;
  executor_config config;
  config.cwd = dir.path();
  local_executor executor(config);
  CHECK(executor.resolve({.command = "true"}).workdir == dir.path());
  SECTION("a relative workdir is taken under the configured cwd") {
    CHECK(executor.resolve({.command = "true", .workdir = "sub"}).workdir == dir.path() / "sub");
  }
  SECTION("an absolute workdir replaces it") {
    CHECK(executor.resolve({.command = "true", .workdir = "/usr"}).workdir == "/usr");
  }
  SECTION("and run really starts there") {
    auto result = executor.run(executor.resolve({.command = "pwd -P"}));
    CHECK(result.out.text == std::filesystem::canonical(dir.path()).string() + "\n");
  }
}

TEST_CASE("contract 1: owner and mode are carried verbatim and never stamped by an unconfined executor",
          "[config][contract-1][contract-11]") {
  local_executor executor;
  const owner_token owner(std::string("session \t 7\n\xff"));
  auto spec = executor.resolve({.command = "true", .owner = owner, .mode = sandbox_mode::workspace_write});
  CHECK(spec.owner == owner);
  CHECK(spec.mode == sandbox_mode::workspace_write);
}

TEST_CASE("contract 1: a non-positive timeout or a zero cap is rejected naming the field", "[config][contract-1]") {
  local_executor executor;
  CHECK(invalid_argument_message([&] { (void)executor.resolve({.command = "true", .timeout = 0ms}); })
            .find("timeout") != std::string::npos);
  CHECK(invalid_argument_message([&] { (void)executor.resolve({.command = "true", .timeout = -5ms}); })
            .find("timeout") != std::string::npos);
  CHECK(invalid_argument_message([&] { (void)executor.resolve({.command = "true", .stdout_max_bytes = 0}); })
            .find("stdout_max_bytes") != std::string::npos);
  CHECK_THROWS_AS(executor.resolve({.command = ""}), std::invalid_argument);
}

TEST_CASE("contract 1: each non-positive executor_config field is rejected by name", "[config][contract-1]") {
  auto message_for = [](auto mutate) {
    executor_config config;
    mutate(config);
    return invalid_argument_message([&] { local_executor executor(config); });
  };
  CHECK_THAT(message_for([](executor_config& c) { c.default_timeout = 0ms; }), Catch::Contains("default_timeout"));
  CHECK_THAT(message_for([](executor_config& c) { c.max_timeout = -1ms; }), Catch::Contains("max_timeout"));
  CHECK_THAT(message_for([](executor_config& c) { c.kill_grace = 0ms; }), Catch::Contains("kill_grace"));
  CHECK_THAT(message_for([](executor_config& c) { c.drain_timeout = 0ms; }), Catch::Contains("drain_timeout"));
  CHECK_THAT(message_for([](executor_config& c) { c.output_cap = 0; }), Catch::Contains("output_cap"));
  CHECK_THAT(message_for([](executor_config& c) { c.sandbox.probe_timeout = 0ms; }),
             Catch::Contains("probe_timeout"));
  CHECK_THAT(message_for([](executor_config& c) { c.spill_budget_bytes = 0; }),
             Catch::Contains("spill_budget_bytes"));
  CHECK_THAT(message_for([](executor_config& c) { c.shell.clear(); }), Catch::Contains("shell"));
  CHECK(message_for([](executor_config&) {}).empty());
}

TEST_CASE("contract 1: each non-positive retention limit is rejected by name, and the defaults are documented",
          "[config][contract-1][retention]") {
  auto message_for = [](auto mutate) {
    executor_config config;
    mutate(config);
    return invalid_argument_message([&] { local_executor executor(config); });
  };
  CHECK(message_for([](executor_config& c) { c.retention.max_tasks = 0; }) ==
        "retention.max_tasks must be positive, got 0");
  CHECK(message_for([](executor_config& c) { c.retention.max_bytes = 0; }) ==
        "retention.max_bytes must be positive, got 0");
  CHECK(message_for([](executor_config& c) { c.retention.max_age = 0ms; }) ==
        "retention.max_age must be positive, got 0 ms");
  CHECK(message_for([](executor_config& c) { c.retention.max_age = -5ms; }) ==
        "retention.max_age must be positive, got -5 ms");
  const task_retention defaults;
  CHECK(defaults.max_tasks == 1000u);
  CHECK(defaults.max_bytes == 16u * 1024 * 1024);
  CHECK(defaults.max_age == 3600000ms);
  CHECK(local_executor().retention_text() ==
        "settled tasks are kept for at most 1 h, at most the 1000 that settled last, and at most 16 MiB of their "
        "output in memory");
}

TEST_CASE("contract 1: configured defaults replace the built-in ones", "[config][contract-1]") {
  executor_config config;
  config.default_timeout = 1500ms;
  config.max_timeout = 2000ms;
  config.output_cap = 10;
  local_executor executor(config);
  auto spec = executor.resolve({.command = "true"});
  CHECK(spec.timeout == 1500ms);
  CHECK(spec.stdout_max_bytes == 10u);
  CHECK(executor.resolve({.command = "true", .timeout = 5000ms}).timeout == 2000ms);
}

TEST_CASE("contract 1: an output cap of a few bytes is legitimate and keeps the tail",
          "[config][contract-1][contract-5]") {
  executor_config config = test_support::fast_config();
  config.output_cap = 3;  // stderr's cap: stdout_max_bytes governs stdout only
  local_executor executor(config);
  auto result = executor.run(executor.resolve({.command = "printf 'abcdefghij'; printf '0123456789' >&2",
                                               .stdout_max_bytes = 3}));
  CHECK(result.exit_code == 0);
  CHECK(result.out.text == "hij");
  CHECK(result.out.truncated);
  CHECK(result.err.text == "789");
  REQUIRE(result.out.spill_path.has_value());
  CHECK(test_support::slurp(*result.out.spill_path) == "abcdefghij");
  SECTION("a one-byte cap too") {
    auto one = executor.run(executor.resolve({.command = "printf xyz", .stdout_max_bytes = 1}));
    CHECK(one.out.text == "z");
  }
}

TEST_CASE("contract 1: durations past INT_MAX milliseconds are rejected, naming the field", "[config][contract-1]") {
  executor_config config;
  config.max_timeout = std::chrono::milliseconds(std::int64_t{1} << 40);
  CHECK_THROWS_WITH(validate(config), Catch::Contains("max_timeout") && Catch::Contains("at most"));
  config = executor_config{};
  config.kill_grace = std::chrono::milliseconds::max();
  CHECK_THROWS_WITH(validate(config), Catch::Contains("kill_grace"));
}

TEST_CASE("contract 16: a blank runner failure signature is rejected at construction, naming the field",
          "[config][contract-16]") {
  for (const std::string blank : {"", " ", " \t\n"}) {
    INFO("signature \"" << blank << "\"");
    const runner_command::config own{.argv = {"/usr/bin/bwrap"}, .failure_signatures = {"bwrap: ", blank}};
    CHECK_THAT(invalid_argument_message([&] { runner_executor executor({}, own); }),
               Catch::Contains("runner_command.failure_signatures"));
    CHECK_THAT(invalid_argument_message([&] { own.validate(); }), Catch::Contains("blank"));
  }
}

TEST_CASE("contract 1: a sandbox mode outside the ladder is rejected at construction, naming the field",
          "[config][contract-1]") {
  executor_config config;
  config.sandbox.default_mode = static_cast<sandbox_mode>(7);
  const std::string message = invalid_argument_message([&] { local_executor executor(config); });
  CHECK_THAT(message, Catch::Contains("sandbox.default_mode"));
  CHECK_THAT(message, Catch::Contains("7"));
  config.sandbox.default_mode = static_cast<sandbox_mode>(-1);
  CHECK_THAT(invalid_argument_message([&] { local_executor executor(config); }),
             Catch::Contains("sandbox.default_mode"));
  for (auto mode : sandbox_modes) {
    config.sandbox.default_mode = mode;
    CHECK(invalid_argument_message([&] { local_executor executor(config); }).empty());
  }
  // A request carrying one is refused by resolve, naming the field.
  local_executor executor;
  CHECK_THAT(invalid_argument_message(
                 [&] { (void)executor.resolve({.command = "true", .mode = static_cast<sandbox_mode>(7)}); }),
             Catch::Contains("mode"));
}

TEST_CASE("an egress restriction without network = allowlist is refused, naming the field, never ignored",
          "[config][network]") {
  // Nothing but the allowlist's proxy enforces these: accepted under
  // another network they would read as restricted while commands had it all.
  auto refused = [](auto&& restrict, network_access network) {
    executor_config config;
    config.sandbox.network = network;
    restrict(config.sandbox.egress);
    return invalid_argument_message([&] { local_executor executor(config); });
  };
  for (const auto network : {network_access::full, network_access::loopback, network_access::none}) {
    INFO(to_string(network));
    CHECK_THAT(refused([](network_policy& p) { p.allowed_domains = {"pypi.org"}; }, network),
               Catch::Contains("sandbox.egress.allowed_domains") && Catch::Contains("sandbox.network = allowlist") &&
                   Catch::Contains(std::string("\"") + std::string(to_string(network)) + "\""));
    CHECK_THAT(refused([](network_policy& p) { p.denied_domains = {"evil.test"}; }, network),
               Catch::Contains("sandbox.egress.denied_domains"));
    CHECK_THAT(refused([](network_policy& p) { p.allowed_ranges = {"10.0.0.0/8"}; }, network),
               Catch::Contains("sandbox.egress.allowed_ranges"));
    CHECK_THAT(refused([](network_policy& p) { p.methods = network_methods::read_only; }, network),
               Catch::Contains("sandbox.egress.methods"));
    CHECK_THAT(refused([](network_policy& p) { p.host_map = {{"a.test", "10.0.0.1"}}; }, network),
               Catch::Contains("sandbox.egress.host_map"));
    // The limits and the resolver choice restrict nothing by themselves.
    CHECK(refused([](network_policy& p) { p.system_dns = false; }, network).empty());
  }
}

TEST_CASE("a confinement's own configuration is validated at construction, naming the field",
          "[config][confinement]") {
  CHECK_THAT(invalid_argument_message([] { sandbox_executor executor({}, bwrap::config{.program = ""}); }),
             Catch::Contains("bwrap.program"));
  CHECK_THAT(invalid_argument_message([] { runner_executor executor({}, runner_command::config{.argv = {"r"}, .failure_signatures = {}}); }),
             Catch::Contains("runner_command.argv and runner_command.failure_signatures"));
  CHECK_THAT(invalid_argument_message(
                 [] { runner_executor executor({}, runner_command::config{.argv = {}, .failure_signatures = {"r: "}}); }),
             Catch::Contains("runner_command.argv and runner_command.failure_signatures"));
  // Unconfigured (both empty) passes validation; building the policy alone
  // says what is missing.
  CHECK_THAT(invalid_argument_message([] { runner_command policy(sandbox_config{}, {}); }),
             Catch::Contains("runner_command.argv"));
}

TEST_CASE("a chain's configuration holds each candidate's, converts from one and validates all",
          "[config][confinement][chain]") {
  runner_chain::config own = bwrap::config{.program = "/opt/bwrap"};
  CHECK(own.get<bwrap>().program == "/opt/bwrap");
  CHECK(own.get<runner_command>().argv.empty());
  CHECK_NOTHROW(own.validate());
  own.get<runner_command>().argv = {"myrunner"};
  CHECK_THAT(invalid_argument_message([&] { own.validate(); }), Catch::Contains("runner_command.argv"));
  using runner_chain_executor = basic_executor<policies<spawn_with<fork_exec>, confine_with<runner_chain>>>;
  CHECK_THAT(invalid_argument_message([&] { runner_chain_executor executor({}, own); }),
             Catch::Contains("runner_command.failure_signatures"));
  // An unconfigured runner_command is an unusable candidate, not an error:
  // the chain is built and names why when it is asked to select.
  CHECK_NOTHROW(runner_chain(sandbox_config{}, bwrap::config{}));
}

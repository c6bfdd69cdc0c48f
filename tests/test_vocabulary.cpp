// The public vocabulary types: the sandbox-mode
// ladder, the strong id types, signal names. Most facts are compile-time:
// a static_assert that fails breaks the build of this file.
#include <csignal>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <bashexec/errors.hpp>
#include <bashexec/ids.hpp>
#include <bashexec/result.hpp>
#include <bashexec/sandbox_mode.hpp>
#include <bashexec/signal_name.hpp>

using namespace bashexec;

// --- the ladder, at compile time -------------------------------------------
static_assert(sandbox_modes.size() == 3);
static_assert(sandbox_modes[0] == sandbox_mode::read_only);
static_assert(sandbox_modes[1] == sandbox_mode::workspace_write);
static_assert(sandbox_modes[2] == sandbox_mode::danger_full_access);
static_assert(is_wider(sandbox_mode::workspace_write, sandbox_mode::read_only));
static_assert(is_wider(sandbox_mode::danger_full_access, sandbox_mode::workspace_write));
static_assert(is_wider(sandbox_mode::danger_full_access, sandbox_mode::read_only));
static_assert(!is_wider(sandbox_mode::read_only, sandbox_mode::read_only), "strictly wider");
static_assert(!is_wider(sandbox_mode::read_only, sandbox_mode::workspace_write));
static_assert(to_string(sandbox_mode::read_only) == "read-only");
static_assert(to_string(sandbox_mode::workspace_write) == "workspace-write");
static_assert(to_string(sandbox_mode::danger_full_access) == "danger-full-access");
static_assert(parse_sandbox_mode("workspace-write") == sandbox_mode::workspace_write);
static_assert(!parse_sandbox_mode("workspace_write").has_value());
static_assert(!parse_sandbox_mode("").has_value());

constexpr bool ladder_round_trips() {
  for (auto mode : sandbox_modes)
    if (parse_sandbox_mode(to_string(mode)) != mode) return false;
  return true;
}
static_assert(ladder_round_trips());

constexpr bool ladder_is_strictly_increasing() {
  for (std::size_t i = 0; i < sandbox_modes.size(); ++i)
    for (std::size_t j = 0; j < sandbox_modes.size(); ++j)
      if (is_wider(sandbox_modes[j], sandbox_modes[i]) != (j > i)) return false;
  return true;
}
static_assert(ladder_is_strictly_increasing());

// --- strong ids: distinct types, explicit construction ---------------------
static_assert(!std::is_same_v<task_id, owner_token>);
static_assert(!std::is_convertible_v<task_id, owner_token>);
static_assert(!std::is_convertible_v<owner_token, task_id>);
static_assert(!std::is_constructible_v<owner_token, task_id>);
static_assert(!std::is_constructible_v<task_id, owner_token>);
static_assert(!std::is_assignable_v<task_id&, owner_token>);
static_assert(!std::is_convertible_v<std::string, task_id>);
static_assert(!std::is_convertible_v<std::string, owner_token>);
static_assert(!std::is_convertible_v<const char*, task_id>);
static_assert(!std::is_convertible_v<task_id, std::string>);
static_assert(!std::is_assignable_v<task_id&, std::string>);
static_assert(std::is_constructible_v<task_id, std::string>);
static_assert(std::is_constructible_v<owner_token, std::string>);
static_assert(!std::is_invocable_v<std::equal_to<>, const task_id&, const owner_token&>,
              "a task id never compares with an owner token");

TEST_CASE("the sandbox-mode ladder is ordered narrowest to widest and round-trips through its spelling",
          "[vocabulary][contract-13]") {
  for (auto mode : sandbox_modes) CHECK(parse_sandbox_mode(fmt::format("{}", mode)) == mode);
  CHECK_FALSE(parse_sandbox_mode("READ-ONLY").has_value());
  CHECK(fmt::format("{}", enforcement::partial) == "partial");
}

TEST_CASE("task ids and owner tokens keep their text, compare, hash and format", "[vocabulary]") {
  const task_id a("bash-1"), b(std::string("bash-1")), c(std::string_view("bash-2"));
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a.value() == "bash-1");
  CHECK(fmt::format("{}", c) == "bash-2");
  CHECK(std::hash<task_id>{}(a) == std::hash<task_id>{}(b));
  std::unordered_set<owner_token> owners{owner_token("s"), owner_token("s"), owner_token("t")};
  CHECK(owners.size() == 2);
  const owner_token odd(std::string("  session \n with\0nul", 20));
  CHECK(odd.value().size() == 20);
}

TEST_CASE("the ids' and enums' formatters honour a string spec", "[vocabulary]") {
  CHECK(fmt::format("[{:>12}]", sandbox_mode::read_only) == "[   read-only]");
  CHECK(fmt::format("[{:<8}]", task_id("bash-3")) == "[bash-3  ]");
  CHECK(fmt::format("[{:.3}]", owner_token("session")) == "[ses]");
  CHECK(fmt::format("[{:*^9}]", enforcement::full) == "[**full***]");
}

TEST_CASE("signal numbers are spelled the conventional way", "[vocabulary][contract-20]") {
  CHECK(signal_name(SIGTERM) == "SIGTERM");
  CHECK(signal_name(SIGKILL) == "SIGKILL");
  CHECK(signal_name(SIGPIPE) == "SIGPIPE");
  CHECK(to_string(task_status::killed) == "killed");
}

TEST_CASE("unknown_task names the id and sandbox_unavailable carries its code", "[vocabulary]") {
  const unknown_task e(task_id("bash-999"));
  CHECK(std::string(e.what()).find("bash-999") != std::string::npos);
  CHECK(e.id() == task_id("bash-999"));
  const sandbox_unavailable s(sandbox_mode::workspace_write, "no backend");
  CHECK(sandbox_unavailable::code == "SANDBOX_UNAVAILABLE");
  CHECK(s.mode() == sandbox_mode::workspace_write);
  const infrastructure_error& base = s;
  CHECK(std::string(base.what()) == "no backend");
}

TEST_CASE("an unknown sandbox mode in configuration text throws invalid_argument naming the field",
          "[vocabulary][contract-13]") {
  CHECK(bashexec::sandbox_mode_from("workspace-write") == bashexec::sandbox_mode::workspace_write);
  CHECK_THROWS_WITH(bashexec::sandbox_mode_from("read-mostly", "sandbox.default_mode"),
                    Catch::Contains("sandbox.default_mode") && Catch::Contains("read-mostly"));
}

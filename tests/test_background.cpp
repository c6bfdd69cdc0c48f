// The background path: start / read_output / kill / wait / listeners /
// disposal with real processes (docs/contract.md item 6, 9–12).
// Through local_executor and, built again as test_background_prespawned,
// over the prespawned warm pool (tests/unconfined_test_support.hpp).
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <bashexec/signal_name.hpp>
#include <bashexec/tools/bash_tools.hpp>

#include "executor_test_support.hpp"
#include "unconfined_test_support.hpp"

using namespace bashexec;
using namespace std::chrono_literals;
using test_support::unconfined_executor;
using test_support::eventually;
using test_support::fast_config;
using test_support::ms_since;
using test_support::steady;

namespace {

using test_support::unexecutable_shell;

task_id start(unconfined_executor& executor, std::string command, std::optional<owner_token> owner = std::nullopt) {
  return executor.start(executor.resolve({.command = std::move(command), .owner = std::move(owner)}));
}

/// Reads until the accumulated delta contains `needle` (or 10 s pass).
std::string read_until(unconfined_executor& executor, const task_id& id, const std::string& needle) {
  std::string seen;
  eventually([&] {
    seen += executor.read_output(id).delta;
    return seen.find(needle) != std::string::npos;
  });
  return seen;
}

}  // namespace

TEST_CASE("contract 9: ids are sequential per executor, each executor starting at bash-1",
          "[background][contract-9]") {
  unconfined_executor first(fast_config()), second(fast_config());
  CHECK(start(first, "true") == task_id("bash-1"));
  CHECK(start(first, "true") == task_id("bash-2"));
  CHECK(start(second, "true") == task_id("bash-1"));
  CHECK(start(first, "true") == task_id("bash-3"));
  for (auto* executor : {&first, &second})
    for (const auto& task : executor->list()) executor->wait(task.id);
}

TEST_CASE("contract 9: start returns at once and no timeout applies to a background task",
          "[background][contract-9]") {
  unconfined_executor executor(fast_config());
  const auto begin = steady::now();
  auto id = executor.start(executor.resolve({.command = "sleep 0.6; echo done", .timeout = 100ms}));
  CHECK(ms_since(begin) < 400);
  CHECK(executor.get(id).status == task_status::running);
  auto final_facts = executor.wait(id);
  CHECK(final_facts.status == task_status::completed);
  CHECK(final_facts.exit_code == 0);
  CHECK(executor.read_output(id).delta == "done\n");
}

TEST_CASE("contract 6: consecutive reads are incremental and never repeat output", "[background][contract-6]") {
  test_support::temp_dir dir;
  const auto flag = dir.path() / "go";
  unconfined_executor executor(fast_config());
  auto id = start(executor, "echo a; while [ ! -e '" + flag.string() + "' ]; do sleep 0.02; done; echo b");
  CHECK(read_until(executor, id, "a\n") == "a\n");
  CHECK(executor.read_output(id).delta.empty());
  std::ofstream(flag) << "";
  auto final_facts = executor.wait(id);
  CHECK(final_facts.status == task_status::completed);
  const task_read second = executor.read_output(id);
  CHECK(second.delta == "b\n");
  CHECK_FALSE(second.lossy);
  CHECK(second.task.status == task_status::completed);
  CHECK(executor.read_output(id).delta.empty());
}

TEST_CASE("contract 6: stderr follows stdout under its stderr header line, with a separating newline only when needed",
          "[background][contract-6]") {
  unconfined_executor executor(fast_config());
  struct example {
    const char* command;
    const char* delta;
  };
  const example examples[] = {
      {"echo out; echo err >&2", "out\n[stderr]\nerr\n"},
      {"printf out; printf err >&2", "out\n[stderr]\nerr"},
      {"echo err >&2", "[stderr]\nerr\n"},
      {"printf out", "out"},
      {"true", ""},
  };
  for (const auto& e : examples) {
    CAPTURE(e.command);
    auto id = start(executor, e.command);
    executor.wait(id);
    CHECK(executor.read_output(id).delta == e.delta);
    CHECK(executor.read_output(id).delta.empty());  // no [stderr] header without new stderr bytes
  }
  SECTION("stderr that arrives later is marked in the later read only") {
    test_support::temp_dir dir;
    const auto flag = dir.path() / "go";
    auto id = start(executor, "echo first; while [ ! -e '" + flag.string() + "' ]; do sleep 0.02; done; echo late >&2");
    CHECK(read_until(executor, id, "first\n") == "first\n");
    std::ofstream(flag) << "";
    executor.wait(id);
    CHECK(executor.read_output(id).delta == "[stderr]\nlate\n");
  }
}

TEST_CASE("contract 6: 10 MB under the default cap gives a lossy read naming a spill file that holds it all",
          "[background][contract-6][contract-5]") {
  unconfined_executor executor(fast_config());
  auto id = start(executor, "yes abcdefghi | head -c 10000000");
  auto final_facts = executor.wait(id);
  CHECK(final_facts.status == task_status::completed);
  const task_read r = executor.read_output(id);
  CHECK(r.lossy);
  CHECK(r.delta.size() == 64000u);
  REQUIRE(r.stdout_spill_path.has_value());
  CHECK_FALSE(r.stderr_spill_path.has_value());
  const std::string spilled = test_support::slurp(*r.stdout_spill_path);
  REQUIRE(spilled.size() == 10'000'000u);
  std::string expected;
  expected.reserve(10'000'000);
  while (expected.size() < 10'000'000) expected += "abcdefghi\n";
  expected.resize(10'000'000);
  CHECK((spilled == expected));
  CHECK((r.delta == expected.substr(expected.size() - 64000)));
  const task_read after = executor.read_output(id);
  CHECK(after.delta.empty());
  CHECK_FALSE(after.lossy);
}

TEST_CASE("contract 9/10: two hundred back-to-back short tasks each settle promptly",
          "[background][contract-9][contract-10]") {
  // A task whose events all arrive before the reactor adopts it must still
  // be noticed as settled (without waiting for some unrelated event).
  unconfined_executor executor(fast_config());
  std::atomic<int> calls{0};
  auto sub = executor.on_task_done([&](const task_snapshot&) { ++calls; });
  for (int i = 0; i < 200; ++i) {
    auto id = start(executor, i % 2 ? "true" : "echo x; echo y >&2");
    auto settled = executor.wait_for(id, 5s);
    CAPTURE(i);
    REQUIRE(settled.has_value());
    REQUIRE(settled->status == task_status::completed);
  }
  CHECK(eventually([&] { return calls.load() == 200; }, 5s));
}

TEST_CASE("contract 9: kill stops a running task with SIGTERM, and a second kill returns false",
          "[background][contract-9][contract-4]") {
  unconfined_executor executor(fast_config());
  auto id = start(executor, "sleep 100");
  CHECK(executor.get(id).status == task_status::running);
  const auto begin = steady::now();
  CHECK(executor.kill(id));
  auto final_facts = executor.wait(id);
  CHECK(ms_since(begin) < 5000);
  CHECK(final_facts.status == task_status::killed);
  REQUIRE(final_facts.signal.has_value());
  CHECK(signal_name(*final_facts.signal) == "SIGTERM");
  CHECK_FALSE(final_facts.exit_code.has_value());
  CHECK_FALSE(executor.kill(id));
  CHECK(executor.get(id).status == task_status::killed);
}

TEST_CASE("a background task whose shell left a server holding its output keeps running and streaming",
          "[background][contract-9]") {
  unconfined_executor executor(fast_config());  // drain 300 ms: it must not apply to background tasks
  auto id = start(executor, "(sleep 0.6; echo late) & echo up");
  CHECK(read_until(executor, id, "up\n") == "up\n");
  std::this_thread::sleep_for(400ms);
  CHECK(executor.get(id).status == task_status::running);
  CHECK(read_until(executor, id, "late\n") == "late\n");
  auto final_facts = executor.wait(id);
  CHECK(final_facts.status == task_status::completed);
  CHECK(final_facts.exit_code == 0);
}

TEST_CASE("contract 12: a member that detached from a settled task's output dies with the executor",
          "[background][contract-12]") {
  long detached = 0;
  {
    unconfined_executor executor(fast_config());
    auto id = start(executor, "sleep 60 >/dev/null 2>&1 </dev/null & echo $!");
    CHECK(executor.wait(id).status == task_status::completed);
    detached = test_support::first_pid(executor.read_output(id).delta);
    REQUIRE(detached > 1);
    CHECK(test_support::pid_alive(detached));
  }
  CHECK(eventually([&] { return !test_support::pid_alive(detached); }));
}

TEST_CASE("contract 9: kill of a finished task returns false", "[background][contract-9]") {
  unconfined_executor executor(fast_config());
  auto id = start(executor, "exit 3");
  CHECK(executor.wait(id).exit_code == 3);
  CHECK_FALSE(executor.kill(id));
  CHECK(executor.get(id).status == task_status::completed);
}

TEST_CASE("contract 4/9: a killed TERM-trapping task is SIGKILLed after the grace", "[background][contract-4]") {
  unconfined_executor executor(fast_config());
  auto id = start(executor, "trap '' TERM; echo $$; sleep 100");
  const long pgid = test_support::first_pid(read_until(executor, id, "\n"));
  REQUIRE(pgid > 1);
  const auto begin = steady::now();
  CHECK(executor.kill(id));
  auto final_facts = executor.wait(id);
  const auto elapsed = ms_since(begin);
  CHECK(final_facts.status == task_status::killed);
  CHECK(final_facts.signal == SIGKILL);
  CHECK(elapsed >= 280);
  CHECK(elapsed < 5000);
  CHECK(test_support::live_group_members(pgid).empty());
}

TEST_CASE("contract 9: a task that sends itself SIGKILL ends killed", "[background][contract-9]") {
  unconfined_executor executor(fast_config());
  auto id = start(executor, "kill -KILL $$");
  auto final_facts = executor.wait(id);
  CHECK(final_facts.status == task_status::killed);
  CHECK(final_facts.signal == SIGKILL);
}

TEST_CASE("contract 9: unknown ids throw unknown_task from kill, read_output, get, wait and wait_for",
          "[background][contract-9]") {
  unconfined_executor executor(fast_config());
  const task_id missing("bash-999");
  CHECK_THROWS_AS(executor.kill(missing), unknown_task);
  CHECK_THROWS_AS(executor.read_output(missing), unknown_task);
  CHECK_THROWS_AS(executor.get(missing), unknown_task);
  CHECK_THROWS_AS(executor.wait(missing), unknown_task);
  CHECK_THROWS_AS(executor.wait_for(missing, 10ms), unknown_task);
  auto id = start(executor, "true");
  executor.wait(id);
  CHECK_THROWS_AS(executor.get(task_id("bash-2")), unknown_task);
}

TEST_CASE("contract 11: owner_of returns the token verbatim, empty for ownerless and unknown ids",
          "[background][contract-11]") {
  unconfined_executor executor(fast_config());
  const owner_token odd(std::string(" Session/ü \t\n\0x ", 16));
  auto owned = start(executor, "true", odd);
  auto ownerless = start(executor, "true");
  CHECK(executor.owner_of(owned) == odd);
  CHECK(executor.owner_of(owned)->value().size() == 16);
  CHECK_FALSE(executor.owner_of(ownerless).has_value());
  CHECK_FALSE(executor.owner_of(task_id("bash-999")).has_value());
  executor.wait(owned);
  executor.wait(ownerless);
}

TEST_CASE("contract 9: list returns every task in start order", "[background][contract-9]") {
  unconfined_executor executor(fast_config());
  auto a = start(executor, "echo 1");
  auto b = start(executor, "sleep 100");
  auto c = start(executor, "exit 2");
  executor.wait(a);
  executor.wait(c);
  auto all = executor.list();
  REQUIRE(all.size() == 3);
  CHECK(all[0].id == a);
  CHECK(all[1].id == b);
  CHECK(all[2].id == c);
  CHECK(all[0].command == "echo 1");
  CHECK(all[1].status == task_status::running);
  CHECK(all[2].exit_code == 2);
  executor.kill(b);
  executor.wait(b);
}

TEST_CASE("contract 2/9: start checks the shell up front and throws infrastructure_error",
          "[background][contract-9][contract-2]") {
  executor_config config = fast_config();
  config.shell = "/nonexistent/bash";
  unconfined_executor executor(config);
  CHECK_THROWS_AS(executor.start(executor.resolve({.command = "true"})), infrastructure_error);
  CHECK(executor.list().empty());
  SECTION("an unusable workdir throws too") {
    unconfined_executor plain(fast_config());
    CHECK_THROWS_AS(plain.start(plain.resolve({.command = "true", .workdir = "/nonexistent/dir"})),
                    infrastructure_error);
  }
}

TEST_CASE("contract 9/10: a spawn that fails after the checks settles the task as killed, with the reason",
          "[background][contract-9][contract-10]") {
  const unexecutable_shell shell;
  unconfined_executor executor(shell.apply(fast_config()));
  std::atomic<int> calls{0};
  auto sub = executor.on_task_done([&](const task_snapshot&) { ++calls; });
  task_id id;
  REQUIRE_NOTHROW(id = executor.start(executor.resolve({.command = "true"})));
  auto final_facts = executor.wait(id);
  CHECK(final_facts.status == task_status::killed);
  REQUIRE(final_facts.start_error);
  CHECK_THAT(*final_facts.start_error, Catch::Contains(shell.name()));
  CHECK_THAT(executor.read_output(id).delta, Catch::StartsWith("[stderr]\n") && Catch::Contains(shell.name()));
  CHECK(executor.read_output(id).delta.empty());
  CHECK(eventually([&] { return calls.load() == 1; }, 2s));
}

TEST_CASE("a background start that could not run says so in its own answer, not only in bash_output (issue 25)",
          "[background][tools][contract-20]") {
  const unexecutable_shell shell;
  unconfined_executor executor(shell.apply(fast_config()));
  bash_tools tools(executor);
  const nlohmann::json args = {{"command", "echo ran"}, {"description", "d"}, {"run_in_background", true}};
  const tool_result started = tools.call("bash", args, call_context{});
  CHECK(started.is_error);
  CHECK_THAT(started.text, Catch::StartsWith("the command could not be run: ") && Catch::Contains(shell.name()) &&
                               Catch::EndsWith("; background task bash-1 settled as killed"));
  // The task is there, settled, its reason in its output as before.
  const tool_result read = tools.call("bash_output", {{"task_id", "bash-1"}}, call_context{});
  CHECK_THAT(read.text, Catch::Contains("could not start the command") && Catch::Contains("[status: killed"));
  SECTION("a start that ran answers as always") {
    unconfined_executor plain(fast_config());
    bash_tools plain_tools(plain);
    CHECK(plain_tools.call("bash", args, call_context{}).text == "started background task bash-1");
    plain.wait(task_id("bash-1"));
  }
}

TEST_CASE("contract 10: the listener fires exactly once per task for 50 concurrent tasks, after final facts",
          "[background][contract-10][concurrency]") {
  unconfined_executor executor(fast_config());
  std::mutex mutex;
  std::map<std::string, int> calls;
  std::map<std::string, task_snapshot> facts;
  auto sub = executor.on_task_done([&](const task_snapshot& t) {
    std::lock_guard lock(mutex);
    ++calls[t.id.value()];
    facts[t.id.value()] = t;
  });
  std::vector<task_id> ids;
  for (int i = 0; i < 50; ++i)
    ids.push_back(start(executor, i % 5 == 0 ? "sleep 0.2; exit " + std::to_string(i % 7)
                                             : "exit " + std::to_string(i % 7)));
  for (const auto& id : ids) executor.wait(id);
  CHECK(eventually([&] {
    std::lock_guard lock(mutex);
    return calls.size() == 50;
  }));
  std::this_thread::sleep_for(100ms);  // a duplicate call would land here
  std::lock_guard lock(mutex);
  REQUIRE(calls.size() == 50);
  for (int i = 0; i < 50; ++i) {
    const auto& key = ids[static_cast<std::size_t>(i)].value();
    CAPTURE(key);
    CHECK(calls[key] == 1);
    CHECK(facts[key].status == task_status::completed);
    CHECK(facts[key].exit_code == i % 7);
  }
}

TEST_CASE("contract 10: a throwing listener neither starves the next one nor breaks the task",
          "[background][contract-10][concurrency]") {
  std::mutex mutex;
  std::vector<std::string> reported;
  executor_config config = fast_config();
  config.error_sink = [&](std::string_view message) {
    std::lock_guard lock(mutex);
    reported.emplace_back(message);
  };
  unconfined_executor executor(config);
  std::atomic<int> second_calls{0};
  auto throwing = executor.on_task_done([](const task_snapshot&) { throw std::runtime_error("listener boom"); });
  auto counting = executor.on_task_done([&](const task_snapshot&) { ++second_calls; });
  auto id = start(executor, "echo fine");
  auto final_facts = executor.wait(id);
  CHECK(final_facts.status == task_status::completed);
  CHECK(eventually([&] { return second_calls.load() == 1; }, 5s));
  CHECK(executor.read_output(id).delta == "fine\n");
  std::lock_guard lock(mutex);
  REQUIRE(reported.size() == 1);
  CHECK_THAT(reported[0], Catch::Contains("listener boom"));
  // The executor keeps working afterwards.
  CHECK(executor.run(executor.resolve({.command = "echo ok"})).out.text == "ok\n");
}

TEST_CASE("contract 10: resetting a subscription unsubscribes", "[background][contract-10][concurrency]") {
  unconfined_executor executor(fast_config());
  std::atomic<int> calls{0};
  auto sub = executor.on_task_done([&](const task_snapshot&) { ++calls; });
  REQUIRE(static_cast<bool>(sub));
  sub.reset();
  CHECK_FALSE(static_cast<bool>(sub));
  std::atomic<int> witness{0};
  auto other = executor.on_task_done([&](const task_snapshot&) { ++witness; });
  executor.wait(start(executor, "true"));
  REQUIRE(eventually([&] { return witness.load() == 1; }, 5s));
  CHECK(calls.load() == 0);
  SECTION("and a subscription may outlive its executor") {
    auto executor2 = std::make_unique<unconfined_executor>(fast_config());
    auto late = executor2->on_task_done([](const task_snapshot&) {});
    executor2.reset();
    late.reset();
    SUCCEED();
  }
}

TEST_CASE("contract 10/12: after disposal no listener runs and no process of the tasks' groups is left",
          "[background][contract-10][contract-12]") {
  std::atomic<int> calls{0};
  long pgid_a = 0, pgid_b = 0;
  {
    unconfined_executor executor(fast_config());
    auto sub = executor.on_task_done([&](const task_snapshot&) { ++calls; });
    auto a = start(executor, "echo $$; sleep 100");
    auto b = start(executor, "echo $$; sleep 100 | sleep 101");
    pgid_a = test_support::first_pid(read_until(executor, a, "\n"));
    pgid_b = test_support::first_pid(read_until(executor, b, "\n"));
    REQUIRE(pgid_a > 1);
    REQUIRE(pgid_b > 1);
    REQUIRE_FALSE(test_support::live_group_members(pgid_a).empty());
  }
  CHECK(test_support::live_group_members(pgid_a).empty());
  CHECK(test_support::live_group_members(pgid_b).empty());
  std::this_thread::sleep_for(100ms);
  CHECK(calls.load() == 0);
  CHECK(test_support::children_of_self().empty());
}

TEST_CASE("contract 12: destroying an executor with a TERM-trapping task returns after about the grace",
          "[background][contract-12][contract-4]") {
  long pgid = 0;
  auto executor = std::make_unique<unconfined_executor>(fast_config());  // grace 300 ms
  auto id = start(*executor, "trap '' TERM; echo $$; sleep 100");
  pgid = test_support::first_pid(read_until(*executor, id, "\n"));
  REQUIRE(pgid > 1);
  const auto begin = steady::now();
  executor.reset();
  const auto elapsed = ms_since(begin);
  CHECK(elapsed >= 280);
  CHECK(elapsed < 5000);
  CHECK(test_support::live_group_members(pgid).empty());
}

TEST_CASE("contract 9: wait_for returns empty while the task runs and the snapshot once it settled",
          "[background][contract-9]") {
  unconfined_executor executor(fast_config());
  auto id = start(executor, "sleep 100");
  const auto begin = steady::now();
  CHECK_FALSE(executor.wait_for(id, 150ms).has_value());
  CHECK(ms_since(begin) >= 140);
  executor.kill(id);
  auto settled = executor.wait_for(id, 5s);
  REQUIRE(settled.has_value());
  CHECK(settled->status == task_status::killed);
}

TEST_CASE("contract 5: the spill directory is removed at disposal, and kept with keep_spill_dir",
          "[background][contract-5]") {
  test_support::temp_dir parent;
  const bool keep = GENERATE(false, true);
  CAPTURE(keep);
  std::filesystem::path dir, file;
  {
    executor_config config = fast_config();
    config.spill_parent = parent.path();
    config.keep_spill_dir = keep;
    unconfined_executor executor(config);
    auto id = executor.start(executor.resolve({.command = "seq 1 1000", .stdout_max_bytes = 16}));
    executor.wait(id);
    auto r = executor.read_output(id);
    REQUIRE(r.stdout_spill_path.has_value());
    file = *r.stdout_spill_path;
    dir = executor.spill_directory();
    CHECK(file.parent_path() == dir);
    CHECK(dir.parent_path() == parent.path());
    REQUIRE(std::filesystem::exists(file));
  }
  CHECK(std::filesystem::exists(dir) == keep);
  CHECK(std::filesystem::exists(file) == keep);
}

TEST_CASE("contract 8/9: a background task gets its stdin and its scrubbed environment",
          "[background][contract-8][contract-7]") {
  unconfined_executor executor(fast_config());
  auto id = executor.start(executor.resolve({.command = "cat; echo \"$NO_COLOR $EXTRA\"",
                                             .stdin_data = std::string("line\n"),
                                             .env = std::map<std::string, std::string>{{"EXTRA", "x"}}}));
  executor.wait(id);
  CHECK(executor.read_output(id).delta == "line\n1 x\n");
}

TEST_CASE("contract 6: a read of a running task never splits a UTF-8 character across reads",
          "[background][contract-6]") {
  unconfined_executor executor(fast_config());
  // "é" is C3 A9: print its first byte, pause, then the second.
  auto id = start(executor, "printf 'caf\\303'; sleep 0.4; printf '\\251!\\n'");
  std::this_thread::sleep_for(200ms);
  CHECK(executor.read_output(id).delta == "caf");
  executor.wait(id);
  CHECK(executor.read_output(id).delta == "\xC3\xA9!\n");
}

TEST_CASE("the UTF-8 boundary rule holds back only an unfinished character", "[background][contract-6]") {
  using detail::incomplete_utf8_suffix;
  CHECK(incomplete_utf8_suffix("") == 0);
  CHECK(incomplete_utf8_suffix("abc") == 0);
  CHECK(incomplete_utf8_suffix("caf\xC3") == 1);
  CHECK(incomplete_utf8_suffix("caf\xC3\xA9") == 0);
  CHECK(incomplete_utf8_suffix("\xE2\x82") == 2);        // first two bytes of the euro sign
  CHECK(incomplete_utf8_suffix("\xE2\x82\xAC") == 0);
  CHECK(incomplete_utf8_suffix("x\xF0\x9F\x98") == 3);   // first three bytes of an emoji
  CHECK(incomplete_utf8_suffix("\x80\x80\x80\x80") == 0);  // invalid: passed on, repaired by the renderer
}

TEST_CASE("contract 10: a blocking listener delays neither other tasks' kills nor their waits",
          "[background][contract-10][concurrency]") {
  unconfined_executor executor(fast_config());
  std::atomic<bool> release{false};
  auto slow = executor.on_task_done([&](const task_snapshot&) {
    while (!release) std::this_thread::sleep_for(10ms);
  });
  auto first = start(executor, "true");
  executor.wait(first);
  auto second = start(executor, "sleep 100");
  const auto begin = steady::now();
  CHECK(executor.kill(second));
  CHECK(executor.wait_for(second, 5s).has_value());
  CHECK(ms_since(begin) < 1000);  // the listener is still blocked on the first task
  release = true;
}

TEST_CASE("contract 10: a listener may wait for another task", "[background][contract-10][concurrency]") {
  unconfined_executor executor(fast_config());
  auto other = start(executor, "sleep 0.3");
  std::atomic<bool> waited{false};
  auto sub = executor.on_task_done([&](const task_snapshot& done) {
    if (done.id != other) waited = executor.wait_for(other, 5s).has_value();
  });
  start(executor, "true");
  CHECK(eventually([&] { return waited.load(); }));
}

TEST_CASE("contract 10: unsubscribing waits for a call of that listener already in progress",
          "[background][contract-10][concurrency]") {
  unconfined_executor executor(fast_config());
  std::atomic<bool> entered{false}, finished{false};
  auto sub = executor.on_task_done([&](const task_snapshot&) {
    entered = true;
    std::this_thread::sleep_for(300ms);
    finished = true;
  });
  start(executor, "true");
  REQUIRE(eventually([&] { return entered.load(); }));
  sub.reset();
  CHECK(finished);
}

TEST_CASE("contract 5: spill files never hold more than the budget, and the oldest settled go first",
          "[background][contract-5]") {
  executor_config config = fast_config();
  config.spill_budget_bytes = 1 << 20;
  unconfined_executor executor(config);
  auto first = executor.run(executor.resolve({.command = "head -c 600000 /dev/zero"}));
  REQUIRE(first.out.spill_path);
  CHECK(std::filesystem::exists(*first.out.spill_path));
  auto second = executor.run(executor.resolve({.command = "head -c 600000 /dev/zero"}));
  REQUIRE(second.out.spill_path);
  CHECK(std::filesystem::file_size(*second.out.spill_path) == 600000);
  CHECK_FALSE(std::filesystem::exists(*first.out.spill_path));  // removed to make room
  // A stream larger than the whole budget gives up its file: no path, the tail still there.
  auto huge = executor.run(executor.resolve({.command = "head -c 3000000 /dev/zero"}));
  CHECK(huge.out.truncated);
  CHECK_FALSE(huge.out.spill_path);
  CHECK(huge.out.text.size() == 64000);
  std::uintmax_t on_disk = 0;
  for (const auto& entry : std::filesystem::directory_iterator(executor.spill_directory()))
    on_disk += entry.file_size();
  CHECK(on_disk <= config.spill_budget_bytes);
}

TEST_CASE("contract 2/9: start with a stop already requested throws, spawns nothing and uses no id",
          "[background][contract-9][contract-2]") {
  unconfined_executor executor(fast_config());
  test_support::temp_dir dir;
  std::stop_source stop;
  stop.request_stop();
  const auto marker = dir.path() / "ran";
  auto spec = executor.resolve({.command = "touch " + marker.string(), .stop = stop.get_token()});
  CHECK_THROWS_AS(executor.start(spec), infrastructure_error);
  CHECK(executor.list().empty());
  std::this_thread::sleep_for(100ms);  // a command that was spawned anyway would have touched it by now
  CHECK_FALSE(std::filesystem::exists(marker));
  CHECK(start(executor, "true") == task_id("bash-1"));
  executor.wait(task_id("bash-1"));
}

TEST_CASE("contract 9: a stop requested after start kills the task, which settles as killed",
          "[background][contract-9][contract-4]") {
  unconfined_executor executor(fast_config());
  std::stop_source stop;

  SECTION("a plain command gets SIGTERM") {
    auto id = executor.start(executor.resolve({.command = "sleep 60", .stop = stop.get_token()}));
    CHECK(executor.get(id).status == task_status::running);
    const auto begin = steady::now();
    stop.request_stop();
    auto settled = executor.wait_for(id, 10s);
    REQUIRE(settled.has_value());
    CHECK(ms_since(begin) < 5000);
    CHECK(settled->status == task_status::killed);
    REQUIRE(settled->signal.has_value());
    CHECK(signal_name(*settled->signal) == "SIGTERM");
    CHECK_FALSE(executor.kill(id));
  }
  SECTION("a TERM-trapping command gets SIGKILL after the grace") {
    auto id = executor.start(executor.resolve({.command = "trap '' TERM; sleep 60",
                                               .stop = stop.get_token()}));
    std::this_thread::sleep_for(100ms);  // let the shell install its trap
    std::jthread requester([&] { stop.request_stop(); });  // any thread may request it
    requester.join();
    auto settled = executor.wait_for(id, 10s);
    REQUIRE(settled.has_value());
    CHECK(settled->status == task_status::killed);
    REQUIRE(settled->signal.has_value());
    CHECK(signal_name(*settled->signal) == "SIGKILL");
  }
  SECTION("a stop after the task finished changes nothing") {
    auto id = executor.start(executor.resolve({.command = "exit 3", .stop = stop.get_token()}));
    executor.wait(id);
    stop.request_stop();
    CHECK(executor.get(id).status == task_status::completed);
    CHECK(executor.get(id).exit_code == 3);
  }
}

TEST_CASE("contract 9/12: a stop requested after the executor is gone reaches nothing of it",
          "[background][contract-9][contract-12]") {
  std::stop_source stop;
  {
    unconfined_executor executor(fast_config());
    for (int i = 0; i < 5; ++i) executor.start(executor.resolve({.command = "sleep 60", .stop = stop.get_token()}));
    executor.start(executor.resolve({.command = "true", .stop = stop.get_token()}));
  }
  stop.request_stop();  // the callbacks are gone with their tasks: no use after free
  SUCCEED("request_stop after disposal returned");
}

// Not in the remote/ lane: it breaks the reactor's epoll set in this
// process, and there the reactor is the server's.
#ifndef BASHEXEC_TEST_REMOTE
namespace {

/// This process's descriptors that are epoll sets.
std::vector<int> epoll_descriptors() {
  std::vector<int> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    const auto target = std::filesystem::read_symlink(entry.path(), error);
    if (!error && target.string() == "anon_inode:[eventpoll]") out.push_back(std::stoi(entry.path().filename()));
  }
  return out;
}

}  // namespace

TEST_CASE("reactor: when its epoll set breaks, every task is killed and settles with the reason, the host lives on, "
          "and later starts are refused with it (issue 26: a library thread never throws)",
          "[background][reactor]") {
  const auto before = epoll_descriptors();
  unconfined_executor executor(fast_config());
  const task_id running = start(executor, "sleep 30");
  std::vector<int> ours;
  for (int fd : epoll_descriptors())
    if (std::find(before.begin(), before.end(), fd) == before.end()) ours.push_back(fd);
  REQUIRE(ours.size() == 1);
  // The epoll set's number now names /dev/null: the next epoll_wait fails
  // with EINVAL, as a real broken set would. (Before: std::terminate.)
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  REQUIRE(null_fd >= 0);
  REQUIRE(::dup3(null_fd, ours.front(), O_CLOEXEC) == ours.front());  // the reactor closes it in the end
  ::close(null_fd);
  // This start cannot register (epoll_ctl fails) and wakes the loop.
  const task_id second = start(executor, "sleep 30");
  CHECK(executor.wait(second).status == task_status::killed);
  const task_snapshot facts = executor.wait(running);  // bounded by the test's timeout: a hang is a failure
  CHECK(facts.status == task_status::killed);
  REQUIRE(facts.start_error);
  CHECK_THAT(*facts.start_error, Catch::Contains("epoll_wait"));
  const task_snapshot later = executor.wait(start(executor, "echo never"));
  CHECK(later.status == task_status::killed);
  REQUIRE(later.start_error);
  CHECK_THAT(*later.start_error, Catch::Contains("reactor thread stopped"));
  // Foreground runs do not use the reactor: they still work.
  CHECK(executor.run(executor.resolve({.command = "echo still"})).out.text == "still\n");
}
#endif

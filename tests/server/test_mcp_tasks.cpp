// Tests of server/mcp_tasks.hpp: the bookkeeping of an MCP server's tasks —
// statuses and their notifications, results kept and answered to waiting
// requests, cancellation, retention by ttl, the cap on tasks, pagination.
// The protocol around it is tested end to end by tests/mcp (the official
// SDK's task API and raw JSON-RPC).

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>

#include <bashexec/server/mcp_tasks.hpp>

using namespace bashexec::server::mcp;
using nlohmann::json;

namespace {

json call_result(int exit_code) {
  return {{"content", json::array({{{"type", "text"}, {"text", "[exit code: " + std::to_string(exit_code) + "]"}}})},
          {"isError", false}};
}

}  // namespace

TEST_CASE("a task is created working, with timestamps, the capped ttl and a poll interval", "[mcp][tasks]") {
  task_board board({.max_ttl = std::chrono::minutes(10)});
  const auto task = board.create(24 * 3600 * 1000);
  REQUIRE(task);
  const json shown = board.describe(*task);
  CHECK(shown["taskId"] == "task-1");
  CHECK(shown["status"] == "working");
  CHECK(shown["ttl"] == 600000);
  CHECK(shown["pollInterval"] == 500);
  const std::string created = shown["createdAt"];
  CHECK(created.size() == std::string("2026-12-03T17:52:46.123Z").size());
  CHECK(created.back() == 'Z');
  CHECK(board.create(std::nullopt)->id == "task-2");
}

TEST_CASE("waiting for the person is input_required and back, each change one status notification",
          "[mcp][tasks]") {
  task_board board;
  const auto task = board.create(std::nullopt);
  auto change = board.set_waiting(*task, true);
  REQUIRE(change.status);
  CHECK((*change.status)["method"] == "notifications/tasks/status");
  CHECK((*change.status)["params"]["status"] == "input_required");
  CHECK_FALSE(board.set_waiting(*task, true).status);  // no change, no notification
  CHECK(board.set_waiting(*task, false).status.value()["params"]["status"] == "working");
}

TEST_CASE("a result is kept and answers every tasks/result that waited, tagged with its task", "[mcp][tasks]") {
  task_board board;
  const auto task = board.create(std::nullopt);
  CHECK_FALSE(board.result_or_wait(*task, 7));
  CHECK_FALSE(board.result_now(*task, 8));
  auto change = board.finish(*task, call_result(3), false, "");
  REQUIRE(change.status);
  CHECK((*change.status)["params"]["status"] == "completed");
  REQUIRE(change.responses.size() == 1);
  CHECK(change.responses[0]["id"] == 7);
  CHECK(change.responses[0]["result"]["content"][0]["text"] == "[exit code: 3]");
  CHECK(change.responses[0]["result"]["_meta"][std::string(related_task_key)]["taskId"] == "task-1");
  CHECK(board.result_or_wait(*task, 9).value()["result"]["isError"] == false);
  // A second answer of the call (there is none; but nothing may change the end).
  CHECK_FALSE(board.finish(*task, call_result(4), true, "x").status);
}

TEST_CASE("a failed call's task is failed with a status message, and still has its result", "[mcp][tasks]") {
  task_board board;
  const auto task = board.create(std::nullopt);
  board.finish(*task, call_result(0), true, "sandbox unavailable");
  const json shown = board.describe(*task);
  CHECK(shown["status"] == "failed");
  CHECK(shown["statusMessage"] == "sandbox unavailable");
  CHECK(board.result_now(*task, 1).value().contains("result"));
}

TEST_CASE("cancel stops the call once, its waiting requests get an error and its late result is dropped",
          "[mcp][tasks]") {
  task_board board;
  const auto task = board.create(std::nullopt);
  CHECK_FALSE(board.result_or_wait(*task, "r"));
  auto [outcome, change] = board.cancel(*task);
  CHECK(outcome == task_board::cancel_outcome::cancelled);
  CHECK(task->stop.stop_requested());
  REQUIRE(change.responses.size() == 1);
  CHECK(change.responses[0]["error"]["code"] == -32602);
  CHECK(board.describe(*task)["status"] == "cancelled");
  CHECK_FALSE(board.finish(*task, call_result(0), false, "").status);
  CHECK(board.result_now(*task, 2).value().contains("error"));
  CHECK(board.cancel(*task).first == task_board::cancel_outcome::already_ended);
}

TEST_CASE("an ended task is forgotten past its ttl, a running one never is", "[mcp][tasks]") {
  task_board board;
  const auto short_lived = board.create(0);
  const auto running = board.create(0);
  board.finish(*short_lived, call_result(0), false, "");
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK_FALSE(board.find(short_lived->id));
  CHECK(board.find(running->id));
}

TEST_CASE("the board holds at most max_tasks, and forgotten ones make room", "[mcp][tasks]") {
  task_board board({.max_tasks = 2});
  const auto first = board.create(0);
  REQUIRE(board.create(std::nullopt));
  CHECK_FALSE(board.create(std::nullopt));
  board.finish(*first, call_result(0), false, "");
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(board.create(std::nullopt));
}

TEST_CASE("tasks/list pages oldest first and takes only a cursor it gave", "[mcp][tasks]") {
  task_board board({.page_size = 2});
  for (int i = 0; i < 5; ++i) board.create(std::nullopt);
  const json first = board.list(std::nullopt).value();
  CHECK(first["tasks"].size() == 2);
  CHECK(first["tasks"][0]["taskId"] == "task-1");
  const json second = board.list(first["nextCursor"].get<std::string>()).value();
  CHECK(second["tasks"][0]["taskId"] == "task-3");
  const json last = board.list(second["nextCursor"].get<std::string>()).value();
  CHECK(last["tasks"].size() == 1);
  CHECK_FALSE(last.contains("nextCursor"));
  CHECK_FALSE(board.list(std::string("x")));
  CHECK_FALSE(board.list(std::string("99")));
  CHECK_FALSE(board.list(std::string("")));
}

TEST_CASE("a task's status message: a failure's first line, or that its command waits for input and how to answer",
          "[mcp][tasks]") {
  CHECK(task_status_message(true, "sandbox unavailable\nmore", nullptr) == "sandbox unavailable");
  CHECK(task_status_message(true, std::string(400, 'x'), nullptr).size() == 300);
  CHECK(task_status_message(false, "[exit code: 0]", nullptr).empty());
  const json exited = {{"exit_code", 0}, {"input_wait", nullptr}};
  CHECK(task_status_message(false, "done", &exited).empty());
  const json waiting = {{"task_id", "bash-3"}, {"status", "running"}, {"input_wait", {{"prompt", "Proceed? [Y/n] "}}}};
  CHECK(task_status_message(false, "...", &waiting) ==
        R"(the command waits for input (prompt "Proceed? [Y/n] ") and goes on as bash-3: answer with bash_input)");
  // The task is completed all the same: the MCP call answered.
  task_board board;
  const auto task = board.create(std::nullopt);
  board.finish(*task, call_result(0), false, task_status_message(false, "...", &waiting));
  const json shown = board.describe(*task);
  CHECK(shown["status"] == "completed");
  CHECK_THAT(shown["statusMessage"].get<std::string>(), Catch::Contains("bash_input") && Catch::Contains("bash-3"));
}

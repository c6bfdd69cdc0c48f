// server/mcp_tasks: the MCP `tasks` utility (revision 2025-11-25) for the
// `bash` tool — the bookkeeping of an MCP server's tasks (docs/tool-protocol.md,
// "Tasks"). A task-augmented tools/call is answered at once with a
// CreateTaskResult; the call itself then runs as it would have without the
// task (the same tool call on a worker slot, the same escalation questions),
// and its CallToolResult is kept as the task's result — so `tasks/result`
// returns exactly what the plain call would have. `tasks/cancel` stops the
// call, which kills the command's process group (SIGTERM, then SIGKILL).
//
// Statuses: working; input_required while an escalation question of the
// call waits for the person; completed (a result, also for a command that
// exited non-zero; a `tty` call that handed its command on waiting for
// input is completed too, its statusMessage saying so and naming the bash
// task to answer with bash_input); failed (a result with isError: the call
// did not do what was asked — its text says why); cancelled (no result). Each change is a
// `notifications/tasks/status`. A task ended longer ago than its ttl is
// forgotten (tasks/get then says unknown); the server caps the ttl a client
// asks for and the number of tasks it holds.
//
// This file holds no threads: the server calls it from its reader and
// worker threads, and every member locks.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/chrono.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace bashexec::server::mcp {

/// The revision that brought tasks: older sessions see none of this.
inline constexpr std::string_view tasks_revision = "2025-11-25";
/// The `_meta` key that ties a message to its task.
inline constexpr std::string_view related_task_key = "io.modelcontextprotocol/related-task";

enum class task_state { working, input_required, completed, failed, cancelled };

inline std::string_view task_state_name(task_state state) noexcept {
  switch (state) {
    case task_state::working: return "working";
    case task_state::input_required: return "input_required";
    case task_state::completed: return "completed";
    case task_state::failed: return "failed";
    case task_state::cancelled: return "cancelled";
  }
  return "failed";
}

/// The statusMessage of a task whose call answered `text` (`failed`: an
/// error result) with the tool's `facts`: a failure's first line (at most
/// 300 bytes); for a call that handed its command on waiting for input
/// (`tty`), that it waits, its prompt, and how to answer — the MCP task is
/// completed, and the command goes on as the bash task the facts name.
/// Empty otherwise.
inline std::string task_status_message(bool failed, std::string_view text, const nlohmann::json* facts) {
  if (failed) return std::string(text.substr(0, std::min<std::size_t>(text.find('\n'), 300)));
  if (!facts || !facts->is_object()) return {};
  const auto wait = facts->find("input_wait");
  const auto id = facts->find("task_id");
  if (wait == facts->end() || !wait->is_object() || id == facts->end() || !id->is_string()) return {};
  const auto prompt = wait->find("prompt");
  const std::string shown = prompt != wait->end() && prompt->is_string()
                                ? nlohmann::json(prompt->get<std::string>().substr(0, 200))
                                      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                                : std::string("\"\"");
  return fmt::format("the command waits for input (prompt {}) and goes on as {}: answer with bash_input", shown,
                     id->get<std::string>());
}

inline bool terminal(task_state state) noexcept {
  return state == task_state::completed || state == task_state::failed || state == task_state::cancelled;
}

/// An ISO 8601 UTC time with milliseconds, as tasks' timestamps are.
inline std::string iso8601(std::chrono::system_clock::time_point when) {
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count() % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(when)), millis);
}

/// How the server bounds its tasks.
struct task_limits {
  /// The longest a task's result is kept after it ended; a client's larger
  /// `ttl` is cut to this, and a task without one gets it.
  std::chrono::milliseconds max_ttl{std::chrono::hours(1)};
  /// Tasks held at once (ended ones count until forgotten).
  std::size_t max_tasks = 256;
  /// What tasks/get suggests between polls.
  std::chrono::milliseconds poll_interval{500};
  /// tasks/list page size.
  std::size_t page_size = 50;
};

/// One task: its facts, its call's stop source, and the tasks/result
/// requests waiting for its end.
struct mcp_task {
  std::string id;
  task_state state = task_state::working;
  std::string status_message;
  std::chrono::system_clock::time_point created, updated;
  std::chrono::milliseconds ttl{0};
  std::chrono::steady_clock::time_point ended{};
  std::stop_source stop;
  std::optional<nlohmann::json> result;  // the CallToolResult, once completed or failed
  std::vector<nlohmann::json> waiting;   // ids of tasks/result requests not yet answered
};

/// Messages the caller sends after a change, outside the board's lock.
struct task_change {
  std::optional<nlohmann::json> status;   // notifications/tasks/status
  std::vector<nlohmann::json> responses;  // answers to waiting tasks/result requests
};

class task_board {
 public:
  explicit task_board(task_limits limits = {}) : limits_(limits) {}

  /// A new working task, or null when the server holds `max_tasks` already.
  /// `ttl_ms`: the client's ask, capped.
  std::shared_ptr<mcp_task> create(std::optional<std::int64_t> ttl_ms) {
    std::lock_guard lock(mutex_);
    forget_expired();
    if (tasks_.size() >= limits_.max_tasks) return nullptr;
    auto task = std::make_shared<mcp_task>();
    task->id = fmt::format("task-{}", ++created_);
    task->created = task->updated = std::chrono::system_clock::now();
    task->ttl = ttl_ms ? std::min(limits_.max_ttl, std::chrono::milliseconds(std::max<std::int64_t>(0, *ttl_ms)))
                       : limits_.max_ttl;
    order_.push_back(task->id);
    tasks_.emplace(task->id, task);
    return task;
  }

  /// The Task object the protocol shows for `task`.
  nlohmann::json describe(const mcp_task& task) const {
    std::lock_guard lock(mutex_);
    return describe_locked(task);
  }

  /// The task `id`, or null when unknown or forgotten.
  std::shared_ptr<mcp_task> find(const std::string& id) {
    std::lock_guard lock(mutex_);
    forget_expired();
    const auto it = tasks_.find(id);
    return it == tasks_.end() ? nullptr : it->second;
  }

  /// The call is waiting for the person (or no longer is): a status change
  /// unless the task has ended meanwhile.
  task_change set_waiting(mcp_task& task, bool waiting) {
    std::lock_guard lock(mutex_);
    task_change change;
    if (terminal(task.state)) return change;
    const task_state next = waiting ? task_state::input_required : task_state::working;
    if (next == task.state) return change;
    task.state = next;
    task.updated = std::chrono::system_clock::now();
    change.status = status_notification(task);
    return change;
  }

  /// The call answered with `result` (a CallToolResult; `failed` when it is
  /// an error result). Dropped when the task was cancelled first.
  task_change finish(mcp_task& task, nlohmann::json result, bool failed, std::string message) {
    std::lock_guard lock(mutex_);
    task_change change;
    if (terminal(task.state)) return change;
    task.state = failed ? task_state::failed : task_state::completed;
    task.status_message = std::move(message);
    result["_meta"][std::string(related_task_key)] = {{"taskId", task.id}};
    task.result = std::move(result);
    end(task, change);
    for (auto& id : task.waiting) change.responses.push_back(result_response(std::move(id), *task.result));
    task.waiting.clear();
    return change;
  }

  enum class cancel_outcome { cancelled, already_ended };

  /// tasks/cancel: stops the call (its command is killed) and answers every
  /// waiting tasks/result with an error; `already_ended` changes nothing.
  std::pair<cancel_outcome, task_change> cancel(mcp_task& task) {
    task_change change;
    {
      std::lock_guard lock(mutex_);
      if (terminal(task.state)) return {cancel_outcome::already_ended, std::move(change)};
      task.state = task_state::cancelled;
      task.status_message = "cancelled by the client; the command was stopped";
      end(task, change);
      for (auto& id : task.waiting) change.responses.push_back(cancelled_response(std::move(id), task));
      task.waiting.clear();
    }
    task.stop.request_stop();
    return {cancel_outcome::cancelled, std::move(change)};
  }

  /// tasks/result for `task`: the answer now when it has ended, else none
  /// (the request waits, answered by finish or cancel).
  std::optional<nlohmann::json> result_or_wait(mcp_task& task, nlohmann::json request_id) {
    std::lock_guard lock(mutex_);
    if (task.state == task_state::cancelled) return cancelled_response(std::move(request_id), task);
    if (task.result) return result_response(std::move(request_id), *task.result);
    task.waiting.push_back(std::move(request_id));
    return std::nullopt;
  }

  /// tasks/result without waiting: the answer when the task has ended.
  std::optional<nlohmann::json> result_now(mcp_task& task, nlohmann::json request_id) {
    std::lock_guard lock(mutex_);
    if (task.state == task_state::cancelled) return cancelled_response(std::move(request_id), task);
    if (task.result) return result_response(std::move(request_id), *task.result);
    return std::nullopt;
  }

  /// tasks/list: a page of the session's tasks, oldest first, from `cursor`
  /// (an opaque position this returned before); nullopt for a bad cursor.
  std::optional<nlohmann::json> list(const std::optional<std::string>& cursor) {
    std::lock_guard lock(mutex_);
    forget_expired();
    std::size_t from = 0;
    if (cursor) {
      if (cursor->empty() || cursor->find_first_not_of("0123456789") != std::string::npos || cursor->size() > 18)
        return std::nullopt;
      from = std::stoull(*cursor);
      if (from > order_.size()) return std::nullopt;
    }
    nlohmann::json page = nlohmann::json::array();
    std::size_t at = from;
    for (; at < order_.size() && page.size() < limits_.page_size; ++at)
      page.push_back(describe_locked(*tasks_.at(order_[at])));
    nlohmann::json body = {{"tasks", std::move(page)}};
    if (at < order_.size()) body["nextCursor"] = std::to_string(at);
    return body;
  }

  /// Every task not ended: the server is closing.
  void stop_all() {
    std::lock_guard lock(mutex_);
    for (auto& [id, task] : tasks_)
      if (!terminal(task->state)) task->stop.request_stop();
  }

 private:
  nlohmann::json describe_locked(const mcp_task& task) const {
    nlohmann::json body = {{"taskId", task.id},
                           {"status", task_state_name(task.state)},
                           {"ttl", task.ttl.count()},
                           {"createdAt", iso8601(task.created)},
                           {"lastUpdatedAt", iso8601(task.updated)},
                           {"pollInterval", limits_.poll_interval.count()}};
    if (!task.status_message.empty()) body["statusMessage"] = task.status_message;
    return body;
  }

  nlohmann::json status_notification(const mcp_task& task) const {
    return {{"jsonrpc", "2.0"}, {"method", "notifications/tasks/status"}, {"params", describe_locked(task)}};
  }

  static nlohmann::json result_response(nlohmann::json id, const nlohmann::json& result) {
    return {{"jsonrpc", "2.0"}, {"id", std::move(id)}, {"result", result}};
  }

  static nlohmann::json cancelled_response(nlohmann::json id, const mcp_task& task) {
    return {{"jsonrpc", "2.0"},
            {"id", std::move(id)},
            {"error",
             {{"code", -32602}, {"message", fmt::format("task {} was cancelled; it has no result", task.id)}}}};
  }

  void end(mcp_task& task, task_change& change) {
    task.updated = std::chrono::system_clock::now();
    task.ended = std::chrono::steady_clock::now();
    change.status = status_notification(task);
  }

  /// Ended tasks past their ttl leave (under the lock).
  void forget_expired() {
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(order_, [&](const std::string& id) {
      const auto& task = *tasks_.at(id);
      if (!terminal(task.state) || now - task.ended < task.ttl) return false;
      tasks_.erase(id);
      return true;
    });
  }

  task_limits limits_;
  mutable std::mutex mutex_;
  std::uint64_t created_ = 0;
  std::vector<std::string> order_;
  std::map<std::string, std::shared_ptr<mcp_task>> tasks_;
};

}  // namespace bashexec::server::mcp

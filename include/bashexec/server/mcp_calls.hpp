// server/mcp_calls: the tools/call requests an MCP server has in flight, by
// request id: a cancellation (`notifications/cancelled`) stops the call and
// drops its answer (and the server kills the background task it started:
// `started_task`), and a call that carries a progress token is told, on
// each tick, how long it has run and how many bytes it printed. Once a call
// is answered neither happens any more.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bashexec/run_progress.hpp"
#include "bashexec/ids.hpp"
#include "bashexec/server/mcp_protocol.hpp"
#include "bashexec/tools/bash_tools.hpp"

namespace bashexec::server::mcp {

/// One tools/call in flight.
struct call_state {
  nlohmann::json id;
  std::string key;
  std::stop_source stop;
  std::shared_ptr<batch_replies> batch;
  std::optional<nlohmann::json> progress_token;
  std::shared_ptr<run_progress> progress;
  std::chrono::steady_clock::time_point started;
  // Under `mutex`: no progress notification follows the response.
  std::mutex mutex;
  bool cancelled = false;
  bool done = false;
  double last_progress = 0;
};

/// The background task a `bash` call's result says it started, if any.
inline std::optional<task_id> started_task(const tool_result& result) {
  if (!result.facts || !result.facts->is_object()) return std::nullopt;
  const auto id = result.facts->find("task_id");
  if (id == result.facts->end() || !id->is_string()) return std::nullopt;
  return task_id(id->get<std::string>());
}

class calls_in_flight {
 public:
  /// False when a call with the same id is still in flight.
  bool add(const std::shared_ptr<call_state>& call) {
    std::lock_guard lock(mutex_);
    return calls_.emplace(call->key, call).second;
  }

  /// `call` is answered: it leaves. True when it was cancelled first (its
  /// answer is then dropped, as the cancellation utility says).
  bool finish(call_state& call) noexcept {
    bool cancelled = false;
    {
      std::lock_guard lock(call.mutex);
      call.done = true;
      cancelled = call.cancelled;
    }
    std::lock_guard lock(mutex_);
    calls_.erase(call.key);
    return cancelled;
  }

  /// `notifications/cancelled` for `request_id`: an unknown or answered call
  /// is ignored; otherwise its foreground group is killed and its answer
  /// dropped.
  void cancel(const nlohmann::json& request_id) {
    std::shared_ptr<call_state> call;
    {
      std::lock_guard lock(mutex_);
      if (auto it = calls_.find(id_key(request_id)); it != calls_.end()) call = it->second;
    }
    if (!call) return;
    {
      std::lock_guard lock(call->mutex);
      if (call->done) return;
      call->cancelled = true;
    }
    call->stop.request_stop();
  }

  /// Emits (through `emit(json)`) a progress notification for each call
  /// that carries a progress token and has run longer than at its last one.
  template <class Emit>
  void report_progress(Emit&& emit, std::chrono::steady_clock::time_point now) {
    std::vector<std::shared_ptr<call_state>> tracked;
    {
      std::lock_guard lock(mutex_);
      for (auto& [key, call] : calls_)
        if (call->progress_token) tracked.push_back(call);
    }
    for (auto& call : tracked) {
      std::lock_guard lock(call->mutex);
      if (call->done || call->cancelled) continue;
      const double elapsed = std::chrono::duration<double>(now - call->started).count();
      if (elapsed <= call->last_progress) continue;  // progress must increase
      call->last_progress = elapsed;
      const auto out = call->progress->stdout_bytes.load(std::memory_order_relaxed);
      const auto err = call->progress->stderr_bytes.load(std::memory_order_relaxed);
      emit(progress_notification(*call->progress_token, elapsed, out, err));
    }
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<call_state>> calls_;
};

}  // namespace bashexec::server::mcp

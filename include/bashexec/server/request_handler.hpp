// server/request_handler: the JSON-lines protocol of json_lines_server
// (docs/tool-protocol.md), one line in, one response out: the ops (`tools`,
// `set_mode`, `approve`), escalation questions as `approval` lines, and tool
// calls through `bash_tools`. No threads and no I/O of its own:
// json_lines_server adds concurrency and the descriptors, and
// fuzz/fuzz_serve_request.cpp drives `handle_request_line` with a fake
// executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/executor.hpp"
#include "bashexec/session/session_log.hpp"
#include "bashexec/server/call_runner.hpp"
#include "bashexec/server/request_parse.hpp"
#include "bashexec/server/session_logs.hpp"
#include "bashexec/tools/approval_text.hpp"
#include "bashexec/tools/bash_tools.hpp"
#include "bashexec/tools/utf8.hpp"

namespace bashexec::server {

/// The response line to a request: `{"id": ..., "text": ..., "is_error": ...}`.
inline nlohmann::json response(nlohmann::json id, std::string_view text, bool is_error) {
  return {{"id", std::move(id)}, {"text", to_valid_utf8(text)}, {"is_error", is_error}};
}

/// What json_lines_server writes when even an error response could not be
/// built.
inline constexpr std::string_view json_lines_fallback_line =
    R"({"id":null,"text":"internal error: a response could not be built","is_error":true})";

/// A session on the wire: its id as a string ("" included), or null for a
/// caller without one (contract 11: the empty id is an owner like any other).
inline nlohmann::json session_json(const std::optional<owner_token>& session) {
  return session ? nlohmann::json(to_valid_utf8(session->value())) : nlohmann::json(nullptr);
}

/// Escalation questions under `approval_policy::ask`: each gets a number, a line
/// through `emit`, and waits for the matching `{"op": "approve"}` line.
class approval_desk {
 public:
  /// At most `max_pending` questions wait at once; one more is `unavailable`
  /// at once (each waiting question holds a thread).
  explicit approval_desk(std::function<void(const nlohmann::json&)> emit, std::size_t max_pending = 32)
      : emit_(std::move(emit)), max_pending_(max_pending) {}

  /// The line carries the request's fields verbatim and, as `text`, the
  /// question to show a person (`approval_text`: the whole command, hidden
  /// characters escaped); a request too long to show is `unavailable`.
  approval_outcome ask(const approval_request& request) {
    auto text = approval_text(request);
    if (!text) return approval_outcome::unavailable;
    std::future<approval_outcome> answer;
    std::uint64_t number = 0;
    {
      std::lock_guard lock(mutex_);
      if (closed_) return approval_outcome::cancelled;
      if (pending_.size() >= max_pending_) return approval_outcome::unavailable;
      number = ++last_;
      answer = pending_[number].get_future();
    }
    nlohmann::json question = {{"id", number},
                               {"session", session_json(request.session)},
                               {"command", to_valid_utf8(request.command)},
                               {"description", to_valid_utf8(request.description)},
                               {"current_mode", std::string(to_string(request.current_mode))},
                               {"requested_mode", std::string(to_string(request.requested_mode))},
                               {"justification", to_valid_utf8(request.justification)},
                               {"text", std::move(*text)}};
    // Only a network escalation names domains (validated ASCII names).
    if (!request.requested_domains.empty()) question["requested_domains"] = request.requested_domains;
    emit_({{"approval", std::move(question)}});
    return answer.get();
  }

  /// False when no question with that number is waiting.
  bool answer(std::uint64_t number, approval_outcome outcome) {
    std::lock_guard lock(mutex_);
    auto it = pending_.find(number);
    if (it == pending_.end()) return false;
    it->second.set_value(outcome);
    pending_.erase(it);
    return true;
  }

  /// End of input or a signal: nobody can answer any more.
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    for (auto& [number, promise] : pending_) promise.set_value(approval_outcome::cancelled);
    pending_.clear();
  }

 private:
  std::function<void(const nlohmann::json&)> emit_;
  std::size_t max_pending_;
  std::mutex mutex_;
  std::map<std::uint64_t, std::promise<approval_outcome>> pending_;
  std::uint64_t last_ = 0;
  bool closed_ = false;
};

/// Turns request lines into responses over one `bash_tools`. Thread-safe as
/// far as the tools and the executor are: the reader thread calls `dispatch`,
/// workers call `run`.
template <tool_executor Executor>
class request_handler {
 public:
  /// Under `approval_policy::ask`, `ask` puts the question (default: straight
  /// to `approvals`; the server wraps it to free the call's slot while a
  /// person thinks).
  request_handler(bash_tools<Executor>& tools, session_logs& logs, approval_desk& approvals,
                  approval_policy policy, std::filesystem::path workdir, request_limits limits = {},
                  asker ask = {})
      : tools_(tools),
        logs_(logs),
        approvals_(approvals),
        limits_(limits),
        runner_(tools, policy, std::move(workdir),
                ask ? std::move(ask)
                    : asker([&approvals](const approval_request& r, std::stop_token) { return approvals.ask(r); })) {}

  const request_limits& limits() const noexcept { return limits_; }

  /// The response to send now, or the tool call to run. Never throws: any
  /// failure is that request's error response.
  std::variant<nlohmann::json, tool_call> dispatch(std::string_view line) noexcept {
    nlohmann::json id;
    try {
      parsed_line parsed = parse_request_line(line, limits_);
      id = parsed.id;
      if (!parsed.request) return response(std::move(parsed.id), parsed.error, true);
      return dispatch(std::move(parsed.id), *parsed.request);
    } catch (const std::exception& e) {
      return internal_error(std::move(id), e.what());
    } catch (...) {
      return internal_error(std::move(id), "unknown exception");
    }
  }

  /// Runs a tool call; `stop` aborts a foreground command. Never throws.
  nlohmann::json run(const tool_call& call, std::stop_token stop = {}) noexcept {
    try {
      const tool_result result = runner_.call(call, std::move(stop));
      return response(call.id, result.text, result.is_error);
    } catch (const std::exception& e) {
      return internal_error(call.id, e.what());
    } catch (...) {
      return internal_error(call.id, "unknown exception");
    }
  }

 private:
  static nlohmann::json internal_error(nlohmann::json id, std::string_view what) noexcept {
    try {
      return response(std::move(id), fmt::format("internal error: {}; the server keeps serving", what), true);
    } catch (...) {
      return nlohmann::json();  // out of memory: the writer answers json_lines_fallback_line
    }
  }

  std::variant<nlohmann::json, tool_call> dispatch(nlohmann::json id, const nlohmann::json& request) {
    if (auto op = request.find("op"); op != request.end()) return handle_op(std::move(id), request, *op);
    auto tool = request.find("tool");
    if (tool == request.end() || !tool->is_string())
      return response(std::move(id), "request needs a string \"tool\" (bash, bash_output, bash_kill) or an \"op\"",
                      true);
    // Absent or null: a caller without a session, whose tasks are ownerless.
    // Any string, "" included, is a session and owns its tasks (contract 11).
    auto session = request.find("session");
    const bool has_session = session != request.end() && !session->is_null();
    if (has_session && !session->is_string())
      return response(std::move(id), "\"session\" must be a string, or null (or absent) for no session", true);
    std::optional<std::string> session_id = has_session ? std::optional(session->get<std::string>()) : std::nullopt;
    if (session_id && session_id->size() > limits_.max_session_bytes)
      return response(std::move(id),
                      fmt::format("\"session\" is {} bytes long; at most {} are allowed", session_id->size(),
                                  limits_.max_session_bytes),
                      true);
    std::shared_ptr<session_log> log;
    // The empty id names no log file, so it has no override.
    if (session_id && !session_id->empty()) {
      try {
        log = logs_.open(*session_id);
      } catch (const std::exception& e) {
        return response(std::move(id), fmt::format("session log: {}", e.what()), true);
      }
    }
    auto args = request.find("args");
    return tool_call{std::move(id), tool->get<std::string>(),
                     args != request.end() ? *args : nlohmann::json::object(), std::move(session_id),
                     std::move(log)};
  }

  nlohmann::json handle_op(nlohmann::json id, const nlohmann::json& request, const nlohmann::json& op) {
    const std::string name = op.is_string() ? op.get<std::string>() : std::string();
    if (name == "tools") {
      nlohmann::json schemas = tools_.schemas();
      const std::string text = fmt::format("{} tools", schemas.size());
      return {{"id", std::move(id)}, {"tools", std::move(schemas)}, {"text", text}, {"is_error", false}};
    }
    if (name == "set_mode") return set_mode(std::move(id), request);
    if (name == "approve") return approve(std::move(id), request);
    return response(std::move(id),
                    fmt::format("unknown op {} (tools, set_mode, approve)", detail::short_text(op.dump())), true);
  }

  nlohmann::json set_mode(nlohmann::json id, const nlohmann::json& request) {
    auto session = request.find("session");
    auto mode_field = request.find("mode");
    if (session == request.end() || !session->is_string() || session->get<std::string>().empty())
      return response(std::move(id), "set_mode needs a non-empty string \"session\"", true);
    const std::string& session_id = session->get_ref<const std::string&>();
    if (session_id.size() > limits_.max_session_bytes)
      return response(std::move(id),
                      fmt::format("\"session\" is {} bytes long; at most {} are allowed", session_id.size(),
                                  limits_.max_session_bytes),
                      true);
    if (mode_field == request.end() || !mode_field->is_string())
      return response(std::move(id), "set_mode needs a string \"mode\"", true);
    auto mode = parse_sandbox_mode(mode_field->get<std::string>());
    if (!mode)
      return response(std::move(id), "\"mode\" must be read-only, workspace-write or danger-full-access", true);
    if (!tools_.escalation_advertised())
      return response(std::move(id),
                      "this server runs commands unconfined (--unconfined); there is no sandbox mode to set", true);
    try {
      set_sandbox_mode(*logs_.open(session_id), *mode);
    } catch (const std::exception& e) {
      return response(std::move(id), fmt::format("session log: {}", e.what()), true);
    }
    return response(std::move(id), fmt::format("session {} now runs under {} mode", session_id, *mode), false);
  }

  nlohmann::json approve(nlohmann::json id, const nlohmann::json& request) {
    auto number = request.find("approval");
    auto outcome_field = request.find("outcome");
    if (number == request.end() || !number->is_number_unsigned())
      return response(std::move(id), "approve needs the numeric \"approval\" id of the question", true);
    std::optional<approval_outcome> outcome;
    if (outcome_field != request.end() && outcome_field->is_string())
      outcome = parse_approval_outcome(outcome_field->get<std::string>());
    if (!outcome)
      return response(std::move(id),
                      "\"outcome\" must be allowed-once, allowed-for-session, rejected, cancelled or unavailable", true);
    if (!approvals_.answer(number->get<std::uint64_t>(), *outcome))
      return response(std::move(id), fmt::format("no approval question {} is waiting", number->dump()), true);
    return response(std::move(id), fmt::format("approval {} answered {}", number->dump(), to_string(*outcome)),
                    false);
  }

  bash_tools<Executor>& tools_;
  session_logs& logs_;
  approval_desk& approvals_;
  request_limits limits_;
  call_runner<Executor> runner_;
};

/// One request line in, its response out, the tool call (if any) run right
/// here. json_lines_server runs tool calls on worker threads instead; this is the same
/// path without them, for the fuzz target and tests.
template <tool_executor Executor>
nlohmann::json handle_request_line(std::string_view line, request_handler<Executor>& handler,
                                   std::stop_token stop = {}) {
  auto dispatched = handler.dispatch(line);
  if (auto* now = std::get_if<nlohmann::json>(&dispatched)) return std::move(*now);
  return handler.run(std::get<tool_call>(dispatched), std::move(stop));
}

}  // namespace bashexec::server

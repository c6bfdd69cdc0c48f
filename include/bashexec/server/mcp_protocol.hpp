// server/mcp_protocol: the Model Context Protocol's wire vocabulary for
// mcp_server — JSON-RPC 2.0 messages and error codes, version negotiation,
// tool annotations and results, the elicitation form for an escalation and
// its answers, progress and logging notifications, batch replies, and the
// open elicitation questions. No threads of its own and no descriptors:
// mcp_server.hpp holds the server. docs/tool-protocol.md maps each message to
// the behaviour behind it.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/server/line_io.hpp"
#include "bashexec/server/request_parse.hpp"
#include "bashexec/server/rpc_id.hpp"
#include "bashexec/tools/approval.hpp"
#include "bashexec/tools/approval_text.hpp"
#include "bashexec/tools/bash_tools.hpp"
#include "bashexec/tools/render.hpp"
#include "bashexec/tools/result_json.hpp"
#include "bashexec/tools/utf8.hpp"
#include "bashexec/version.hpp"

namespace bashexec::server {

namespace mcp {

/// The protocol revisions this server speaks, newest first: the three the
/// issue names and the newest one @modelcontextprotocol/sdk 1.32.2 ships
/// (its LATEST_PROTOCOL_VERSION).
inline constexpr std::array<std::string_view, 4> protocol_versions{"2025-11-25", "2025-06-18", "2025-03-26",
                                                                   "2024-11-05"};

/// The client's version when we speak it, else our newest (lifecycle:
/// "Version Negotiation").
inline std::string negotiate(std::string_view requested) {
  for (auto v : protocol_versions)
    if (v == requested) return std::string(v);
  return std::string(protocol_versions.front());
}

/// Dated revisions compare as strings.
inline bool at_least(std::string_view version, std::string_view revision) { return version >= revision; }

// JSON-RPC 2.0 error codes.
inline constexpr int parse_error = -32700;
inline constexpr int invalid_request = -32600;
inline constexpr int method_not_found = -32601;
inline constexpr int invalid_params = -32602;
inline constexpr int internal_error = -32603;

inline nlohmann::json error(nlohmann::json id, int code, std::string_view message) {
  return {{"jsonrpc", "2.0"}, {"id", std::move(id)}, {"error", {{"code", code}, {"message", to_valid_utf8(message)}}}};
}

inline nlohmann::json result(nlohmann::json id, nlohmann::json body) {
  return {{"jsonrpc", "2.0"}, {"id", std::move(id)}, {"result", std::move(body)}};
}

inline nlohmann::json notification(std::string_view method, nlohmann::json params) {
  return {{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}};
}

/// The line written when even an error response could not be built.
inline constexpr std::string_view fallback_line =
    R"({"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error: a response could not be built"}})";

/// Logging levels (RFC 5424 severities), least severe first.
inline constexpr std::array<std::string_view, 8> log_levels{"debug",    "info",  "notice", "warning",
                                                            "error",    "critical", "alert", "emergency"};

inline std::optional<std::size_t> log_level(const nlohmann::json& name) {
  if (!name.is_string()) return std::nullopt;
  for (std::size_t i = 0; i < log_levels.size(); ++i)
    if (log_levels[i] == name.get_ref<const std::string&>()) return i;
  return std::nullopt;
}

/// The level of a background-completion notice.
inline constexpr std::size_t notice_level = 2;

/// MCP ids are strings or integers (of any size: one beyond 64 bits is an
/// exact number, server/rpc_id.hpp); JSON-RPC's null and MCP-forbidden types
/// are still echoed, exactly, in the error that refuses them.
inline bool valid_id(const nlohmann::json& id) {
  return id.is_string() || id.is_number_integer() || is_exact_integer(id);
}

/// Tool annotations (2025-03-26 and later): hints a client may show or use
/// to decide what to confirm. `bash_output` only reads; `bash` runs anything
/// and `bash_kill` ends a task, so neither is read-only.
inline nlohmann::json annotations(std::string_view tool) {
  if (tool == bash_output_tool_name)
    return {{"title", "Read a background task's output"}, {"readOnlyHint", true}, {"openWorldHint", false}};
  if (tool == bash_kill_tool_name)
    return {{"title", "Kill a background task"},
            {"readOnlyHint", false},
            {"destructiveHint", true},
            {"idempotentHint", true},
            {"openWorldHint", false}};
  if (tool == bash_input_tool_name)
    return {{"title", "Answer a task waiting for input"},
            {"readOnlyHint", false},
            {"destructiveHint", true},
            {"idempotentHint", false},
            {"openWorldHint", false}};
  return {{"title", "Run a shell command"},
          {"readOnlyHint", false},
          {"destructiveHint", true},
          {"idempotentHint", false},
          {"openWorldHint", true}};
}

/// The elicitation form for one escalation: a single boolean. `accept` with
/// `approve: true` is the only answer that runs the command.
inline nlohmann::json approval_form(const approval_request& request) {
  nlohmann::json form = {{"type", "object"},
          {"properties",
           {{"approve",
             {{"type", "boolean"},
              {"title", request.requested_domains.empty()
                            ? fmt::format("Run this one command under {} mode", request.requested_mode)
                            : fmt::format("Run this one command {}", requested_widening(request))},
              {"description", request.requested_domains.empty()
                                  ? "Yes runs this single command with the wider file access; later commands "
                                    "are sandboxed as before."
                                  : "Yes runs this single command with the access asked for; later commands "
                                    "are sandboxed as before."},
              {"default", false}}}}},
          {"required", {"approve"}}};
  // A network escalation may also be granted for the rest of the session.
  if (!request.requested_domains.empty())
    form["properties"]["remember"] = {
        {"type", "boolean"},
        {"title", "Also allow these names for the rest of this session"},
        {"description", "Recorded in the session's log; later commands of this session may reach them without "
                        "asking."},
        {"default", false}};
  return form;
}

/// The four approval outcomes from an `elicitation/create` answer (the
/// ElicitResult of 2025-06-18 and 2025-11-25): accept with `approve: true`
/// is allowed-once (allowed-for-session with `remember: true` too, which
/// only a network escalation's form offers), accept without it and decline are rejected, cancel is
/// cancelled; an error or an answer of another shape is unavailable.
inline approval_outcome approval_from(const nlohmann::json& message) {
  const auto result = message.find("result");
  if (result == message.end() || !result->is_object()) return approval_outcome::unavailable;
  const auto action = result->find("action");
  if (action == result->end() || !action->is_string()) return approval_outcome::unavailable;
  const auto& name = action->get_ref<const std::string&>();
  if (name == "accept") {
    const auto content = result->find("content");
    if (content != result->end() && content->is_object()) {
      const auto approve = content->find("approve");
      if (approve != content->end() && approve->is_boolean() && approve->get<bool>()) {
        const auto remember = content->find("remember");
        const bool for_session = remember != content->end() && remember->is_boolean() && remember->get<bool>();
        return for_session ? approval_outcome::allowed_for_session : approval_outcome::allowed_once;
      }
    }
    return approval_outcome::rejected;
  }
  if (name == "decline") return approval_outcome::rejected;
  if (name == "cancel") return approval_outcome::cancelled;
  return approval_outcome::unavailable;
}

/// The result of `initialize` under the negotiated `version`.
inline nlohmann::json initialize_result(std::string_view version) {
  nlohmann::json capabilities = {{"tools", {{"listChanged", false}}}, {"logging", nlohmann::json::object()}};
  // 2025-11-25's tasks (server/mcp_tasks.hpp): tools/call may be a task, and
  // the session's tasks can be listed and cancelled.
  if (at_least(version, "2025-11-25"))
    capabilities["tasks"] = {{"list", nlohmann::json::object()},
                             {"cancel", nlohmann::json::object()},
                             {"requests", {{"tools", {{"call", nlohmann::json::object()}}}}}};
  return {{"protocolVersion", version},
          {"capabilities", std::move(capabilities)},
          {"serverInfo", {{"name", "bashexec"}, {"version", std::string(bashexec::version)}}},
          {"instructions",
           "Shell tools: bash runs a command (foreground, or run_in_background), bash_output reads a background "
           "task, bash_kill stops one. Result texts end with markers such as [exit code: N]."}};
}

/// A background-completion notice as a log message at level notice.
inline nlohmann::json notice_message(std::string_view notice) {
  return notification("notifications/message",
                      {{"level", log_levels[notice_level]}, {"logger", "bashexec"}, {"data", to_valid_utf8(notice)}});
}

/// The `elicitation/create` request `id` that asks about one escalation,
/// its message the request's `approval_text` (the whole command, hidden
/// characters escaped); empty when that text is too long to show.
inline std::optional<nlohmann::json> elicitation_request(const nlohmann::json& id, const approval_request& request,
                                                         std::string_view version) {
  auto message = approval_text(request);
  if (!message) return std::nullopt;
  nlohmann::json params = {{"message", std::move(*message)}, {"requestedSchema", approval_form(request)}};
  if (at_least(version, "2025-11-25")) params["mode"] = "form";
  return nlohmann::json{
      {"jsonrpc", "2.0"}, {"id", id}, {"method", "elicitation/create"}, {"params", std::move(params)}};
}

/// The error answering a line that failed the bounded parse: a parse error
/// (null id) for unreadable text, an invalid request otherwise.
inline nlohmann::json refusal(parsed_line parsed) {
  const bool unreadable =
      parsed.why == parsed_line::failure::invalid_utf8 || parsed.why == parsed_line::failure::malformed;
  return error(unreadable ? nlohmann::json(nullptr) : std::move(parsed.id),
               unreadable ? parse_error : invalid_request, parsed.error);
}

/// The error answering a batch under a version that does not allow them.
inline nlohmann::json batch_refused(std::string_view version) {
  return error(nullptr, invalid_request,
               fmt::format("JSON-RPC batches are not accepted under protocol version {} (of the versions this "
                           "server speaks only 2025-03-26 allows them)",
                           version));
}

/// The replies to one JSON-RPC batch, written as one array once the last
/// request of the batch has answered (or been cancelled). A batch of
/// notifications only is answered with nothing.
class batch_replies {
 public:
  explicit batch_replies(line_writer& out) : out_(out) {}

  /// One more reply to wait for.
  void expect() {
    std::lock_guard lock(mutex_);
    ++open_;
  }

  /// A reply (or, with `nullopt`, a request that will not answer).
  void add(std::optional<nlohmann::json> reply) noexcept {
    nlohmann::json done;
    try {
      std::lock_guard lock(mutex_);
      if (reply) replies_.push_back(std::move(*reply));
      if (--open_ > 0 || replies_.empty()) return;
      done = std::move(replies_);
    } catch (...) {
      done = nullptr;  // the writer's fallback line
    }
    out_.emit(done);
  }

 private:
  line_writer& out_;
  std::mutex mutex_;
  nlohmann::json replies_ = nlohmann::json::array();
  std::size_t open_ = 1;  // the dispatch of the batch itself; `add(nullopt)` after it
};

/// A JSON-RPC message sorted by what the server does with it.
struct incoming {
  enum class kind {
    /// Answered with `reply` at once (not an object, no "jsonrpc": "2.0", a
    /// bad method, id or params).
    invalid,
    /// A client's response to one of our requests (an elicitation).
    answer,
    /// No id: never answered.
    notification,
    /// Has a valid id and object params: dispatched by `method`.
    request,
  };
  kind what = kind::invalid;
  nlohmann::json id;
  std::string method;
  nlohmann::json params;
  nlohmann::json reply;
};

/// Sorts one message of a line or a batch (JSON-RPC 2.0, MCP's id rules).
inline incoming sort_message(const nlohmann::json& message) {
  incoming out;
  if (!message.is_object()) {
    out.reply = error(nullptr, invalid_request, "a JSON-RPC message must be an object");
    return out;
  }
  const auto id_field = message.find("id");
  const bool has_id = id_field != message.end();
  out.id = has_id ? *id_field : nlohmann::json(nullptr);
  const auto version = message.find("jsonrpc");
  if (version == message.end() || *version != "2.0") {
    out.reply = error(out.id, invalid_request, "\"jsonrpc\" must be \"2.0\"");
    return out;
  }
  const auto method = message.find("method");
  if (method == message.end()) {
    if (has_id && (message.contains("result") || message.contains("error"))) {
      out.what = incoming::kind::answer;
      return out;
    }
    out.reply = error(out.id, invalid_request, "a request needs a string \"method\"");
    return out;
  }
  if (!method->is_string()) {
    out.reply = error(out.id, invalid_request, "\"method\" must be a string");
    return out;
  }
  out.method = method->get<std::string>();
  const auto params_field = message.find("params");
  out.params = params_field != message.end() ? *params_field : nlohmann::json::object();
  if (!has_id) {
    out.what = incoming::kind::notification;
    return out;
  }
  if (!valid_id(out.id)) {
    out.reply = error(out.id, invalid_request, "a request id must be a string or an integer");
    return out;
  }
  if (!out.params.is_object()) {
    out.reply = error(out.id, invalid_params, "\"params\" must be an object");
    return out;
  }
  out.what = incoming::kind::request;
  return out;
}

/// Whether an initialize request's client takes form elicitation, under
/// the negotiated `version`: elicitation exists from 2025-06-18; from
/// 2025-11-25 a client may offer only its url mode, and `{}` means form.
inline bool offers_form_elicitation(std::string_view version, const nlohmann::json& params) {
  if (!at_least(version, "2025-06-18")) return false;
  const auto capabilities = params.find("capabilities");
  if (capabilities == params.end() || !capabilities->is_object()) return false;
  const auto elicitation = capabilities->find("elicitation");
  if (elicitation == capabilities->end() || !elicitation->is_object()) return false;
  return !at_least(version, "2025-11-25") || elicitation->empty() || elicitation->contains("form");
}

/// The tools/list entries for the `bash_tools` schemas under `version`.
inline nlohmann::json tool_list(const nlohmann::json& schemas, std::string_view version) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& schema : schemas) {
    nlohmann::json tool = {
        {"name", schema["name"]}, {"description", schema["description"]}, {"inputSchema", schema["input_schema"]}};
    if (at_least(version, "2025-03-26")) tool["annotations"] = annotations(schema["name"].get<std::string>());
    // Structured results came with 2025-06-18: from then every tool declares
    // the facts it answers with (tool_facts_schema), which clients validate.
    if (at_least(version, "2025-06-18")) tool["outputSchema"] = tool_facts_schema();
    // Only `bash` runs as a task (bash_output and bash_kill answer at once:
    // their default, "forbidden").
    if (at_least(version, "2025-11-25") && schema["name"] == bash_tool_name)
      tool["execution"] = {{"taskSupport", "optional"}};
    list.push_back(std::move(tool));
  }
  return list;
}

/// The result of a tools/call: the text, `isError`, and from 2025-06-18 the
/// facts as `structuredContent`.
inline nlohmann::json call_result(nlohmann::json id, tool_result result, std::string_view version) {
  nlohmann::json body = {{"content", {{{"type", "text"}, {"text", to_valid_utf8(result.text)}}}},
                         {"isError", result.is_error}};
  if (result.facts && at_least(version, "2025-06-18")) body["structuredContent"] = std::move(*result.facts);
  return mcp::result(std::move(id), std::move(body));
}

/// How long a call has run and how many bytes it printed.
inline nlohmann::json progress_notification(const nlohmann::json& token, double elapsed, std::uint64_t out,
                                            std::uint64_t err) {
  return notification("notifications/progress",
                      {{"progressToken", token},
                       {"progress", std::round(elapsed * 1000) / 1000},
                       {"message", fmt::format("running for {:.1f} s; {} bytes of output so far ({} stdout, {} stderr)",
                                               elapsed, out + err, out, err)}});
}

/// The elicitation questions a server has put and not yet had answered,
/// each by its request id.
class questions {
 public:
  /// A new question's id and the future of its answer.
  std::pair<nlohmann::json, std::future<approval_outcome>> open() {
    std::lock_guard lock(mutex_);
    nlohmann::json id = fmt::format("bashexec-approval-{}", ++last_);
    auto answer = pending_[id_key(id)].get_future();
    return {std::move(id), std::move(answer)};
  }

  /// Answers question `id`; false when no such question is open (an
  /// unknown id is ignored).
  bool settle(const nlohmann::json& id, approval_outcome outcome) noexcept {
    std::lock_guard lock(mutex_);
    const auto it = pending_.find(id_key(id));
    if (it == pending_.end()) return false;
    it->second.set_value(outcome);
    pending_.erase(it);
    return true;
  }

  /// The server is closing: every open question is cancelled.
  void cancel_all() noexcept {
    std::lock_guard lock(mutex_);
    for (auto& [key, promise] : pending_) promise.set_value(approval_outcome::cancelled);
    pending_.clear();
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::promise<approval_outcome>> pending_;
  std::uint64_t last_ = 0;
};

}  // namespace mcp

}  // namespace bashexec::server

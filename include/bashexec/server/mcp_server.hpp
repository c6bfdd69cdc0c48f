// `bashexec mcp`: the tools as a Model Context Protocol server over stdio —
// newline-delimited JSON-RPC 2.0 on stdin/stdout, logs on stderr only. This
// header holds the protocol: lifecycle and version negotiation, tools/list,
// tools/call, cancellation, progress, logging notices, elicitation for
// escalations and batches where the negotiated version allows them.
// Everything below the wire is `serve`'s: the bounded line reader and
// request parse (request.hpp), the writer, the worker slots and the shutdown
// (serve.hpp), and `call_runner` over one `bash_tools`. One connection is one
// session (`--session`, default "mcp"): it owns its tasks, and its mode
// override is replayed from `--session-dir`. docs/tool-protocol.md maps each
// message to the behaviour behind it.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <bashexec/run_progress.hpp>
#include <bashexec/tools/bash_tools.hpp>
#include <bashexec/tools/render.hpp>
#include <bashexec/tools/utf8.hpp>
#include <bashexec/version.hpp>

#include "options.hpp"
#include "request.hpp"
#include "serve.hpp"

namespace bashexec::cli {

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

/// MCP ids are strings or integers; JSON-RPC's null and MCP-forbidden types
/// are still echoed in the error that refuses them.
inline bool valid_id(const nlohmann::json& id) { return id.is_string() || id.is_number_integer(); }

/// A map key for an id: its JSON text, so that 1 and "1" differ.
inline std::string id_key(const nlohmann::json& id) {
  return id.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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
  return {{"title", "Run a shell command"},
          {"readOnlyHint", false},
          {"destructiveHint", true},
          {"idempotentHint", false},
          {"openWorldHint", true}};
}

/// The elicitation form for one escalation: a single boolean. `accept` with
/// `approve: true` is the only answer that runs the command.
inline nlohmann::json approval_form(const approval_request& request) {
  return {{"type", "object"},
          {"properties",
           {{"approve",
             {{"type", "boolean"},
              {"title", fmt::format("Run this one command under {} mode", request.requested_mode)},
              {"description", "Yes runs this single command with the wider file access; later commands are "
                              "sandboxed as before."},
              {"default", false}}}}},
          {"required", {"approve"}}};
}

inline std::string approval_message(const approval_request& request) {
  return fmt::format(
      "bashexec asks to run one command under {} mode (the session runs under {} mode).\n"
      "Command: {}\nDescription: {}\nJustification: {}",
      request.requested_mode, request.current_mode, command_summary(request.command, 4000),
      command_summary(request.description, 1000), command_summary(request.justification, 1000));
}

/// The four approval outcomes from an `elicitation/create` answer (the
/// ElicitResult of 2025-06-18 and 2025-11-25): accept with `approve: true`
/// is allowed-once, accept without it and decline are rejected, cancel is
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
      if (approve != content->end() && approve->is_boolean() && approve->get<bool>())
        return approval_outcome::allowed_once;
    }
    return approval_outcome::rejected;
  }
  if (name == "decline") return approval_outcome::rejected;
  if (name == "cancel") return approval_outcome::cancelled;
  return approval_outcome::unavailable;
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

}  // namespace mcp

template <class Executor>
class mcp_server {
 public:
  mcp_server(Executor& executor, const mcp_options& options, std::filesystem::path session_dir,
             std::filesystem::path workdir, int in_fd = STDIN_FILENO, int out_fd = STDOUT_FILENO)
      : in_fd_(in_fd),
        options_(options),
        out_(out_fd, closing_, mcp::fallback_line),
        pool_(options.max_in_flight, closing_),
        logs_(std::move(session_dir)),
        log_(logs_.open(options.session)),
        tools_(executor, [this](const std::optional<owner_token>&, const std::string& notice) { log_notice(notice); }),
        runner_(tools_, options.approve, std::move(workdir),
                [this](const approval_request& request, std::stop_token stop) {
                  return pool_.without_slot([&] { return elicit(request, stop); });
                }) {}

  mcp_server(const mcp_server&) = delete;
  mcp_server& operator=(const mcp_server&) = delete;

  ~mcp_server() { finish(); }

  /// Serves until end of input or `stop()`; then no more lines are read, the
  /// calls in flight are aborted (their responses still written while
  /// stdout takes them), open questions are cancelled, and it returns once
  /// every call has answered. The executor's disposal kills the tasks.
  void serve() {
    std::jthread ticker([this](std::stop_token stop) { tick_progress(stop); });
    line_reader reader(in_fd_, closing_, limits_.max_line_bytes);
    std::string line;
    for (;;) {
      const auto status = reader.next(line);
      if (status == line_reader::status::end || status == line_reader::status::closing) break;
      if (status == line_reader::status::too_long) {
        out_.emit(mcp::error(recover_id(line), mcp::invalid_request,
                             fmt::format("message longer than {} bytes; ignored", limits_.max_line_bytes)));
        continue;
      }
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      if (!handle_line(line)) break;
    }
    ticker.request_stop();
    wake_ticker();
    finish();
  }

  /// Stops reading and aborts the calls in flight; `serve` then returns.
  /// Safe from any thread (the signal thread calls it).
  void stop() noexcept {
    closing_.set();
    pool_.stop();
    cancel_questions();
    wake_ticker();
  }

  bool output_lost() const noexcept { return out_.lost(); }

 private:
  /// One tools/call in flight.
  struct call_state {
    nlohmann::json id;
    std::string key;
    std::stop_source stop;
    std::shared_ptr<mcp::batch_replies> batch;
    std::optional<nlohmann::json> progress_token;
    std::shared_ptr<run_progress> progress;
    std::chrono::steady_clock::time_point started;
    // Under `mutex`: no progress notification follows the response.
    std::mutex mutex;
    bool cancelled = false;
    bool done = false;
    double last_progress = 0;
  };

  // ---- the reader thread ------------------------------------------------

  /// False when the server stops reading (it is closing).
  bool handle_line(std::string_view line) noexcept {
    try {
      const bool batches = negotiated_batches();
      parsed_line parsed = parse_request_line(line, limits_, /*allow_array=*/true);
      if (!parsed.request) {
        const bool unreadable = parsed.why == parsed_line::failure::invalid_utf8 ||
                                parsed.why == parsed_line::failure::malformed;
        out_.emit(mcp::error(unreadable ? nlohmann::json(nullptr) : std::move(parsed.id),
                             unreadable ? mcp::parse_error : mcp::invalid_request, parsed.error));
        return true;
      }
      nlohmann::json& message = *parsed.request;
      if (!message.is_array()) return handle_message(message, nullptr);
      if (!batches) {
        out_.emit(mcp::error(nullptr, mcp::invalid_request,
                             fmt::format("JSON-RPC batches are not accepted under protocol version {} (of the "
                                         "versions this server speaks only 2025-03-26 allows them)",
                                         version_or_none())));
        return true;
      }
      if (message.empty()) {
        out_.emit(mcp::error(nullptr, mcp::invalid_request, "an empty batch"));
        return true;
      }
      auto batch = std::make_shared<mcp::batch_replies>(out_);
      bool reading = true;
      for (auto& element : message)
        if (reading) reading = handle_message(element, batch);
      batch->add(std::nullopt);
      return reading;
    } catch (const std::exception& e) {
      out_.emit(mcp::error(nullptr, mcp::internal_error, fmt::format("internal error: {}", e.what())));
      return true;
    } catch (...) {
      out_.emit(nullptr);
      return true;
    }
  }

  void reply(const std::shared_ptr<mcp::batch_replies>& batch, nlohmann::json message) {
    if (batch) {
      batch->expect();
      batch->add(std::move(message));
    } else {
      out_.emit(message);
    }
  }

  bool handle_message(const nlohmann::json& message, const std::shared_ptr<mcp::batch_replies>& batch) {
    if (!message.is_object()) {
      reply(batch, mcp::error(nullptr, mcp::invalid_request, "a JSON-RPC message must be an object"));
      return true;
    }
    const auto id_field = message.find("id");
    const bool has_id = id_field != message.end();
    nlohmann::json id = has_id ? *id_field : nlohmann::json(nullptr);
    const auto version = message.find("jsonrpc");
    if (version == message.end() || *version != "2.0") {
      reply(batch, mcp::error(std::move(id), mcp::invalid_request, "\"jsonrpc\" must be \"2.0\""));
      return true;
    }
    const auto method = message.find("method");
    if (method == message.end()) {
      if (has_id && (message.contains("result") || message.contains("error"))) {
        answer_question(id, message);
        return true;
      }
      reply(batch, mcp::error(std::move(id), mcp::invalid_request, "a request needs a string \"method\""));
      return true;
    }
    if (!method->is_string()) {
      reply(batch, mcp::error(std::move(id), mcp::invalid_request, "\"method\" must be a string"));
      return true;
    }
    const std::string& name = method->get_ref<const std::string&>();
    const auto params_field = message.find("params");
    const nlohmann::json no_params = nlohmann::json::object();
    const nlohmann::json& params = params_field != message.end() ? *params_field : no_params;
    if (!has_id) {
      handle_notification(name, params);  // never answered
      return true;
    }
    if (!mcp::valid_id(id)) {
      reply(batch, mcp::error(std::move(id), mcp::invalid_request, "a request id must be a string or an integer"));
      return true;
    }
    if (!params.is_object()) {
      reply(batch, mcp::error(std::move(id), mcp::invalid_params, "\"params\" must be an object"));
      return true;
    }
    return handle_request(std::move(id), name, params, batch);
  }

  bool handle_request(nlohmann::json id, const std::string& name, const nlohmann::json& params,
                      const std::shared_ptr<mcp::batch_replies>& batch) {
    if (name == "ping") {
      reply(batch, mcp::result(std::move(id), nlohmann::json::object()));
      return true;
    }
    if (name == "initialize") {
      reply(batch, batch ? mcp::error(std::move(id), mcp::invalid_request, "initialize must not be part of a batch")
                         : initialize(std::move(id), params));
      return true;
    }
    if (!initialized()) {
      // The lifecycle puts initialize first; only ping may precede it.
      reply(batch, mcp::error(std::move(id), mcp::invalid_request,
                              fmt::format("the session is not initialized: send initialize before {}",
                                          command_summary(name, 100))));
      return true;
    }
    if (name == "tools/list") {
      reply(batch, mcp::result(std::move(id), {{"tools", tool_list()}}));
      return true;
    }
    if (name == "tools/call") return call_tool(std::move(id), params, batch);
    if (name == "logging/setLevel") {
      const auto level = params.find("level");
      const auto index = level != params.end() ? mcp::log_level(*level) : std::nullopt;
      if (!index) {
        reply(batch, mcp::error(std::move(id), mcp::invalid_params,
                                "\"level\" must be one of debug, info, notice, warning, error, critical, alert, "
                                "emergency"));
        return true;
      }
      min_level_.store(*index);
      reply(batch, mcp::result(std::move(id), nlohmann::json::object()));
      return true;
    }
    reply(batch, mcp::error(std::move(id), mcp::method_not_found,
                            fmt::format("method not found: {}", command_summary(name, 100))));
    return true;
  }

  void handle_notification(const std::string& name, const nlohmann::json& params) {
    if (name == "notifications/initialized") {
      std::lock_guard lock(mutex_);
      client_ready_ = true;
      return;
    }
    if (name == "notifications/cancelled" && params.is_object()) {
      const auto request_id = params.find("requestId");
      if (request_id == params.end()) return;  // malformed: ignored, as the specification says
      std::shared_ptr<call_state> call;
      {
        std::lock_guard lock(mutex_);
        if (auto it = calls_.find(mcp::id_key(*request_id)); it != calls_.end()) call = it->second;
      }
      if (!call) return;  // unknown or already answered: ignored
      {
        std::lock_guard lock(call->mutex);
        if (call->done) return;
        call->cancelled = true;
      }
      call->stop.request_stop();  // the foreground group is killed; the answer is dropped
    }
    // Any other notification needs nothing from us.
  }

  nlohmann::json initialize(nlohmann::json id, const nlohmann::json& params) {
    const auto requested = params.find("protocolVersion");
    if (requested == params.end() || !requested->is_string())
      return mcp::error(std::move(id), mcp::invalid_params, "initialize needs a string \"protocolVersion\"");
    std::lock_guard lock(mutex_);
    if (version_)
      return mcp::error(std::move(id), mcp::invalid_request, "initialize was already received on this connection");
    version_ = mcp::negotiate(requested->get_ref<const std::string&>());
    // Elicitation exists from 2025-06-18; from 2025-11-25 a client may offer
    // only its url mode, and `{}` means form.
    if (mcp::at_least(*version_, "2025-06-18")) {
      const auto capabilities = params.find("capabilities");
      if (capabilities != params.end() && capabilities->is_object()) {
        const auto elicitation = capabilities->find("elicitation");
        if (elicitation != capabilities->end() && elicitation->is_object())
          elicitation_ = !mcp::at_least(*version_, "2025-11-25") || elicitation->empty() ||
                         elicitation->contains("form");
      }
    }
    batches_.store(*version_ == "2025-03-26");
    return mcp::result(
        std::move(id),
        {{"protocolVersion", *version_},
         {"capabilities", {{"tools", {{"listChanged", false}}}, {"logging", nlohmann::json::object()}}},
         {"serverInfo", {{"name", "bashexec"}, {"version", std::string(bashexec::version)}}},
         {"instructions",
          "Shell tools: bash runs a command (foreground, or run_in_background), bash_output reads a background "
          "task, bash_kill stops one. Result texts end with markers such as [exit code: N]."}});
  }

  bool initialized() {
    std::lock_guard lock(mutex_);
    return version_.has_value();
  }

  bool negotiated_batches() const noexcept { return batches_.load(); }

  std::string version_or_none() {
    std::lock_guard lock(mutex_);
    return version_ ? *version_ : std::string("(none yet: the session is not initialized)");
  }

  nlohmann::json tool_list() {
    const std::string version = version_or_none();
    nlohmann::json list = nlohmann::json::array();
    for (const auto& schema : tools_.schemas()) {
      nlohmann::json tool = {{"name", schema["name"]},
                             {"description", schema["description"]},
                             {"inputSchema", schema["input_schema"]}};
      if (mcp::at_least(version, "2025-03-26"))
        tool["annotations"] = mcp::annotations(schema["name"].template get<std::string>());
      list.push_back(std::move(tool));
    }
    return list;
  }

  bool call_tool(nlohmann::json id, const nlohmann::json& params, const std::shared_ptr<mcp::batch_replies>& batch) {
    const auto name = params.find("name");
    if (name == params.end() || !name->is_string()) {
      reply(batch, mcp::error(std::move(id), mcp::invalid_params, "tools/call needs a string \"name\""));
      return true;
    }
    const std::string& tool = name->get_ref<const std::string&>();
    if (std::find(tool_names.begin(), tool_names.end(), tool) == tool_names.end()) {
      reply(batch,
            mcp::error(std::move(id), mcp::invalid_params,
                       fmt::format("unknown tool {} (bash, bash_output, bash_kill)", command_summary(tool, 100))));
      return true;
    }
    auto call = std::make_shared<call_state>();
    call->id = id;
    call->key = mcp::id_key(id);
    call->batch = batch;
    call->started = std::chrono::steady_clock::now();
    if (const auto meta = params.find("_meta"); meta != params.end() && meta->is_object())
      if (const auto token = meta->find("progressToken");
          token != meta->end() && (token->is_string() || token->is_number_integer())) {
        call->progress_token = *token;
        call->progress = std::make_shared<run_progress>();
      }
    tool_call work{id, tool, nlohmann::json::object(), options_.session, log_, call->progress};
    if (const auto args = params.find("arguments"); args != params.end()) work.args = *args;
    {
      std::lock_guard lock(mutex_);
      if (!calls_.emplace(call->key, call).second) {
        reply(batch, mcp::error(std::move(id), mcp::invalid_request, "a request with this id is still in flight"));
        return true;
      }
    }
    if (batch) batch->expect();
    if (!pool_.acquire()) {
      finish_call(call, tool_result{"the server is shutting down; the call did not run", true});
      return false;
    }
    pool_.launch(
        [this, call, work = std::move(work)] {
          tool_result result;
          {
            // A closing server stops every call.
            std::stop_callback link(pool_.stop_token(), [call] { call->stop.request_stop(); });
            result = runner_.call(work, call->stop.get_token());
          }
          finish_call(call, std::move(result));
        },
        [this, call](std::string_view reason) { finish_call(call, tool_result{std::string(reason), true}); });
    return true;
  }

  // ---- the worker threads -----------------------------------------------

  /// The response to a tools/call, unless it was cancelled (then nothing
  /// follows, as the cancellation utility says). Never throws.
  void finish_call(const std::shared_ptr<call_state>& call, tool_result result) noexcept {
    bool cancelled = false;
    {
      std::lock_guard lock(call->mutex);
      call->done = true;
      cancelled = call->cancelled;
    }
    {
      std::lock_guard lock(mutex_);
      calls_.erase(call->key);
    }
    std::optional<nlohmann::json> response;
    if (!cancelled) {
      try {
        nlohmann::json body = {{"content", {{{"type", "text"}, {"text", to_valid_utf8(result.text)}}}},
                               {"isError", result.is_error}};
        if (result.facts && mcp::at_least(version_or_none(), "2025-06-18"))
          body["structuredContent"] = std::move(*result.facts);
        response = mcp::result(call->id, std::move(body));
      } catch (...) {
        response = nlohmann::json(nullptr);  // the writer's fallback line
      }
    }
    if (call->batch)
      call->batch->add(std::move(response));
    else if (response)
      out_.emit(*response);
  }

  /// Asks the person through `elicitation/create` (the client declared the
  /// capability) and waits for the answer, the call's cancellation or the
  /// server's end. Runs without the call's slot.
  approval_outcome elicit(const approval_request& request, const std::stop_token& stop) {
    std::future<approval_outcome> answer;
    nlohmann::json id;
    std::string version;
    {
      std::lock_guard lock(mutex_);
      // No capability, or (against the lifecycle) no initialized notification yet.
      if (!elicitation_ || !client_ready_) return approval_outcome::unavailable;
      if (closing_.is_set()) return approval_outcome::cancelled;
      version = version_.value_or("");
      id = fmt::format("bashexec-approval-{}", ++last_question_);
      answer = questions_[mcp::id_key(id)].get_future();
    }
    nlohmann::json params = {{"message", mcp::approval_message(request)},
                             {"requestedSchema", mcp::approval_form(request)}};
    if (mcp::at_least(version, "2025-11-25")) params["mode"] = "form";
    out_.emit({{"jsonrpc", "2.0"}, {"id", id}, {"method", "elicitation/create"}, {"params", std::move(params)}});
    // A cancelled call withdraws its question (and tells the client so).
    std::stop_callback withdraw(stop, [this, id] {
      if (settle_question(id, approval_outcome::cancelled))
        out_.emit(mcp::notification("notifications/cancelled",
                                    {{"requestId", id}, {"reason", "the tool call was cancelled"}}));
    });
    return answer.get();
  }

  // ---- either thread ----------------------------------------------------

  void answer_question(const nlohmann::json& id, const nlohmann::json& message) {
    settle_question(id, mcp::approval_from(message));  // an unknown id is ignored
  }

  bool settle_question(const nlohmann::json& id, approval_outcome outcome) noexcept {
    std::lock_guard lock(mutex_);
    const auto it = questions_.find(mcp::id_key(id));
    if (it == questions_.end()) return false;
    it->second.set_value(outcome);
    questions_.erase(it);
    return true;
  }

  void cancel_questions() noexcept {
    std::lock_guard lock(mutex_);
    for (auto& [key, promise] : questions_) promise.set_value(approval_outcome::cancelled);
    questions_.clear();
  }

  /// A background task settled: the same notice `serve` sends, as a log
  /// message at level notice, when the client's level lets it through.
  void log_notice(const std::string& notice) {
    if (!initialized() || min_level_.load() > mcp::notice_level) return;
    out_.emit(mcp::notification("notifications/message",
                                {{"level", mcp::log_levels[mcp::notice_level]},
                                 {"logger", "bashexec"},
                                 {"data", to_valid_utf8(notice)}}));
  }

  /// Every `progress_interval`, each call that carries a progress token is
  /// told how long it has run and how many bytes it printed.
  void tick_progress(std::stop_token stop) {
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        progress_changed_.wait_for(lock, options_.progress_interval,
                                   [&] { return stop.stop_requested() || closing_.is_set(); });
        if (stop.stop_requested() || closing_.is_set()) return;
      }
      std::vector<std::shared_ptr<call_state>> tracked;
      {
        std::lock_guard lock(mutex_);
        for (auto& [key, call] : calls_)
          if (call->progress_token) tracked.push_back(call);
      }
      const auto now = std::chrono::steady_clock::now();
      for (auto& call : tracked) {
        std::lock_guard lock(call->mutex);
        if (call->done || call->cancelled) continue;
        const double elapsed = std::chrono::duration<double>(now - call->started).count();
        if (elapsed <= call->last_progress) continue;  // progress must increase
        call->last_progress = elapsed;
        const auto out = call->progress->stdout_bytes.load(std::memory_order_relaxed);
        const auto err = call->progress->stderr_bytes.load(std::memory_order_relaxed);
        out_.emit(mcp::notification(
            "notifications/progress",
            {{"progressToken", *call->progress_token},
             {"progress", std::round(elapsed * 1000) / 1000},
             {"message", fmt::format("running for {:.1f} s; {} bytes of output so far ({} stdout, {} stderr)",
                                     elapsed, out + err, out, err)}}));
      }
    }
  }

  void wake_ticker() noexcept {
    try {
      std::lock_guard lock(mutex_);  // the ticker is waiting or has not checked yet
    } catch (...) {
    }
    progress_changed_.notify_all();
  }

  void finish() {
    stop();
    pool_.join();
  }

  int in_fd_;
  mcp_options options_;
  request_limits limits_{};
  closing_flag closing_;
  line_writer out_;
  call_pool pool_;
  session_logs logs_;
  std::shared_ptr<session_log> log_;

  std::mutex mutex_;
  std::condition_variable progress_changed_;
  std::optional<std::string> version_;
  bool elicitation_ = false;
  bool client_ready_ = false;
  std::atomic<bool> batches_{false};
  std::atomic<std::size_t> min_level_{0};
  std::map<std::string, std::shared_ptr<call_state>> calls_;
  std::map<std::string, std::promise<approval_outcome>> questions_;
  std::uint64_t last_question_ = 0;

  // Unsubscribes from the executor before the members above go away.
  bash_tools<Executor> tools_;
  call_runner<Executor> runner_;
};

}  // namespace bashexec::cli

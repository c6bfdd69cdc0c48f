// `bashexec serve`'s request handling, one line in, one response out: the
// bounded parse of a request line (nesting depth, value count, session id
// length; serve.hpp bounds the line length), the id recovered whenever it can
// be read, the ops, and tool calls through `bash_tools`. No threads and no
// I/O of its own: serve.hpp adds concurrency and the streams, and
// fuzz/fuzz_serve_request.cpp drives `handle_request_line` with a fake
// executor.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <bashexec/run_progress.hpp>
#include <bashexec/session/session_log.hpp>
#include <bashexec/tools/bash_tools.hpp>
#include <bashexec/tools/render.hpp>
#include <bashexec/tools/utf8.hpp>

#include "options.hpp"

namespace bashexec::cli {

/// The dimensions of one request line (docs/tool-protocol.md). nlohmann-json
/// parses iteratively but copies and dumps recursively, so an unbounded
/// nesting depth is a stack overflow one copy away.
struct request_limits {
  /// Longest request line kept; a longer one is answered with an error and its
  /// bytes are dropped as they arrive (serve.hpp's reader applies it).
  std::size_t max_line_bytes = std::size_t{16} << 20;
  /// Deepest nesting of arrays and objects, the request object itself counting
  /// as one level. Tool arguments are flat; 64 leaves room for any harness's
  /// structured `id`.
  std::size_t max_depth = 64;
  /// Values in the whole line (every scalar, array, object and key), so that
  /// a line of a million tiny values cannot become a million-node tree.
  std::size_t max_values = 10000;
  /// A session id names a log file (percent-encoded, up to 3 bytes per byte,
  /// under the 255-byte file-name limit).
  std::size_t max_session_bytes = 80;
};

/// The response line to a request: `{"id": ..., "text": ..., "is_error": ...}`.
inline nlohmann::json response(nlohmann::json id, std::string_view text, bool is_error) {
  return {{"id", std::move(id)}, {"text", to_valid_utf8(text)}, {"is_error", is_error}};
}

namespace detail {

/// A SAX pass over a request line that builds nothing: it measures depth and
/// value count and picks up the top-level `id` when it is a scalar, so that an
/// error about the rest of the line can still echo it. The parser it is fed
/// to is iterative, so any depth is safe to measure.
class request_scan {
 public:
  using json = nlohmann::json;

  bool null() { return scalar(nullptr); }
  bool boolean(bool value) { return scalar(value); }
  bool number_integer(json::number_integer_t value) { return scalar(value); }
  bool number_unsigned(json::number_unsigned_t value) { return scalar(value); }
  bool number_float(json::number_float_t value, const std::string&) { return scalar(value); }
  bool string(std::string& value) {
    if (id_next()) {
      id = json(std::move(value));
      id_structured = false;
    }
    return true;
  }
  bool binary(json::binary_t&) { return scalar(nullptr); }
  bool start_object(std::size_t) { return open(true); }
  bool start_array(std::size_t) { return open(false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& name) {
    ++values;
    expect_id_ = depth_ == 1 && top_is_object && name == "id";
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    error = e.what();
    error_position = position;
    return false;
  }

  std::size_t max_depth = 0;
  std::size_t values = 0;
  bool top_is_object = false;
  bool top_seen = false;
  /// The last top-level `id` seen, when it was a scalar.
  std::optional<json> id;
  /// The top-level `id` is an array or object (only the full parse reads it).
  bool id_structured = false;
  std::optional<std::string> error;
  std::size_t error_position = 0;

 private:
  /// True (once) when the value now arriving is the top-level `id`.
  bool id_next() {
    ++values;
    if (!top_seen) top_seen = true;
    return std::exchange(expect_id_, false);
  }

  template <class T>
  bool scalar(T&& value) {
    if (id_next()) {
      id = json(std::forward<T>(value));
      id_structured = false;
    }
    return true;
  }

  bool open(bool object) {
    if (!top_seen) top_is_object = object;
    if (id_next()) {
      id.reset();
      id_structured = true;
    }
    max_depth = std::max(max_depth, ++depth_);
    return true;
  }

  bool close() {
    --depth_;
    expect_id_ = false;
    return true;
  }

  std::size_t depth_ = 0;
  bool expect_id_ = false;
};

/// `text` cut to about `max_bytes` on a character boundary, for quoting a
/// parser's message (which may repeat part of the line) in a response.
inline std::string short_text(std::string_view text, std::size_t max_bytes = 200) {
  return command_summary(text, max_bytes);
}

}  // namespace detail

/// A request line after the bounded parse: the request object, or the error
/// to answer; `id` is whatever could be read of the request's id (null when
/// nothing could).
struct parsed_line {
  /// Why a line was refused, for a protocol that answers each with its own
  /// code (the MCP server: parse error or invalid request).
  enum class failure { none, invalid_utf8, malformed, not_object, too_deep, too_many_values };

  nlohmann::json id;
  std::optional<nlohmann::json> request;
  std::string error;
  failure why = failure::none;
};

/// The top-level scalar `id` of a (possibly cut, invalid or oversized) line,
/// or null.
inline nlohmann::json recover_id(std::string_view line) {
  try {
    detail::request_scan scan;
    const std::string valid = is_valid_utf8(line) ? std::string(line) : to_valid_utf8(line);
    nlohmann::json::sax_parse(valid, &scan);
    return scan.id.value_or(nullptr);
  } catch (...) {
    return nullptr;
  }
}

/// Parses one request line within `limits` (the line length excepted): one
/// JSON object, or with `allow_array` an object or an array (a JSON-RPC
/// batch, whose elements the caller checks).
inline parsed_line parse_request_line(std::string_view line, const request_limits& limits = {},
                                      bool allow_array = false) {
  parsed_line out;
  using failure = parsed_line::failure;
  if (!is_valid_utf8(line)) {
    std::size_t at = 0;
    while (at < line.size()) {
      std::size_t invalid = 0;
      const std::size_t n = bashexec::detail::utf8_char_length(line, at, &invalid);
      if (n == 0) break;
      at += n;
    }
    out.id = recover_id(line);
    out.why = failure::invalid_utf8;
    out.error = fmt::format(
        "request line is not valid UTF-8 (first invalid byte at offset {}); JSON text must be UTF-8. "
        "Nothing was run.",
        at);
    return out;
  }
  detail::request_scan scan;
  nlohmann::json::sax_parse(line, &scan);
  if (scan.id) out.id = *scan.id;
  if (scan.error) {
    out.why = failure::malformed;
    out.error = fmt::format("malformed request line: expected one JSON object per line ({})",
                            detail::short_text(*scan.error));
    return out;
  }
  if (!scan.top_is_object && !(allow_array && scan.max_depth > 0)) {
    out.why = failure::not_object;
    out.error = "malformed request line: expected one JSON object per line";
    return out;
  }
  if (scan.max_depth > limits.max_depth) {
    out.why = failure::too_deep;
    out.error = fmt::format(
        "request nests arrays and objects {} levels deep; at most {} are allowed. Nothing was run.", scan.max_depth,
        limits.max_depth);
    return out;
  }
  if (scan.values > limits.max_values) {
    out.why = failure::too_many_values;
    out.error = fmt::format("request holds {} JSON values; at most {} are allowed. Nothing was run.", scan.values,
                            limits.max_values);
    return out;
  }
  // Within the limits: the full parse builds a bounded tree.
  auto request = nlohmann::json::parse(line, nullptr, false);
  if (request.is_discarded() || !(request.is_object() || (allow_array && request.is_array()))) {
    out.why = failure::not_object;
    out.error = "malformed request line: expected one JSON object per line";
    return out;
  }
  if (request.is_object())
    if (auto id = request.find("id"); id != request.end()) out.id = *id;
  out.request = std::move(request);
  return out;
}

/// A session on the wire: its id as a string ("" included), or null for a
/// caller without one (contract 11: the empty id is an owner like any other).
inline nlohmann::json session_json(const std::optional<owner_token>& session) {
  return session ? nlohmann::json(to_valid_utf8(session->value())) : nlohmann::json(nullptr);
}

/// Escalation questions under `--approve ask`: each gets a number, a line
/// through `emit`, and waits for the matching `{"op": "approve"}` line.
class approval_desk {
 public:
  /// At most `max_pending` questions wait at once; one more is `unavailable`
  /// at once (each waiting question holds a thread).
  explicit approval_desk(std::function<void(const nlohmann::json&)> emit, std::size_t max_pending = 32)
      : emit_(std::move(emit)), max_pending_(max_pending) {}

  approval_outcome ask(const approval_request& request) {
    std::future<approval_outcome> answer;
    std::uint64_t number = 0;
    {
      std::lock_guard lock(mutex_);
      if (closed_) return approval_outcome::cancelled;
      if (pending_.size() >= max_pending_) return approval_outcome::unavailable;
      number = ++last_;
      answer = pending_[number].get_future();
    }
    emit_({{"approval",
            {{"id", number},
             {"session", session_json(request.session)},
             {"command", to_valid_utf8(request.command)},
             {"description", to_valid_utf8(request.description)},
             {"current_mode", std::string(to_string(request.current_mode))},
             {"requested_mode", std::string(to_string(request.requested_mode))},
             {"justification", to_valid_utf8(request.justification)}}}});
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

/// The sessions' logs (their sandbox-mode overrides), opened and replayed on
/// first use. At most `max_open` stay open (each holds a descriptor); the
/// least recently used is closed first and replayed again when needed, so a
/// server that sees ever new session ids keeps its descriptors bounded. With
/// an empty directory the logs live in memory only (the fuzz target), and a
/// closed one forgets its override.
class session_logs {
 public:
  explicit session_logs(std::filesystem::path directory, std::size_t max_open = 256)
      : directory_(std::move(directory)), max_open_(std::max<std::size_t>(max_open, 1)) {}

  /// The log of `session` (never empty); throws what opening it throws.
  std::shared_ptr<session_log> open(const std::string& session) {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(session); it != index_.end()) {
      recent_.splice(recent_.begin(), recent_, it->second);
      return it->second->second;
    }
    auto log = directory_.empty() ? std::make_shared<session_log>()
                                  : std::make_shared<session_log>(session_log_path(directory_, session));
    // Evicting a log another call still uses is safe: that call holds its own
    // reference and only reads it; the next `set_mode` writes through a fresh one.
    if (recent_.size() >= max_open_) {
      index_.erase(recent_.back().first);
      recent_.pop_back();
    }
    recent_.emplace_front(session, log);
    index_.emplace(session, recent_.begin());
    return log;
  }

 private:
  using entry = std::pair<std::string, std::shared_ptr<session_log>>;
  std::filesystem::path directory_;
  std::size_t max_open_;
  std::mutex mutex_;
  std::list<entry> recent_;
  std::map<std::string, std::list<entry>::iterator> index_;
};

/// A tool call read from a request line, to run now or on a worker thread.
struct tool_call {
  nlohmann::json id;
  std::string tool;
  nlohmann::json args;
  std::optional<std::string> session;  // empty: no session, ownerless tasks
  std::shared_ptr<session_log> log;
  /// Set by a caller that reports progress (the MCP server).
  std::shared_ptr<run_progress> progress{};
};

/// Puts an escalation question to whoever answers them; `stop` is the
/// call's own stop token (a cancelled call withdraws its question).
using asker = std::function<approval_outcome(const approval_request&, std::stop_token)>;

/// Runs tool calls through one `bash_tools` the way every protocol of the
/// CLI does: the session, workdir, log and progress of the call, and the
/// `--approve` policy (`ask` goes to the asker). Shared by `serve` and `mcp`.
template <class Executor>
class call_runner {
 public:
  call_runner(bash_tools<Executor>& tools, approval_policy policy, std::filesystem::path workdir, asker ask)
      : tools_(tools), policy_(policy), workdir_(std::move(workdir)), ask_(std::move(ask)) {}

  bash_tools<Executor>& tools() noexcept { return tools_; }

  /// Runs `call`; `stop` aborts a foreground command. Throws only what
  /// building the context throws (out of memory); `bash_tools::call` never does.
  tool_result call(const tool_call& call, std::stop_token stop) const {
    call_context context;
    if (call.session) context.session = owner_token(*call.session);
    context.cwd = workdir_;
    context.log = call.log.get();
    context.stop = stop;
    context.progress = call.progress;
    if (policy_ == approval_policy::always)
      context.approve = [](const approval_request&) { return approval_outcome::allowed_once; };
    else if (policy_ == approval_policy::ask && ask_)
      context.approve = [this, stop](const approval_request& request) { return ask_(request, stop); };
    return tools_.call(call.tool, call.args, context);
  }

 private:
  bash_tools<Executor>& tools_;
  approval_policy policy_;
  std::filesystem::path workdir_;
  asker ask_;
};

/// Turns request lines into responses over one `bash_tools`. Thread-safe as
/// far as the tools and the executor are: the reader thread calls `dispatch`,
/// workers call `run`.
template <class Executor>
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
      return nlohmann::json();  // out of memory: serve.hpp answers with a fixed line
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
    if (name == "tools")
      return {{"id", std::move(id)}, {"tools", tools_.schemas()}, {"text", "3 tools"}, {"is_error", false}};
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
      for (auto candidate : {approval_outcome::allowed_once, approval_outcome::rejected, approval_outcome::cancelled,
                             approval_outcome::unavailable})
        if (to_string(candidate) == outcome_field->get<std::string>()) outcome = candidate;
    if (!outcome)
      return response(std::move(id), "\"outcome\" must be allowed-once, rejected, cancelled or unavailable", true);
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
/// here. `serve` runs tool calls on worker threads instead; this is the same
/// path without them, for the fuzz target and tests.
template <class Executor>
nlohmann::json handle_request_line(std::string_view line, request_handler<Executor>& handler,
                                   std::stop_token stop = {}) {
  auto dispatched = handler.dispatch(line);
  if (auto* now = std::get_if<nlohmann::json>(&dispatched)) return std::move(*now);
  return handler.run(std::get<tool_call>(dispatched), std::move(stop));
}

}  // namespace bashexec::cli

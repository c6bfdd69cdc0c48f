// `bashexec serve`: the JSON-lines tool server. The reader thread parses each
// input line; tool calls run on worker threads (a long foreground `bash`
// never blocks a `bash_output` on the next line); every output line is
// written whole under one mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <bashexec/session/session_log.hpp>
#include <bashexec/tools/bash_tools.hpp>

#include "options.hpp"

namespace bashexec::cli {

/// A session on the wire: its id as a string ("" included), or null for a
/// caller without one (contract 11: the empty id is an owner like any other).
inline nlohmann::json session_json(const std::optional<owner_token>& session) {
  return session ? nlohmann::json(session->value()) : nlohmann::json(nullptr);
}

/// Writes whole JSON lines to stdout, one writer at a time.
class line_writer {
 public:
  void emit(const nlohmann::json& line) {
    const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::lock_guard lock(mutex_);
    std::cout << text << '\n' << std::flush;
  }

 private:
  std::mutex mutex_;
};

/// Escalation questions under `--approve ask`: each gets a number, a line on
/// stdout, and waits for the matching `{"op": "approve"}` line.
class approval_desk {
 public:
  explicit approval_desk(line_writer& out) : out_(out) {}

  approval_outcome ask(const approval_request& request) {
    std::future<approval_outcome> answer;
    std::uint64_t number = 0;
    {
      std::lock_guard lock(mutex_);
      if (closed_) return approval_outcome::cancelled;
      number = ++last_;
      answer = pending_[number].get_future();
    }
    out_.emit({{"approval",
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

  /// End of input: nobody can answer any more.
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    for (auto& [number, promise] : pending_) promise.set_value(approval_outcome::cancelled);
    pending_.clear();
  }

 private:
  line_writer& out_;
  std::mutex mutex_;
  std::map<std::uint64_t, std::promise<approval_outcome>> pending_;
  std::uint64_t last_ = 0;
  bool closed_ = false;
};

/// The longest request line kept; a longer one is answered with an error
/// and its bytes are dropped as they arrive, so memory stays bounded.
inline constexpr std::size_t max_line_bytes = std::size_t{16} << 20;

enum class line_status { ok, too_long, end };

/// One line from `in` (without its newline) into `line`, at most
/// `max_line_bytes` of it.
inline line_status read_line(std::streambuf& in, std::string& line) {
  line.clear();
  bool too_long = false;
  for (;;) {
    const int c = in.sbumpc();
    if (c == std::char_traits<char>::eof())
      return too_long ? line_status::too_long : line.empty() ? line_status::end : line_status::ok;
    if (c == '\n') return too_long ? line_status::too_long : line_status::ok;
    if (line.size() < max_line_bytes)
      line.push_back(static_cast<char>(c));
    else
      too_long = true;
  }
}

template <class Executor>
class tool_server {
 public:
  tool_server(Executor& executor, const serve_options& options, std::filesystem::path session_dir,
              std::filesystem::path workdir)
      : options_(options),
        session_dir_(std::move(session_dir)),
        workdir_(std::move(workdir)),
        approvals_(out_),
        tools_(executor, [this](const std::optional<owner_token>& owner, const std::string& notice) {
          out_.emit({{"notice", notice}, {"session", session_json(owner)}});
        }) {}

  /// Serves until end of input; in-flight calls finish before it returns.
  void serve(std::istream& in) {
    std::string line;
    for (;;) {
      const line_status status = read_line(*in.rdbuf(), line);
      if (status == line_status::end) break;
      if (status == line_status::too_long) {
        reply(nullptr, fmt::format("request line longer than {} bytes; ignored", max_line_bytes), true);
        continue;
      }
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      handle_line(line);
    }
    approvals_.close();
    for (auto& running : workers_) running.thread.join();
  }

 private:
  void handle_line(const std::string& line) {
    auto request = nlohmann::json::parse(line, nullptr, false);
    if (request.is_discarded() || !request.is_object())
      return reply(nullptr, "malformed request line: expected one JSON object per line", true);
    const nlohmann::json id = request.contains("id") ? request["id"] : nlohmann::json(nullptr);
    if (auto op = request.find("op"); op != request.end()) return handle_op(id, request, *op);
    auto tool = request.find("tool");
    if (tool == request.end() || !tool->is_string())
      return reply(id, "request needs a string \"tool\" (bash, bash_output, bash_kill) or an \"op\"", true);
    // Absent or null: a caller without a session, whose tasks are ownerless.
    // Any string, "" included, is a session and owns its tasks.
    auto session = request.find("session");
    const bool has_session = session != request.end() && !session->is_null();
    if (has_session && !session->is_string())
      return reply(id, "\"session\" must be a string, or null (or absent) for no session", true);
    const std::optional<std::string> session_id =
        has_session ? std::optional(session->get<std::string>()) : std::nullopt;
    nlohmann::json args = request.contains("args") ? request["args"] : nlohmann::json::object();
    session_log* log = nullptr;
    try {
      if (session_id) log = log_for(*session_id);
    } catch (const std::exception& e) {
      return reply(id, fmt::format("session log: {}", e.what()), true);
    }
    run_worker([this, id, name = tool->get<std::string>(), args = std::move(args), session_id, log] {
      call_context context;
      if (session_id) context.session = owner_token(*session_id);
      context.cwd = workdir_;
      context.log = log;
      if (options_.approve == approval_policy::always)
        context.approve = [](const approval_request&) { return approval_outcome::allowed_once; };
      else if (options_.approve == approval_policy::ask)
        context.approve = [this](const approval_request& r) { return approvals_.ask(r); };
      const tool_result result = tools_.call(name, args, context);
      reply(id, result.text, result.is_error);
    });
  }

  void handle_op(const nlohmann::json& id, const nlohmann::json& request, const nlohmann::json& op) {
    const std::string name = op.is_string() ? op.get<std::string>() : std::string();
    if (name == "tools") {
      out_.emit({{"id", id}, {"tools", tools_.schemas()}, {"text", "3 tools"}, {"is_error", false}});
      return;
    }
    if (name == "set_mode") {
      auto session = request.find("session");
      auto mode_field = request.find("mode");
      if (session == request.end() || !session->is_string() || session->get<std::string>().empty())
        return reply(id, "set_mode needs a non-empty string \"session\"", true);
      if (mode_field == request.end() || !mode_field->is_string())
        return reply(id, "set_mode needs a string \"mode\"", true);
      auto mode = parse_sandbox_mode(mode_field->get<std::string>());
      if (!mode)
        return reply(id, "\"mode\" must be read-only, workspace-write or danger-full-access", true);
      if (!tools_.escalation_advertised())
        return reply(id, "this server runs commands unconfined (--unconfined); there is no sandbox mode to set",
                     true);
      try {
        set_sandbox_mode(*log_for(session->get<std::string>()), *mode);
      } catch (const std::exception& e) {
        return reply(id, fmt::format("session log: {}", e.what()), true);
      }
      return reply(id, fmt::format("session {} now runs under {} mode", session->get<std::string>(), *mode), false);
    }
    if (name == "approve") {
      auto number = request.find("approval");
      auto outcome_field = request.find("outcome");
      if (number == request.end() || !number->is_number_unsigned())
        return reply(id, "approve needs the numeric \"approval\" id of the question", true);
      std::optional<approval_outcome> outcome;
      if (outcome_field != request.end() && outcome_field->is_string())
        for (auto candidate : {approval_outcome::allowed_once, approval_outcome::rejected,
                               approval_outcome::cancelled, approval_outcome::unavailable})
          if (to_string(candidate) == outcome_field->get<std::string>()) outcome = candidate;
      if (!outcome)
        return reply(id, "\"outcome\" must be allowed-once, rejected, cancelled or unavailable", true);
      if (!approvals_.answer(number->get<std::uint64_t>(), *outcome))
        return reply(id, fmt::format("no approval question {} is waiting", number->dump()), true);
      return reply(id, fmt::format("approval {} answered {}", number->dump(), to_string(*outcome)), false);
    }
    reply(id, fmt::format("unknown op {} (tools, set_mode, approve)", op.dump()), true);
  }

  struct worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };

  /// Runs `job` on its own thread; finished threads are joined as new ones
  /// start, so a long session does not accumulate them.
  template <class Job>
  void run_worker(Job job) {
    std::erase_if(workers_, [](worker& w) {
      if (!w.finished->load()) return false;
      w.thread.join();
      return true;
    });
    auto finished = std::make_shared<std::atomic<bool>>(false);
    workers_.push_back({std::thread([job = std::move(job), finished] {
                          job();
                          finished->store(true);
                        }),
                        finished});
  }

  /// The log of `session`, opened (and replayed) on first use; null for the
  /// empty session id, which names no log file and so has no override.
  session_log* log_for(const std::string& session) {
    if (session.empty()) return nullptr;
    std::lock_guard lock(logs_mutex_);
    auto& log = logs_[session];
    if (!log) log = std::make_unique<session_log>(session_log_path(session_dir_, session));
    return log.get();
  }

  void reply(const nlohmann::json& id, std::string_view text, bool is_error) {
    out_.emit({{"id", id}, {"text", text}, {"is_error", is_error}});
  }

  const serve_options& options_;
  std::filesystem::path session_dir_;
  std::filesystem::path workdir_;
  line_writer out_;
  approval_desk approvals_;
  std::mutex logs_mutex_;
  std::map<std::string, std::unique_ptr<session_log>> logs_;
  std::vector<worker> workers_;
  // Last: unsubscribes from the executor before the members above go away.
  bash_tools<Executor> tools_;
};

}  // namespace bashexec::cli

// server/mcp_server: the tools as a Model Context Protocol server over two
// descriptors (`bashexec mcp`; docs/tool-protocol.md), embeddable by a C++
// host (docs/embedding-server.md): lifecycle, tools/list, tools/call,
// cancellation, progress, logging notices, elicitation for escalations,
// tasks (2025-11-25: a `bash` call as a task; server/mcp_tasks.hpp) and
// batches where the negotiated version allows them. The wire vocabulary is
// mcp_protocol.hpp's; the reader, writer, worker slots and `call_runner` are
// shared with json_lines_server. One connection is one session.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include <unistd.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/executor.hpp"
#include "bashexec/run_progress.hpp"
#include "bashexec/server/call_runner.hpp"
#include "bashexec/server/line_transport.hpp"
#include "bashexec/server/mcp_calls.hpp"
#include "bashexec/server/mcp_protocol.hpp"
#include "bashexec/server/mcp_tasks.hpp"
#include "bashexec/server/options.hpp"
#include "bashexec/server/request_parse.hpp"
#include "bashexec/server/session_logs.hpp"
#include "bashexec/tools/bash_tools.hpp"
#include "bashexec/tools/render.hpp"

namespace bashexec::server {

/// How an MCP server serves: `server_options`, with escalations asked
/// through elicitation by default, and the one session of the connection.
struct mcp_server_options : server_options {
  mcp_server_options() { approve = approval_policy::ask; }
  /// The connection's session: it owns its tasks, and its mode override is
  /// replayed from `session_dir`.
  std::string session = "mcp";
  /// How often a call that carries a progress token is told how it runs.
  std::chrono::milliseconds progress_interval{500};
  /// Retention, count and page size of the session's tasks.
  mcp::task_limits tasks{};
};

template <executor Executor>
class mcp_server : public line_transport {
 public:
  /// Serves `executor`'s tools over MCP on `in_fd` / `out_fd` (not owned;
  /// left open). Construct it, then call `serve` (it blocks); `stop` from
  /// any other thread ends it. The executor must outlive this object.
  mcp_server(Executor& executor, mcp_server_options options = {}, int in_fd = STDIN_FILENO,
             int out_fd = STDOUT_FILENO)
      : line_transport(in_fd, out_fd, options.max_in_flight, mcp::fallback_line, options.write_timeout,
                       &mcp::dump_line),
        executor_(executor),
        options_(std::move(options)),
        logs_(options_.session_dir),
        log_(logs_.open(options_.session)),
        tasks_(options_.tasks),
        // Only this session's tasks are announced to it: sessions over HTTP
        // share one executor, and a notice quotes the command.
        tools_(executor,
               [this](const std::optional<owner_token>& owner, const std::string& notice) {
                 if (owner && owner->value() == options_.session) log_notice(notice);
               },
               options_.carry),
        runner_(tools_, options_.approve, options_.workdir,
                [this](const approval_request& request, std::stop_token stop) {
                  return pool_.without_slot([&] { return elicit(request, stop); });
                }) {}

  ~mcp_server() { finish(); }

  /// Serves until end of input or `stop()`; then no more lines are read, the
  /// calls in flight are aborted (their responses still written while
  /// stdout takes them), open questions are cancelled, and it returns once
  /// every call has answered. The executor's disposal kills the tasks.
  void serve() {
    std::jthread ticker([this](std::stop_token stop) { tick_progress(stop); });
    const std::size_t max_line_bytes = options_.limits.max_line_bytes;
    read_lines(
        max_line_bytes,
        [&](const std::string& line) {
          out_.emit(mcp::error(recover_id(line, /*exact_ids=*/true), mcp::invalid_request,
                               fmt::format("message longer than {} bytes; ignored", max_line_bytes)));
        },
        [this](const std::string& line) { return handle_line(line); });
    ticker.request_stop();
    wake_ticker();
    finish();
  }

  /// Stops reading and aborts the calls in flight; `serve` then returns.
  /// Safe from any thread (a signal-watching thread, say).
  void stop() noexcept {
    stop_transport();
    tasks_.stop_all();
    questions_.cancel_all();
    wake_ticker();
  }

 private:
  // ---- the reader thread ------------------------------------------------

  /// False when the server stops reading (it is closing).
  bool handle_line(std::string_view line) noexcept {
    try {
      const bool batches = negotiated_batches();
      parsed_line parsed = parse_request_line(line, options_.limits, /*allow_array=*/true, /*exact_ids=*/true);
      if (!parsed.request) {
        out_.emit(mcp::refusal(std::move(parsed)));
        return true;
      }
      nlohmann::json& message = *parsed.request;
      if (!message.is_array()) return handle_message(message, nullptr);
      if (!batches) {
        out_.emit(mcp::batch_refused(version_or_none()));
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
    mcp::incoming in = mcp::sort_message(message);
    switch (in.what) {
      case mcp::incoming::kind::invalid: reply(batch, std::move(in.reply)); return true;
      case mcp::incoming::kind::answer: questions_.settle(in.id, mcp::approval_from(message)); return true;
      case mcp::incoming::kind::notification: handle_notification(in.method, in.params); return true;  // never answered
      case mcp::incoming::kind::request: break;
    }
    return handle_request(std::move(in.id), in.method, in.params, batch);
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
      reply(batch, mcp::result(std::move(id), {{"tools", mcp::tool_list(tools_.schemas(), version_or_none())}}));
      return true;
    }
    if (name == "tools/call") return call_tool(std::move(id), params, batch);
    if (name.starts_with("tasks/") && tasks_negotiated()) {
      handle_task_request(std::move(id), name, params, batch);
      return true;
    }
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
      calls_.cancel(*request_id);
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
    elicitation_ = mcp::offers_form_elicitation(*version_, params);
    batches_.store(*version_ == "2025-03-26");
    return mcp::result(std::move(id), mcp::initialize_result(*version_));
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
                       fmt::format("unknown tool {} (bash, bash_output, bash_kill, bash_input)", command_summary(tool, 100))));
      return true;
    }
    if (const auto task = params.find("task"); task != params.end() && tasks_negotiated())
      return start_task(std::move(id), tool, params, *task, batch);
    auto call = std::make_shared<mcp::call_state>();
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
    if (!calls_.add(call)) {
      reply(batch, mcp::error(std::move(id), mcp::invalid_request, "a request with this id is still in flight"));
      return true;
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
          finish_call(call, std::move(result), work.tool == bash_tool_name);
        },
        [this, call](std::string_view reason) { finish_call(call, tool_result{std::string(reason), true}); });
    return true;
  }

  // ---- tasks (2025-11-25) --------------------------------------------------

  bool tasks_negotiated() {
    std::lock_guard lock(mutex_);
    return version_ && mcp::at_least(*version_, mcp::tasks_revision);
  }

  /// A task-augmented tools/call: checked, answered with CreateTaskResult
  /// at once, then run as the plain call would be, on a worker slot.
  bool start_task(nlohmann::json id, const std::string& tool, const nlohmann::json& params,
                  const nlohmann::json& task_params, const std::shared_ptr<mcp::batch_replies>& batch) {
    if (!task_params.is_object()) {
      reply(batch, mcp::error(std::move(id), mcp::invalid_params, "\"task\" must be an object ({ttl?: number})"));
      return true;
    }
    if (tool != bash_tool_name) {
      reply(batch, mcp::error(std::move(id), mcp::invalid_params,
                              fmt::format("{} does not run as a task (its execution.taskSupport is forbidden: it "
                                          "answers at once); call it without \"task\"",
                                          tool)));
      return true;
    }
    std::optional<std::int64_t> ttl;
    if (const auto asked = task_params.find("ttl"); asked != task_params.end() && !asked->is_null()) {
      if (!asked->is_number() || asked->get<double>() < 0) {
        reply(batch, mcp::error(std::move(id), mcp::invalid_params, "\"task.ttl\" must be a number of milliseconds"));
        return true;
      }
      ttl = static_cast<std::int64_t>(std::min(asked->get<double>(), 1e15));
    }
    std::shared_ptr<mcp::mcp_task> task = tasks_.create(ttl);
    if (!task) {
      reply(batch, mcp::error(std::move(id), mcp::invalid_request,
                              fmt::format("the session holds {} tasks already; wait for some to end or be forgotten",
                                          options_.tasks.max_tasks)));
      return true;
    }
    tool_call work{id, tool, nlohmann::json::object(), options_.session, log_, nullptr};
    if (const auto args = params.find("arguments"); args != params.end()) work.args = *args;
    reply(batch, mcp::result(std::move(id), {{"task", tasks_.describe(*task)}}));
    if (!pool_.acquire()) {
      finish_task(*task, tool_result{"the server is shutting down; the call did not run", true});
      return false;
    }
    pool_.launch(
        [this, task, work = std::move(work)] {
          tool_result result;
          {
            std::stop_callback link(pool_.stop_token(), [task] { task->stop.request_stop(); });
            struct on_this_thread {
              explicit on_this_thread(mcp::mcp_task* task) { current_task_ = task; }
              ~on_this_thread() { current_task_ = nullptr; }
            } running(task.get());
            result = runner_.call(work, task->stop.get_token());
          }
          finish_task(*task, std::move(result));
        },
        [this, task](std::string_view reason) { finish_task(*task, tool_result{std::string(reason), true}); });
    return true;
  }

  /// The task's call answered: its result is kept (unless it was cancelled)
  /// and every waiting tasks/result answered. Never throws.
  void finish_task(mcp::mcp_task& task, tool_result result) noexcept {
    try {
      const bool failed = result.is_error;
      std::string message =
          mcp::task_status_message(failed, result.text, result.facts ? &*result.facts : nullptr);
      send(tasks_.finish(task, mcp::call_result(nullptr, std::move(result), version_or_none())["result"], failed,
                         to_valid_utf8(message)));
    } catch (...) {
      out_.emit(nullptr);
    }
  }

  /// tasks/get, tasks/result, tasks/list, tasks/cancel.
  void handle_task_request(nlohmann::json id, const std::string& name, const nlohmann::json& params,
                           const std::shared_ptr<mcp::batch_replies>& batch) {
    if (name == "tasks/list") {
      std::optional<std::string> cursor;
      if (const auto at = params.find("cursor"); at != params.end() && !at->is_null()) {
        if (!at->is_string()) {
          reply(batch, mcp::error(std::move(id), mcp::invalid_params, "\"cursor\" must be a string"));
          return;
        }
        cursor = at->get<std::string>();
      }
      auto page = tasks_.list(cursor);
      reply(batch, page ? mcp::result(std::move(id), std::move(*page))
                        : mcp::error(std::move(id), mcp::invalid_params, "\"cursor\" is not one tasks/list gave"));
      return;
    }
    if (name != "tasks/get" && name != "tasks/result" && name != "tasks/cancel") {
      reply(batch, mcp::error(std::move(id), mcp::method_not_found,
                              fmt::format("method not found: {}", command_summary(name, 100))));
      return;
    }
    const auto task_id = params.find("taskId");
    if (task_id == params.end() || !task_id->is_string()) {
      reply(batch, mcp::error(std::move(id), mcp::invalid_params, fmt::format("{} needs a string \"taskId\"", name)));
      return;
    }
    const std::shared_ptr<mcp::mcp_task> task = tasks_.find(task_id->get<std::string>());
    if (!task) {
      reply(batch, mcp::error(std::move(id), mcp::invalid_params,
                              fmt::format("unknown task {} (never created in this session, or forgotten past its ttl)",
                                          command_summary(task_id->get<std::string>(), 100))));
      return;
    }
    if (name == "tasks/get") {
      reply(batch, mcp::result(std::move(id), tasks_.describe(*task)));
    } else if (name == "tasks/cancel") {
      auto [outcome, change] = tasks_.cancel(*task);
      if (outcome == mcp::task_board::cancel_outcome::already_ended) {
        const nlohmann::json facts = tasks_.describe(*task);
        reply(batch, mcp::error(std::move(id), mcp::invalid_params,
                                fmt::format("task {} has already ended ({}); nothing was cancelled", task->id,
                                            facts["status"].get<std::string>())));
        return;
      }
      reply(batch, mcp::result(std::move(id), tasks_.describe(*task)));
      send(std::move(change));
    } else if (batch) {
      // A batch waits for all its answers, and a task's result may take
      // hours: inside a batch, tasks/result answers only an ended task.
      if (auto now = tasks_.result_now(*task, id))
        reply(batch, std::move(*now));
      else
        reply(batch, mcp::error(std::move(id), mcp::invalid_request,
                                "tasks/result of a task still running cannot be part of a batch"));
    } else if (auto now = tasks_.result_or_wait(*task, id)) {  // tasks/result
      out_.emit(*now);
    }
  }

  /// Sends what a task change produced: the status notification, then the
  /// answers to waiting tasks/result requests.
  void send(mcp::task_change change) {
    if (change.status) out_.emit(*change.status);
    for (const auto& response : change.responses) out_.emit(response);
  }

  // ---- the worker threads -----------------------------------------------

  /// The response to a tools/call, unless it was cancelled (then nothing
  /// follows, as the cancellation utility says, and a background task the
  /// call started is killed: the client would never learn its id). Never
  /// throws.
  void finish_call(const std::shared_ptr<mcp::call_state>& call, tool_result result, bool bash_call = false) noexcept {
    const bool cancelled = calls_.finish(*call);
    if (cancelled && bash_call) {
      try {
        if (auto task = mcp::started_task(result)) executor_.kill(*task);
      } catch (...) {  // already settled and forgotten: nothing left to kill
      }
    }
    std::optional<nlohmann::json> response;
    if (!cancelled) {
      try {
        response = mcp::call_result(call->id, std::move(result), version_or_none());
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
    std::string version;
    {
      std::lock_guard lock(mutex_);
      // No capability, or (against the lifecycle) no initialized notification yet.
      if (!elicitation_ || !client_ready_) return approval_outcome::unavailable;
      if (closing_.is_set()) return approval_outcome::cancelled;
      version = version_.value_or("");
    }
    auto [id, answer] = questions_.open();
    auto question = mcp::elicitation_request(id, request, version);
    // A task's question says which task asks, and the task waits for it.
    mcp::mcp_task* const task = current_task_;
    if (question && task) (*question)["params"]["_meta"][std::string(mcp::related_task_key)] = {{"taskId", task->id}};
    if (!question) {  // too long to show (the tool layer refuses it before asking)
      questions_.settle(id, approval_outcome::unavailable);
      return approval_outcome::unavailable;
    }
    if (task) send(tasks_.set_waiting(*task, true));
    out_.emit(*question);
    struct back_to_work {
      mcp_server& server;
      mcp::mcp_task* task;
      ~back_to_work() {
        if (task) server.send(server.tasks_.set_waiting(*task, false));
      }
    } after_answer{*this, task};
    // A cancelled call withdraws its question (and tells the client so).
    std::stop_callback withdraw(stop, [this, id = id] {
      if (questions_.settle(id, approval_outcome::cancelled))
        out_.emit(mcp::notification("notifications/cancelled",
                                    {{"requestId", id}, {"reason", "the tool call was cancelled"}}));
    });
    return answer.get();
  }

  /// (Either thread.) A background task settled: the same notice `serve`
  /// sends, as a log message at level notice, when the level lets it through.
  void log_notice(const std::string& notice) {
    if (!initialized() || min_level_.load() > mcp::notice_level) return;
    out_.emit(mcp::notice_message(notice));
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
      calls_.report_progress([this](const nlohmann::json& line) { out_.emit(line); },
                             std::chrono::steady_clock::now());
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

  Executor& executor_;
  mcp_server_options options_;
  session_logs logs_;
  std::shared_ptr<session_log> log_;

  std::mutex mutex_;
  std::condition_variable progress_changed_;
  std::optional<std::string> version_;
  bool elicitation_ = false;
  bool client_ready_ = false;
  std::atomic<bool> batches_{false};
  std::atomic<std::size_t> min_level_{0};
  mcp::calls_in_flight calls_;
  mcp::questions questions_;
  mcp::task_board tasks_;
  /// The task whose call runs on this worker thread, if any (its questions
  /// make it input_required).
  static inline thread_local mcp::mcp_task* current_task_ = nullptr;

  // Unsubscribes from the executor before the members above go away.
  bash_tools<Executor> tools_;
  call_runner<Executor> runner_;
};

}  // namespace bashexec::server

// remote_executor: a model of the executor concept (executor.hpp) whose
// commands run on a bashexec server elsewhere — `bashexec mcp --http ADDR:PORT
// --executor-api`, in a pod or on another machine — over the executor
// protocol (server/executor_api.hpp, docs/remote.md). A harness moves from
// `sandbox_executor` to it by changing one type; the tools and both servers
// take it like any executor.
//
// What stays as it is locally:
//   - `run` honours its timeout on the server, and its stop token here: a
//     stop kills the command on the server, and the result reports the first
//     cause as a local run would; `spec.progress` counts the output as the
//     server reads it;
//   - background tasks: ids `bash-1`, `bash-2`, ... of this executor's own,
//     incremental reads (byte-exact, invalid UTF-8 included; lossy reads
//     reported), the owner fence, kills, waits, and completion listeners
//     called exactly once per task, never after disposal began;
//   - a request's stop token stops its task;
//   - destroying it ends its session: the server kills and reaps every
//     command it started (and an idle session expires the same way, should
//     the client die without saying so).
// What is the server's: the workdir, spill paths (files on the server's
// machine), the sandbox, the limits. `spill_directory()` names the server's.
//
// A dropped connection is reconnected and the request sent again; the
// server answers a repeated request from its cache, so nothing is lost or
// done twice. A server that cannot be reached for `reconnect_timeout`
// (gone, or never there) is an `infrastructure_error` naming it — never a
// hang. Plain HTTP with a bearer token: TLS is a proxy's job in front of the
// server (docs/remote.md).
//
// Heavy to compile (Asio, Beast, nlohmann-json) and off the umbrella header.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/detail/engine/listeners.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/executor.hpp"
#include "bashexec/ids.hpp"
#include "bashexec/remote/detail/http_client.hpp"
#include "bashexec/remote/detail/wire.hpp"
#include "bashexec/request.hpp"
#include "bashexec/result.hpp"
#include "bashexec/subscription.hpp"

namespace bashexec {

/// Where a remote executor's server is and how long it waits for it.
struct remote_executor_config {
  /// The executor protocol's endpoint: `http://HOST:PORT/exec/v1`.
  std::string url{};
  /// The server's bearer token (`--token-file`); empty for a server without.
  std::string token{};
  /// Bound on opening one connection.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(5)};
  /// Bound on one reply, past the wait it asked the server for.
  std::chrono::milliseconds read_timeout{std::chrono::seconds(10)};
  /// How long a request is tried again over new connections before the
  /// server counts as gone (infrastructure_error).
  std::chrono::milliseconds reconnect_timeout{std::chrono::seconds(5)};
  /// The longest wait asked of the server in one request (the server may cut
  /// it shorter).
  std::chrono::milliseconds poll_wait{std::chrono::seconds(20)};
  /// How often a run whose request carries `progress` brings its byte
  /// counts over while it runs.
  std::chrono::milliseconds progress_interval{std::chrono::milliseconds(200)};
  /// Where a throwing completion listener is reported (default: stderr).
  std::function<void(std::string_view)> error_sink{};
};

class remote_executor {
 public:
  /// Opens a session on the server. std::invalid_argument for a url it
  /// cannot use; infrastructure_error when the server cannot be reached or
  /// refuses (wrong token, another protocol version, full).
  explicit remote_executor(remote_executor_config config)
      : config_(std::move(config)),
        at_(remote::detail::endpoint::parse(config_.url)),
        listeners_(std::make_shared<detail::listener_hub<task_snapshot>>(config_.error_sink)) {
    if (config_.connect_timeout.count() <= 0) throw std::invalid_argument("connect_timeout: must be positive");
    if (config_.read_timeout.count() <= 0) throw std::invalid_argument("read_timeout: must be positive");
    if (config_.reconnect_timeout.count() < 0) throw std::invalid_argument("reconnect_timeout: must not be negative");
    if (config_.poll_wait.count() <= 0) throw std::invalid_argument("poll_wait: must be positive");
    if (config_.progress_interval.count() <= 0) throw std::invalid_argument("progress_interval: must be positive");
    const auto facts = call_unchecked({{"op", "open"}, {"version", remote::wire::protocol_version}});
    session_ = remote::wire::text_of(facts, "session");
    poll_wait_ = std::min(config_.poll_wait, std::chrono::milliseconds(remote::wire::number_of<std::int64_t>(facts, "max_wait_ms")));
    if (remote::wire::has(facts, "default_mode"))
      default_mode_ = remote::wire::enum_of<sandbox_mode>(facts, "default_mode");
  }

  remote_executor(const remote_executor&) = delete;
  remote_executor& operator=(const remote_executor&) = delete;

  /// Ends the session: the server kills and reaps every command this
  /// executor started. Listeners are silenced first.
  ~remote_executor() {
    listeners_->silence();
    std::vector<std::unique_ptr<std::stop_callback<std::function<void()>>>> watches;
    {
      std::lock_guard lock(mutex_);
      disposing_ = true;
      for (auto& [id, task] : tasks_) watches.push_back(std::move(task.stop_watch));
    }
    watches.clear();  // outside the lock: a watch that is firing calls kill
    events_stop_.request_stop();
    if (events_thread_.joinable()) events_thread_.join();
    try {
      // A server already found gone is asked once, not for reconnect_timeout.
      call({{"op", "close"}}, {}, {}, !unreachable_.load());
    } catch (...) {
      // A server that is gone has ended the session itself (or will, at
      // its idle timeout).
    }
    listeners_->shutdown();
  }

  std::optional<sandbox_mode> default_mode() const { return default_mode_; }
  /// The server executor's spill directory: a path on the server's machine
  /// (empty until its first spill, as locally).
  std::filesystem::path spill_directory() const {
    const auto reply = call({{"op", "facts"}});
    return remote::wire::optional_path_of(reply, "spill_directory").value_or(std::filesystem::path{});
  }
  const remote_executor_config& config() const noexcept { return config_; }

  /// Resolved by the server, from its configuration (contract 1).
  exec_spec resolve(exec_request request) const {
    auto reply = call({{"op", "resolve"}, {"request", remote::wire::to_wire(request)}});
    exec_spec spec = remote::wire::spec_from_wire(remote::wire::member(reply, "spec"));
    spec.stop = std::move(request.stop);
    spec.progress = std::move(request.progress);
    return spec;
  }

  run_result run(const exec_spec& spec) {
    if (spec.stop.stop_requested())
      throw infrastructure_error("run: stop was requested before the command was spawned");
    // With progress asked for, the counts come over at each interval.
    const auto wait = spec.progress ? std::min(poll_wait_, config_.progress_interval) : poll_wait_;
    nlohmann::json request{{"op", "run"}, {"seq", next_seq()}, {"spec", remote::wire::to_wire(spec)},
                           {"wait_ms", wait.count()}};
    std::optional<std::string> run_id;
    bool abort_sent = false;
    for (;;) {
      nlohmann::json reply;
      try {
        reply = call(request, wait, abort_sent ? std::stop_token{} : spec.stop);
      } catch (const interrupted&) {
        if (!run_id) {
          // Not yet known: the run request again, answered at once with its id.
          request["wait_ms"] = 0;
          run_id = remote::wire::text_of(call(request), "run");
        }
        call({{"op", "run_abort"}, {"run", *run_id}});
        abort_sent = true;
        request = {{"op", "run_wait"}, {"run", *run_id}, {"wait_ms", wait.count()}};
        continue;
      }
      run_id = remote::wire::text_of(reply, "run");
      if (spec.progress) {
        spec.progress->stdout_bytes.store(remote::wire::number_of<std::uint64_t>(reply, "stdout_bytes"));
        spec.progress->stderr_bytes.store(remote::wire::number_of<std::uint64_t>(reply, "stderr_bytes"));
      }
      if (remote::wire::flag_of(reply, "done")) return remote::wire::run_result_from_wire(remote::wire::member(reply, "result"));
      request = {{"op", "run_wait"}, {"run", *run_id}, {"wait_ms", wait.count()}};
    }
  }

  task_id start(const exec_spec& spec) {
    if (spec.stop.stop_requested())
      throw infrastructure_error("start: stop was requested before the command was spawned");
    ensure_events();
    auto reply = call({{"op", "start"}, {"seq", next_seq()}, {"spec", remote::wire::to_wire(spec)}});
    const task_id remote_id(remote::wire::text_of(reply, "task"));
    task_id id;
    {
      std::lock_guard lock(mutex_);
      id = task_id(fmt::format("bash-{}", ++next_task_));
      by_remote_.emplace(remote_id, id);
      tasks_[id].remote = remote_id;
      settled_.notify_all();  // the events thread may hold its settlement
    }
    if (spec.stop.stop_possible()) {
      auto watch = std::make_unique<std::stop_callback<std::function<void()>>>(
          spec.stop, std::function<void()>([this, id] {
            try {
              kill(id);
            } catch (...) {
            }
          }));
      std::lock_guard lock(mutex_);
      if (auto it = tasks_.find(id); it != tasks_.end() && !it->second.settled) it->second.stop_watch = std::move(watch);
    }
    return id;
  }

  task_snapshot get(const task_id& id) const {
    return local(remote::wire::snapshot_from_wire(
        remote::wire::member(call({{"op", "get"}, {"task", remote_of(id).value()}}), "snapshot")));
  }

  /// The session's tasks whose start has returned here: a start still on
  /// its way back (another thread's) is listed once it has.
  std::vector<task_snapshot> list() const {
    std::vector<task_snapshot> tasks;
    const auto reply = call({{"op", "list"}});
    for (const auto& entry : remote::wire::member(reply, "tasks"))
      if (auto task = find_local(remote::wire::snapshot_from_wire(entry))) tasks.push_back(std::move(*task));
    return tasks;
  }

  /// Empty for an ownerless task and for an id this executor never gave, as
  /// locally.
  std::optional<owner_token> owner_of(const task_id& id) const {
    const auto remote_id = find_remote(id);
    if (!remote_id) return std::nullopt;
    auto reply = call({{"op", "owner_of"}, {"task", remote_id->value()}});
    if (auto owner = remote::wire::optional_bytes_of(reply, "owner")) return owner_token(std::move(*owner));
    return std::nullopt;
  }

  bool may_access(const task_id& id, const std::optional<owner_token>& caller) const {
    nlohmann::json request{{"op", "may_access"}, {"task", remote_of(id).value()}};
    request["caller"] = caller ? nlohmann::json(remote::wire::encode_bytes(caller->value())) : nullptr;
    return remote::wire::flag_of(call(request), "may_access");
  }

  task_read read_output(const task_id& id) {
    auto read = remote::wire::read_from_wire(remote::wire::member(
        call({{"op", "read"}, {"seq", next_seq()}, {"task", remote_of(id).value()}}), "read"));
    read.task = local(std::move(read.task));
    return read;
  }

  bool kill(const task_id& id) {
    return remote::wire::flag_of(call({{"op", "kill"}, {"seq", next_seq()}, {"task", remote_of(id).value()}}),
                                 "killed");
  }

  task_snapshot wait(const task_id& id) {
    for (;;)
      if (auto done = wait_for(id, poll_wait_)) return *done;
  }

  std::optional<task_snapshot> wait_for(const task_id& id, std::chrono::milliseconds timeout) {
    const auto remote_id = remote_of(id);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      const auto wait = std::clamp(left, std::chrono::milliseconds(0), poll_wait_);
      auto reply = call({{"op", "wait"}, {"task", remote_id.value()}, {"wait_ms", wait.count()}}, wait);
      if (remote::wire::flag_of(reply, "done"))
        return local(remote::wire::snapshot_from_wire(remote::wire::member(reply, "snapshot")));
      if (left.count() <= 0) return std::nullopt;
    }
  }

  template <class Listener>
  [[nodiscard]] subscription on_task_done(Listener&& listener) {
    ensure_events();
    const auto id = listeners_->add(std::function<void(const task_snapshot&)>(std::forward<Listener>(listener)));
    std::weak_ptr<detail::listener_hub<task_snapshot>> hub = listeners_;
    return subscription([hub, id] {
      if (auto alive = hub.lock()) alive->remove(id);
    });
  }

 private:
  /// A call cut short by the caller's stop token.
  struct interrupted {};

  struct task_record {
    task_id remote;
    bool settled = false;
    std::unique_ptr<std::stop_callback<std::function<void()>>> stop_watch;
  };

  std::uint64_t next_seq() { return ++seq_; }

  std::optional<task_id> find_remote(const task_id& id) const {
    std::lock_guard lock(mutex_);
    const auto it = tasks_.find(id);
    if (it == tasks_.end()) return std::nullopt;
    return it->second.remote;
  }

  task_id remote_of(const task_id& id) const {
    if (auto remote_id = find_remote(id)) return *remote_id;
    throw unknown_task(id);
  }

  /// A server snapshot under this executor's id for the task.
  task_snapshot local(task_snapshot task) const {
    const task_id remote_id = task.id;
    if (auto found = find_local(std::move(task))) return std::move(*found);
    throw remote::wire::protocol_error(fmt::format("task {} is none of this session's", remote_id.value()));
  }

  /// The same, or empty for a task whose start has not returned here.
  std::optional<task_snapshot> find_local(task_snapshot task) const {
    std::lock_guard lock(mutex_);
    const auto it = by_remote_.find(task.id);
    if (it == by_remote_.end()) return std::nullopt;
    task.id = it->second;
    return task;
  }

  // ---- calls ------------------------------------------------------------------

  std::unique_ptr<remote::detail::http_connection> checkout() const {
    std::lock_guard lock(pool_mutex_);
    if (idle_.empty()) return std::make_unique<remote::detail::http_connection>(at_);
    auto connection = std::move(idle_.back());
    idle_.pop_back();
    return connection;
  }

  void checkin(std::unique_ptr<remote::detail::http_connection> connection) const {
    if (!connection->connected()) return;
    std::lock_guard lock(pool_mutex_);
    if (idle_.size() < 8) idle_.push_back(std::move(connection));
  }

  /// One operation of this session, tried again over new connections while
  /// the server cannot be reached; the error it answered thrown as the
  /// server's executor threw it.
  nlohmann::json call(nlohmann::json request, std::chrono::milliseconds wait = {}, std::stop_token stop = {},
                      bool retry = true) const {
    request["session"] = session_;
    return call_unchecked(std::move(request), wait, std::move(stop), retry);
  }

  nlohmann::json call_unchecked(const nlohmann::json& request, std::chrono::milliseconds wait = {},
                                std::stop_token stop = {}, bool retry = true) const {
    std::string body = request.dump();
    std::optional<std::chrono::steady_clock::time_point> failing_since;
    auto pause = std::chrono::milliseconds(20);
    for (;;) {
      auto connection = checkout();
      remote::detail::http_reply reply;
      try {
        reply = connection->post(body, config_.token, config_.connect_timeout, wait + config_.read_timeout, stop);
      } catch (const remote::detail::transport_error& e) {
        if (e.cancelled()) throw interrupted{};
        const auto now = std::chrono::steady_clock::now();
        if (!failing_since) failing_since = now;
        if (!retry || now - *failing_since >= config_.reconnect_timeout) {
          unreachable_ = true;
          throw infrastructure_error(fmt::format("remote executor: the server at {} cannot be reached: {}", config_.url,
                                                 e.what()));
        }
        if (stop.stop_requested()) throw interrupted{};
        if (request.contains("wait_ms") && wait.count() > 0) {
          // Asked again without the wait: a link that drops long requests
          // still carries short ones, so the caller makes progress (each
          // op with a wait is a read the server answers the same again).
          auto again = request;
          again["wait_ms"] = 0;
          body = again.dump();
          wait = {};
        }
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(500));
        continue;
      }
      checkin(std::move(connection));
      unreachable_ = false;
      return answer(reply);
    }
  }

  nlohmann::json answer(const remote::detail::http_reply& reply) const {
    nlohmann::json message;
    try {
      message = nlohmann::json::parse(reply.body);
    } catch (const nlohmann::json::exception&) {
      throw infrastructure_error(fmt::format("remote executor: the server at {} answered HTTP {} without a message "
                                             "of the executor protocol (is it bashexec with --executor-api?)",
                                             config_.url, reply.status));
    }
    if (reply.status == 200 && message.value("ok", false)) return message;
    // A refusal of the HTTP layer (a bad token, a foreign Host) is a
    // JSON-RPC error object, this protocol's a kind and a message.
    const auto& error = message.contains("error") ? message["error"] : nlohmann::json();
    const std::string kind = error.is_string() ? error.get<std::string>() : std::string();
    std::string text = fmt::format("HTTP {}", reply.status);
    if (message.contains("message") && message["message"].is_string())
      text = message["message"].get<std::string>();
    else if (error.is_object() && error.contains("message") && error["message"].is_string())
      text = fmt::format("HTTP {}: {}", reply.status, error["message"].get<std::string>());
    if (kind == remote::wire::invalid_argument_kind) throw std::invalid_argument(text);
    if (kind == remote::wire::unknown_task_kind) {
      task_id id(text.substr(text.rfind(' ') + 1));
      std::lock_guard lock(mutex_);
      if (const auto it = by_remote_.find(id); it != by_remote_.end()) id = it->second;
      throw unknown_task(id);
    }
    if (kind == remote::wire::sandbox_unavailable_kind) {
      const auto mode = parse_sandbox_mode(message.value("mode", "read-only")).value_or(sandbox_mode::read_only);
      throw sandbox_unavailable(mode, text);
    }
    if (kind == remote::wire::infrastructure_kind) throw infrastructure_error(text);
    throw infrastructure_error(fmt::format("remote executor: the server at {} refused: {}", config_.url, text));
  }

  // ---- settled tasks ------------------------------------------------------

  void ensure_events() {
    std::lock_guard lock(mutex_);
    if (events_thread_.joinable() || disposing_) return;
    events_thread_ = std::thread([this, stop = events_stop_.get_token()] { follow_events(stop); });
  }

  /// Follows the session's settled tasks behind a cursor, so each listener
  /// hears of each task once, in order.
  void follow_events(std::stop_token stop) {
    std::uint64_t cursor = 0;
    while (!stop.stop_requested()) {
      nlohmann::json reply;
      try {
        reply = call({{"op", "events"}, {"after", cursor}, {"wait_ms", poll_wait_.count()}}, poll_wait_, stop);
      } catch (const interrupted&) {
        return;
      } catch (const std::exception& e) {
        listeners_->report(fmt::format("bashexec: remote executor: settled tasks no longer followed: {}", e.what()));
        return;
      }
      for (const auto& entry : remote::wire::member(reply, "events")) {
        auto task = remote::wire::snapshot_from_wire(entry);
        std::unique_lock lock(mutex_);
        // A start whose reply is on its way: its id comes with it.
        settled_.wait(lock, stop, [&] { return by_remote_.contains(task.id); });
        if (stop.stop_requested()) return;
        const auto local_id = by_remote_.at(task.id);
        auto& record = tasks_[local_id];
        record.settled = true;
        auto watch = std::move(record.stop_watch);
        lock.unlock();
        watch.reset();
        task.id = local_id;
        listeners_->notify(std::move(task));
      }
      cursor = remote::wire::number_of<std::uint64_t>(reply, "cursor");
    }
  }

  remote_executor_config config_;
  remote::detail::endpoint at_;
  std::string session_;
  std::optional<sandbox_mode> default_mode_;
  std::chrono::milliseconds poll_wait_{};
  std::atomic<std::uint64_t> seq_{0};
  mutable std::atomic<bool> unreachable_{false};

  mutable std::mutex mutex_;
  std::condition_variable_any settled_;
  std::map<task_id, task_record> tasks_;
  std::map<task_id, task_id> by_remote_;
  std::uint64_t next_task_ = 0;
  bool disposing_ = false;

  mutable std::mutex pool_mutex_;
  mutable std::vector<std::unique_ptr<remote::detail::http_connection>> idle_;

  std::shared_ptr<detail::listener_hub<task_snapshot>> listeners_;
  std::stop_source events_stop_;
  std::thread events_thread_;
};

static_assert(executor<remote_executor>);

}  // namespace bashexec

// server/executor_api: the server side of the executor protocol
// (docs/remote.md) — what `bashexec::remote_executor` speaks to, served by
// `mcp_http_server` at `/exec/v1` beside MCP (`bashexec mcp --http ...
// --executor-api`). One POST per operation, a JSON object in and out; byte
// strings base64 (remote/detail/wire.hpp).
//
// Why a protocol beside MCP: MCP's text content repairs invalid UTF-8 for a
// model and has no byte offsets, no first-cause abort and no settled-task
// cursor; an executor over the network needs each of those exactly. MCP
// stays the model-facing protocol; this one is for a harness's own code.
//
// What it keeps, per client session (`open` ... `close`, or idle expiry):
//   - a session sees and touches only the tasks it started (unknown_task
//     otherwise), whatever their owner tokens;
//   - every operation that changes something carries a sequence number, and
//     a repeat of a number is answered from a cache rather than done twice:
//     a client whose connection dropped sends the same request again and
//     loses or duplicates nothing (no second start, no skipped read);
//   - a foreground run is a run on the server's executor, on a thread of its
//     own, honouring its own timeout there; the client's abort stops it
//     there (`run_abort`) and the result says which cause came first;
//   - settled tasks are events in order behind a cursor (`events`), so the
//     client's listeners hear of each exactly once;
//   - waits are long polls answered when the thing happens or at their
//     deadline (at most `max_wait`), on no thread of their own: a timer
//     thread answers the deadlines, whatever settles answers the rest;
//   - ending a session (close, idle expiry, the server's stop) kills and
//     reaps every command it started.
//
// The transport (mcp_http_server) is not a template; this part is, over the
// executor, and reaches it through `executor_api_backend`.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/errors.hpp"
#include "bashexec/executor.hpp"
#include "bashexec/remote/detail/wire.hpp"
#include "bashexec/run_progress.hpp"
#include "bashexec/server/http_guard.hpp"
#include "bashexec/server/request_parse.hpp"

namespace bashexec::server {

/// What the HTTP transport hands each request of the executor protocol to.
class executor_api_backend {
 public:
  /// Called once per request, from any thread, with the HTTP status and body.
  using reply_fn = std::function<void(unsigned status, std::string body)>;
  virtual ~executor_api_backend() = default;
  /// Takes one request body; answers through `reply`, now or later (a long
  /// poll), exactly once. Never blocks.
  virtual void handle(std::string body, reply_fn reply) = 0;
  /// The server is shutting down: every run is aborted, every task killed,
  /// every waiting request answered (503). Returns at once.
  virtual void stop() noexcept = 0;
};

/// The bounds of the executor protocol's service.
struct executor_api_options {
  /// Client sessions open at once; an `open` past it is answered 503.
  std::size_t max_sessions = 256;
  /// Foreground runs in flight over every session (each holds a thread).
  std::size_t max_runs = 256;
  /// A session with no request for this long is ended, its commands killed.
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(30)};
  /// The longest wait one request may ask for (a longer one is cut to it).
  std::chrono::milliseconds max_wait{std::chrono::seconds(25)};
  /// Threads that serve the operations that are not waits.
  std::size_t workers = 4;
  /// Answers kept per session for repeated sequence numbers, and their
  /// bytes at most (a read's answer carries up to the output caps): a client
  /// repeats only its latest requests.
  std::size_t replay_answers = 64;
  std::size_t replay_bytes = std::size_t{8} << 20;
  /// Settled tasks a session keeps the final facts of (for `wait`); past it
  /// the oldest is forgotten, as an executor's retention forgets a task.
  std::size_t kept_settled = 4096;
  /// Settled runs whose results are kept for a repeated wait.
  std::size_t kept_runs = 16;
  /// The widest mode a request may name, and whether it may widen the
  /// network allowlist (`network_grants`); empty: the client's word is the
  /// harness's, as a caller of the executor in-process. `bashexec mcp
  /// --approve never` sets it to the server's default mode with no grants:
  /// an operator who lets no model escalate lets no harness either.
  std::optional<sandbox_mode> max_mode;
  bool allow_network_grants = true;
};

namespace detail::executor_api {

using clock = std::chrono::steady_clock;
namespace wire = remote::wire;

struct answer {
  unsigned status = 200;
  std::string body;
};

inline answer ok(nlohmann::json body) {
  body["ok"] = true;
  return {200, body.dump()};
}

inline answer error(unsigned status, std::string_view kind, std::string_view message,
                    nlohmann::json extra = nlohmann::json::object()) {
  extra["ok"] = false;
  extra["error"] = std::string(kind);
  extra["message"] = std::string(message);
  return {status, extra.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

/// The answer for what an executor call threw.
inline answer answer_for(std::exception_ptr thrown) {
  try {
    std::rethrow_exception(thrown);
  } catch (const sandbox_unavailable& e) {
    return error(500, wire::sandbox_unavailable_kind, e.what(), {{"mode", std::string(to_string(e.mode()))}});
  } catch (const infrastructure_error& e) {
    return error(500, wire::infrastructure_kind, e.what());
  } catch (const unknown_task& e) {
    return error(404, wire::unknown_task_kind, e.what());
  } catch (const wire::protocol_error& e) {
    return error(400, wire::protocol_kind, e.what());
  } catch (const std::invalid_argument& e) {
    return error(400, wire::invalid_argument_kind, e.what());
  } catch (const nlohmann::json::exception& e) {
    return error(400, wire::protocol_kind, e.what());
  } catch (const std::exception& e) {
    return error(500, wire::infrastructure_kind, e.what());
  } catch (...) {
    return error(500, wire::infrastructure_kind, "unknown failure");
  }
}

/// One foreground run of a session.
struct run_state {
  std::string id;
  std::stop_source stop;
  std::shared_ptr<run_progress> progress = std::make_shared<run_progress>();
  std::optional<answer> settled;  // the final answer, once the run returned or threw
  std::thread thread;
};

struct session_state {
  std::string id;
  clock::time_point last_seen = clock::now();
  bool ended = false;
  std::set<task_id> tasks;                               // the server's ids of the tasks it started
  std::map<task_id, nlohmann::json> settled;             // each settled task's final snapshot
  std::deque<std::pair<std::uint64_t, nlohmann::json>> events;  // settled snapshots, by cursor
  std::uint64_t next_event = 1;
  std::map<std::uint64_t, std::optional<answer>> answers;  // by sequence number; empty while in progress
  std::size_t answer_bytes = 0;
  std::uint64_t evicted_below = 0;  // a sequence number below it may have been forgotten
  /// What forgetting the answer (or run) of `seq` leaves: a repeat of it,
  /// or of anything older, is refused rather than done again.
  void forget(std::uint64_t seq) { evicted_below = std::max(evicted_below, seq + 1); }
  std::deque<task_id> settled_order;
  std::map<std::uint64_t, std::string> run_of_seq;
  std::map<std::string, std::shared_ptr<run_state>> runs;
  std::deque<std::string> settled_runs;  // in the order they settled
  std::uint64_t next_run = 1;
};

/// A request answered when `ready` says so, or at `deadline` with whatever
/// `ready(true)` gives then.
struct waiter {
  std::shared_ptr<session_state> session;
  clock::time_point deadline;
  std::function<std::optional<answer>(bool at_deadline)> ready;
  executor_api_backend::reply_fn reply;
};

template <class Executor>
class service final : public executor_api_backend {
 public:
  service(Executor& executor, executor_api_options options) : executor_(executor), options_(std::move(options)) {
    if (options_.workers == 0) throw std::invalid_argument("workers: at least one");
    for (std::size_t i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { work(); });
    timer_ = std::thread([this] { keep_time(); });
    settled_ = executor_.on_task_done([this](const task_snapshot& task) { on_settled(task); });
  }

  service(const service&) = delete;
  service& operator=(const service&) = delete;

  ~service() override {
    stop();
    settled_.reset();
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
      work_ready_.notify_all();
      time_changed_.notify_all();
    }
    for (auto& worker : workers_) worker.join();
    timer_.join();
    // Every run was asked to stop; each returns within its kill grace.
    for (auto& [id, s] : sessions_)
      for (auto& [run_id, run] : s->runs)
        if (run->thread.joinable()) run->thread.join();
    for (auto& run : retired_runs_)
      if (run->thread.joinable()) run->thread.join();
  }

  void handle(std::string body, reply_fn reply) override {
    answer immediate;
    try {
      // Bounded as a request line of the other servers is: one object, its
      // nesting and its number of values limited (an env of thousands of
      // entries fits).
      request_limits limits;
      limits.max_line_bytes = body.size();
      limits.max_depth = 16;
      limits.max_values = 200000;
      parsed_line parsed = parse_request_line(body, limits);
      if (!parsed.request) throw wire::protocol_error(parsed.error);
      nlohmann::json message = std::move(*parsed.request);
      const std::string op = wire::text_of(message, "op");
      if (op == "open") {
        immediate = open(message);
      } else {
        std::unique_lock lock(mutex_);
        if (stopping_) {
          immediate = error(503, wire::busy_kind, "the server is shutting down");
        } else {
          const auto s = session_of(message);
          if (!s) {
            immediate = error(404, wire::unknown_session_kind,
                              "no such session (it was closed or expired): open a new one");
          } else {
            s->last_seen = clock::now();
            // Each is given a copy of `reply`: a malformed request throws
            // out of it, and is then answered here, below.
            if (op == "run_wait" || op == "wait" || op == "events") {
              add_waiter(lock, s, op, message, reply);
              return;
            }
            if (op != "run_abort") {
              queue(lock, s, op, std::move(message), reply);
              return;  // queued, or answered from the cache
            }
            immediate = abort_run(*s, message);
          }
        }
      }
    } catch (...) {
      immediate = answer_for(std::current_exception());
    }
    reply(immediate.status, std::move(immediate.body));
  }

  void stop() noexcept override {
    std::vector<std::pair<reply_fn, answer>> answers;
    std::vector<task_id> to_kill;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
      for (auto& [id, s] : sessions_) {
        for (auto& [run_id, run] : s->runs) run->stop.request_stop();
        to_kill.insert(to_kill.end(), s->tasks.begin(), s->tasks.end());
      }
      for (auto& w : waiters_) answers.emplace_back(std::move(w.reply), error(503, wire::busy_kind, "the server is shutting down"));
      waiters_.clear();
    }
    for (const auto& id : to_kill) {
      try {
        executor_.kill(id);
      } catch (...) {
      }
    }
    for (auto& [reply, a] : answers) deliver(reply, std::move(a));
  }

 private:
  struct job {
    std::shared_ptr<session_state> session;
    std::string op;
    nlohmann::json message;
    reply_fn reply;
    std::optional<std::uint64_t> seq;
  };

  static void deliver(const reply_fn& reply, answer a) noexcept {
    try {
      reply(a.status, std::move(a.body));
    } catch (...) {
    }
  }

  std::shared_ptr<session_state> session_of(const nlohmann::json& message) {
    const std::string id = wire::text_of(message, "session");
    const auto it = sessions_.find(id);
    return it == sessions_.end() || it->second->ended ? nullptr : it->second;
  }

  answer open(const nlohmann::json& message) {
    const int version = wire::number_of<int>(message, "version");
    if (version != wire::protocol_version)
      return error(400, wire::protocol_kind,
                   fmt::format("version: this server speaks executor protocol {}, the client {}",
                               wire::protocol_version, version));
    std::lock_guard lock(mutex_);
    if (stopping_) return error(503, wire::busy_kind, "the server is shutting down");
    if (live_sessions() >= options_.max_sessions)
      return error(503, wire::busy_kind, fmt::format("the server has {} sessions open, its most", options_.max_sessions));
    auto s = std::make_shared<session_state>();
    s->id = http::new_session_id();
    sessions_[s->id] = s;
    nlohmann::json facts{{"session", s->id},
                         {"version", wire::protocol_version},
                         {"max_wait_ms", options_.max_wait.count()},
                         {"idle_timeout_ms", options_.idle_timeout.count()}};
    const auto mode = executor_.default_mode();
    facts["default_mode"] = mode ? nlohmann::json(std::string(to_string(*mode))) : nullptr;
    facts["spill_directory"] = spill_directory();
    return ok(std::move(facts));
  }

  /// The executor's spill directory, where it has one (made at its first
  /// spill: asked again by `facts`).
  nlohmann::json spill_directory() const {
    if constexpr (requires { executor_.spill_directory(); }) {
      auto path = executor_.spill_directory();
      if (!path.empty()) return wire::path_or_null(std::optional<std::filesystem::path>(std::move(path)));
    }
    return nullptr;
  }

  std::size_t live_sessions() const {
    return static_cast<std::size_t>(
        std::count_if(sessions_.begin(), sessions_.end(), [](const auto& entry) { return !entry.second->ended; }));
  }

  std::chrono::milliseconds wait_of(const nlohmann::json& message) const {
    const auto ms = wire::optional_number_of<std::int64_t>(message, "wait_ms").value_or(0);
    return std::clamp(std::chrono::milliseconds(ms), std::chrono::milliseconds(0), options_.max_wait);
  }

  // ---- operations done on a worker ----------------------------------------

  /// Queues an operation for a worker, or answers it from the cache (a
  /// repeated sequence number).
  void queue(std::unique_lock<std::mutex>& lock, const std::shared_ptr<session_state>& s, const std::string& op,
             nlohmann::json message, reply_fn reply) {
    job j{s, op, std::move(message), std::move(reply), std::nullopt};
    if (wire::has(j.message, "seq")) {
      const auto seq = wire::number_of<std::uint64_t>(j.message, "seq");
      j.seq = seq;
      if (const auto run = s->run_of_seq.find(seq); op == "run" && run != s->run_of_seq.end()) {
        // A repeated run: the one it started, waited on again.
        nlohmann::json wait{{"run", run->second}, {"wait_ms", j.message.value("wait_ms", 0)}};
        add_waiter(lock, s, "run_wait", wait, std::move(j.reply));
        return;
      } else if (const auto it = s->answers.find(seq); it != s->answers.end()) {
        if (it->second) {
          auto a = *it->second;
          lock.unlock();
          deliver(j.reply, std::move(a));
        } else {
          // The first of the two is still being done: answered when it is.
          add_seq_waiter(s, seq, std::move(j.reply));
        }
        return;
      } else if (seq < s->evicted_below) {
        lock.unlock();
        deliver(j.reply, error(409, wire::protocol_kind,
                               fmt::format("seq: {} is older than the answers this session keeps", seq)));
        return;
      } else {
        s->answers[seq] = std::nullopt;
      }
    }
    if (op == "run") {
      // Started here, under the lock, so a repeat finds it.
      start_run(lock, std::move(j));
      return;
    }
    jobs_.push_back(std::move(j));
    work_ready_.notify_one();
    return;
  }

  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      work_ready_.wait(lock, [&] { return closing_ || !jobs_.empty(); });
      if (closing_) return;
      job j = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      answer a;
      try {
        a = perform(j);
      } catch (...) {
        a = answer_for(std::current_exception());
      }
      lock.lock();
      if (j.seq) {
        if (auto it = j.session->answers.find(*j.seq); it != j.session->answers.end()) {
          it->second = a;
          j.session->answer_bytes += a.body.size();
          forget_old_answers(*j.session, *j.seq);
        }
        wake(lock);
      }
      lock.unlock();
      deliver(j.reply, std::move(a));
      lock.lock();
    }
  }

  /// Keeps the answers within `replay_answers` and `replay_bytes`, the
  /// oldest forgotten first (never `newest`).
  void forget_old_answers(session_state& s, std::uint64_t newest) {
    while ((s.answers.size() > options_.replay_answers || s.answer_bytes > options_.replay_bytes) &&
           s.answers.begin()->first != newest) {
      const auto oldest = s.answers.begin();
      if (oldest->second) s.answer_bytes -= oldest->second->body.size();
      s.forget(oldest->first);
      s.answers.erase(oldest);
    }
  }

  /// The session's task named by a message's `task`; unknown_task for a
  /// task another session started (or none did).
  task_id own_task(const session_state& s, const nlohmann::json& message) {
    const task_id id(wire::text_of(message, "task"));
    std::lock_guard lock(mutex_);
    if (!s.tasks.contains(id)) throw unknown_task(id);
    return id;
  }

  /// std::invalid_argument naming the field when a request reaches past
  /// what this server lets a client ask for (`max_mode`, grants).
  void check_ceiling(const exec_spec& spec) const {
    if (options_.max_mode && spec.mode && is_wider(*spec.mode, *options_.max_mode))
      throw std::invalid_argument(fmt::format("mode: {} is wider than this server allows ({})",
                                              to_string(*spec.mode), to_string(*options_.max_mode)));
    if (!options_.allow_network_grants && !spec.network_grants.empty())
      throw std::invalid_argument("network_grants: this server widens no network allowlist");
  }

  answer perform(job& j) {
    session_state& s = *j.session;
    const auto& m = j.message;
    if (j.op == "resolve") {
      auto spec = executor_.resolve(wire::request_from_wire(wire::member(m, "request")));
      check_ceiling(spec);
      return ok({{"spec", wire::to_wire(spec)}});
    }
    if (j.op == "start") {
      auto spec = wire::spec_from_wire(wire::member(m, "spec"));
      check_ceiling(spec);
      {
        std::lock_guard lock(mutex_);
        ++starts_in_flight_;
      }
      std::optional<task_id> id;
      std::exception_ptr failed;
      try {
        id = bashexec::detail::task_id_of(executor_.start(spec));
      } catch (...) {
        failed = std::current_exception();
      }
      std::unique_lock lock(mutex_);
      if (id) {
        s.tasks.insert(*id);
        if (const auto it = early_.find(*id); it != early_.end()) {
          record_settled(s, it->second);
          early_.erase(it);
          wake(lock);
        }
      }
      if (--starts_in_flight_ == 0) early_.clear();
      if (failed) std::rethrow_exception(failed);
      const bool ended = s.ended;
      lock.unlock();
      if (ended) {  // closed meanwhile: it goes with the session
        executor_.kill(*id);
        throw unknown_task(*id);
      }
      return ok({{"task", id->value()}});
    }
    if (j.op == "facts") return ok({{"spill_directory", spill_directory()}});
    if (j.op == "get") return ok({{"snapshot", wire::to_wire(executor_.get(own_task(s, m)))}});
    if (j.op == "list") {
      std::set<task_id> mine;
      {
        std::lock_guard lock(mutex_);
        mine = s.tasks;
      }
      nlohmann::json tasks = nlohmann::json::array();
      for (const auto& task : executor_.list())
        if (mine.contains(task.id)) tasks.push_back(wire::to_wire(task));
      return ok({{"tasks", std::move(tasks)}});
    }
    if (j.op == "owner_of") {
      const auto owner = executor_.owner_of(own_task(s, m));
      return ok({{"owner", owner ? nlohmann::json(wire::encode_bytes(owner->value())) : nullptr}});
    }
    if (j.op == "may_access") {
      const auto id = own_task(s, m);
      std::optional<owner_token> caller;
      if (auto bytes = wire::optional_bytes_of(m, "caller")) caller = owner_token(std::move(*bytes));
      return ok({{"may_access", executor_.may_access(id, caller)}});
    }
    if (j.op == "read") return ok({{"read", wire::to_wire(executor_.read_output(own_task(s, m)))}});
    if (j.op == "kill") return ok({{"killed", executor_.kill(own_task(s, m))}});
    if (j.op == "close") return close(j.session);
    throw wire::protocol_error(fmt::format("op: unknown operation \"{}\"", j.op));
  }

  /// Ends a session: its runs stop, its tasks are killed and reaped.
  answer close(const std::shared_ptr<session_state>& s) {
    std::vector<task_id> tasks;
    std::vector<std::shared_ptr<run_state>> runs;
    {
      std::unique_lock lock(mutex_);
      if (s->ended) return ok({});
      s->ended = true;
      tasks.assign(s->tasks.begin(), s->tasks.end());
      for (auto& [id, run] : s->runs) {
        run->stop.request_stop();
        runs.push_back(run);
      }
      wake(lock);  // its waiters are answered: unknown session
    }
    for (const auto& id : tasks) {
      try {
        executor_.kill(id);
      } catch (...) {
      }
    }
    for (const auto& id : tasks) {
      try {
        executor_.wait(id);
      } catch (...) {
      }
    }
    for (auto& run : runs)
      if (run->thread.joinable()) run->thread.join();
    std::lock_guard lock(mutex_);
    sessions_.erase(s->id);
    return ok({});
  }

  // ---- foreground runs ----------------------------------------------------

  void start_run(std::unique_lock<std::mutex>& lock, job j) {
    const auto& s = j.session;
    std::size_t running = 0;
    for (const auto& [id, session] : sessions_)
      for (const auto& [run_id, run] : session->runs) running += run->settled ? 0 : 1;
    exec_spec spec;
    try {
      if (running >= options_.max_runs)
        throw std::runtime_error("busy");
      spec = wire::spec_from_wire(wire::member(j.message, "spec"));
      check_ceiling(spec);
    } catch (...) {
      auto a = running >= options_.max_runs
                   ? error(503, wire::busy_kind, fmt::format("{} runs are in flight, the server's most", running))
                   : answer_for(std::current_exception());
      if (j.seq) s->answers.erase(*j.seq);
      lock.unlock();
      deliver(j.reply, std::move(a));
      lock.lock();
      return;
    }
    auto run = std::make_shared<run_state>();
    run->id = fmt::format("r-{}", s->next_run++);
    spec.stop = run->stop.get_token();
    spec.progress = run->progress;
    s->runs[run->id] = run;
    if (j.seq) {
      s->run_of_seq[*j.seq] = run->id;
      s->answers.erase(*j.seq);
      while (s->run_of_seq.size() > options_.replay_answers) {
        // A repeat of a forgotten run is refused like any forgotten answer,
        // never started a second time.
        s->forget(s->run_of_seq.begin()->first);
        s->run_of_seq.erase(s->run_of_seq.begin());
      }
    }
    run->thread = std::thread([this, run, s, spec = std::move(spec)]() mutable {
      answer a;
      const auto counts = [&run](nlohmann::json body) {
        body["run"] = run->id;
        body["done"] = true;
        body["stdout_bytes"] = run->progress->stdout_bytes.load();
        body["stderr_bytes"] = run->progress->stderr_bytes.load();
        return body;
      };
      try {
        a = ok(counts({{"result", wire::to_wire(executor_.run(spec))}}));
      } catch (...) {
        a = answer_for(std::current_exception());
        a.body = counts(nlohmann::json::parse(a.body)).dump();
      }
      std::unique_lock settled_lock(mutex_);
      run->settled = std::move(a);
      s->settled_runs.push_back(run->id);
      wake(settled_lock);
    });
    nlohmann::json wait{{"run", run->id}, {"wait_ms", j.message.value("wait_ms", 0)}};
    add_waiter(lock, s, "run_wait", wait, std::move(j.reply));
  }

  answer abort_run(session_state& s, const nlohmann::json& message) {
    const auto it = s.runs.find(wire::text_of(message, "run"));
    if (it == s.runs.end()) return error(404, wire::unknown_task_kind, "no such run in this session");
    it->second->stop.request_stop();
    return ok({});
  }

  /// Forgets the oldest settled runs past `kept_runs` (their threads have
  /// returned or are about to; joined at destruction).
  void retire_runs(session_state& s) {
    while (s.settled_runs.size() > options_.kept_runs) {
      const auto it = s.runs.find(s.settled_runs.front());
      if (it != s.runs.end()) {
        retired_runs_.push_back(it->second);
        s.runs.erase(it);
      }
      s.settled_runs.pop_front();
    }
    // Join what has surely returned, so threads do not pile up.
    std::erase_if(retired_runs_, [](const std::shared_ptr<run_state>& run) {
      if (run.use_count() == 1 && run->thread.joinable()) {
        run->thread.join();
        return true;
      }
      return false;
    });
  }

  // ---- settled tasks ------------------------------------------------------

  void on_settled(const task_snapshot& task) {
    std::unique_lock lock(mutex_);
    for (auto& [id, s] : sessions_)
      if (s->tasks.contains(task.id)) {
        record_settled(*s, wire::to_wire(task));
        wake(lock);
        return;
      }
    // Settled before its start returned: kept until that start claims it.
    if (starts_in_flight_ > 0) early_[task.id] = wire::to_wire(task);
  }

  void record_settled(session_state& s, nlohmann::json snapshot) {
    const task_id id(snapshot["id"].get<std::string>());
    s.settled[id] = snapshot;
    s.settled_order.push_back(id);
    s.events.emplace_back(s.next_event++, std::move(snapshot));
    while (s.settled_order.size() > options_.kept_settled) {
      // Forgotten: its id is unknown_task from now on, as after retention.
      s.settled.erase(s.settled_order.front());
      s.tasks.erase(s.settled_order.front());
      s.settled_order.pop_front();
    }
  }

  // ---- waits ----------------------------------------------------------------

  void add_seq_waiter(const std::shared_ptr<session_state>& s, std::uint64_t seq, reply_fn reply) {
    waiters_.push_back({s, clock::now() + options_.max_wait,
                        [s, seq](bool at_deadline) -> std::optional<answer> {
                          const auto it = s->answers.find(seq);
                          if (it != s->answers.end() && it->second) return *it->second;
                          if (it == s->answers.end() || at_deadline)
                            return error(409, wire::protocol_kind, fmt::format("seq: {} was not answered", seq));
                          return std::nullopt;
                        },
                        std::move(reply)});
    time_changed_.notify_all();
  }

  void add_waiter(std::unique_lock<std::mutex>& lock, const std::shared_ptr<session_state>& s, const std::string& op,
                  const nlohmann::json& message, reply_fn reply) {
    const auto deadline = clock::now() + wait_of(message);
    std::function<std::optional<answer>(bool)> ready;
    if (op == "run_wait") {
      const std::string run_id = wire::text_of(message, "run");
      ready = [this, s, run_id](bool at_deadline) -> std::optional<answer> {
        const auto it = s->runs.find(run_id);
        if (it == s->runs.end()) return error(404, wire::unknown_task_kind, "no such run in this session (or no longer kept)");
        const auto& run = *it->second;
        if (run.settled) {
          auto a = *run.settled;
          retire_runs(*s);
          return a;
        }
        if (!at_deadline) return std::nullopt;
        return ok({{"run", run_id},
                   {"done", false},
                   {"stdout_bytes", run.progress->stdout_bytes.load()},
                   {"stderr_bytes", run.progress->stderr_bytes.load()}});
      };
    } else if (op == "wait") {
      const task_id id(wire::text_of(message, "task"));
      if (!s->tasks.contains(id)) {
        lock.unlock();
        deliver(reply, error(404, wire::unknown_task_kind, unknown_task(id).what()));
        lock.lock();
        return;
      }
      ready = [s, id](bool at_deadline) -> std::optional<answer> {
        if (const auto it = s->settled.find(id); it != s->settled.end())
          return ok({{"done", true}, {"snapshot", it->second}});
        if (!at_deadline) return std::nullopt;
        return ok({{"done", false}});
      };
    } else {  // events
      const auto after = wire::number_of<std::uint64_t>(message, "after");
      // What the client has seen it will not ask for again.
      while (!s->events.empty() && s->events.front().first <= after) s->events.pop_front();
      ready = [s, after](bool at_deadline) -> std::optional<answer> {
        if (s->events.empty() && !at_deadline) return std::nullopt;
        nlohmann::json events = nlohmann::json::array();
        std::uint64_t next = after;
        for (const auto& [cursor, snapshot] : s->events) {
          if (cursor <= after) continue;
          if (events.size() >= 256) break;
          events.push_back(snapshot);
          next = cursor;
        }
        return ok({{"events", std::move(events)}, {"cursor", next}});
      };
    }
    if (auto now = ready(deadline <= clock::now())) {
      lock.unlock();
      deliver(reply, std::move(*now));
      lock.lock();
      return;
    }
    waiters_.push_back({s, deadline, std::move(ready), std::move(reply)});
    time_changed_.notify_all();
  }

  /// Answers every waiter that can be answered now. Called with the lock
  /// held; releases it while replying.
  void wake(std::unique_lock<std::mutex>& lock, bool deadlines_only = false) {
    std::vector<std::pair<reply_fn, answer>> due;
    const auto now = clock::now();
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      std::optional<answer> a;
      if (it->session->ended)
        a = error(404, wire::unknown_session_kind, "the session was closed");
      else if (!deadlines_only || it->deadline <= now)
        a = it->ready(it->deadline <= now);
      if (a) {
        due.emplace_back(std::move(it->reply), std::move(*a));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    if (due.empty()) return;
    lock.unlock();
    for (auto& [reply, a] : due) deliver(reply, std::move(a));
    lock.lock();
  }

  /// The timer thread: answers waiters at their deadlines and ends idle
  /// sessions.
  void keep_time() {
    std::unique_lock lock(mutex_);
    while (!closing_) {
      auto next = clock::now() + std::chrono::seconds(1);
      for (const auto& w : waiters_) next = std::min(next, w.deadline);
      time_changed_.wait_until(lock, next);
      if (closing_) return;
      wake(lock, true);
      const auto now = clock::now();
      for (auto& [id, s] : sessions_) {
        if (s->ended || now - s->last_seen < options_.idle_timeout) continue;
        const bool waiting = std::any_of(waiters_.begin(), waiters_.end(),
                                         [&](const waiter& w) { return w.session == s; });
        if (waiting) continue;
        s->last_seen = now;  // queued once
        jobs_.push_back({s, "close", nlohmann::json::object(), [](unsigned, std::string) {}, std::nullopt});
        work_ready_.notify_one();
      }
    }
  }

  Executor& executor_;
  executor_api_options options_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable time_changed_;
  std::map<std::string, std::shared_ptr<session_state>> sessions_;
  std::deque<job> jobs_;
  std::vector<waiter> waiters_;
  std::map<task_id, nlohmann::json> early_;
  std::size_t starts_in_flight_ = 0;
  std::vector<std::shared_ptr<run_state>> retired_runs_;
  bool stopping_ = false;
  bool closing_ = false;
  std::vector<std::thread> workers_;
  std::thread timer_;
  subscription settled_;
};

}  // namespace detail::executor_api

/// The executor protocol over `executor` (which must outlive the result),
/// for `mcp_http_options::executor_api`.
template <executor Executor>
std::shared_ptr<executor_api_backend> executor_api(Executor& executor, executor_api_options options = {}) {
  return std::make_shared<detail::executor_api::service<Executor>>(executor, std::move(options));
}

}  // namespace bashexec::server

// detail/engine/background_task: one background task (contract 6, 9, 16,
// 17) — its child, its facts and its read offsets — as a client of the
// executor's reactor. It knows its executor only through `task_host` (told
// when the task settles, asked to wake the reactor), so it lives below the
// executor rather than nested in it.
//
// Threading: every member takes the task's own mutex; the reactor calls the
// client members on its thread. A stop callback (the request's stop token)
// takes only this mutex and, through the host, the reactor's.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <fmt/core.h>

#include "bashexec/confinement.hpp"
#include "bashexec/detail/engine/child_run.hpp"
#include "bashexec/detail/engine/launch_builder.hpp"
#include "bashexec/detail/engine/reactor.hpp"
#include "bashexec/detail/engine/verdict.hpp"
#include "bashexec/detail/text/stderr_section.hpp"
#include "bashexec/detail/text/utf8_boundary.hpp"
#include "bashexec/ids.hpp"
#include "bashexec/output.hpp"
#include "bashexec/request.hpp"
#include "bashexec/result.hpp"

namespace bashexec::detail {

/// What a background task needs of its executor.
class task_host {
 public:
  /// The task settled with `final_facts` (on the reactor thread, or in
  /// `start` for a spawn that failed); `held` is the memory it keeps.
  virtual void task_settled(task_snapshot final_facts, std::uint64_t serial, std::uint64_t held) = 0;
  /// A task's group is being stopped: the reactor must look at its timers.
  virtual void wake_reactor() = 0;

 protected:
  ~task_host() = default;
};

template <class Collector, class Confinement>
class background_task final : public reactor::client {
 public:
  background_task(task_host& host, const launch_builder& builder, const Confinement& confinement,
                  const exec_spec& spec, std::optional<owner_token> owner)
      : host_(host),
        builder_(builder),
        confinement_(confinement),
        owner_token_(std::move(owner)),
        spec_stdin_(spec.stdin_data),
        cap_(spec.stdout_max_bytes) {
    snapshot_.command = spec.command;
    snapshot_.owner = owner_token_;
  }

  void set_id(const task_id& id, std::uint64_t serial) {
    std::lock_guard lock(mutex_);
    snapshot_.id = id;
    serial_ = serial;
  }

  void begin(process_handle process, prepared_launch launch) {
    snapshot_.sandbox = launch.info;
    snapshot_.containment = launch.containment;
    builder_.start_child(child_, std::move(process), launch, spec_stdin_.value_or(std::string{}), cap_,
                         run_kind::background, std::nullopt);
    try {
      egress_ = builder_.open_egress(launch);
    } catch (...) {
      child_.reset();  // killed and reaped: a command without its proxy never runs on
      throw;
    }
    if (egress_) snapshot_.network.emplace();
    confined_ = std::move(launch.confined);
    spec_stdin_.reset();
  }

  /// The reactor could not take the child: kill and reap it now, and settle
  /// the task as killed with the reason.
  void abandon(std::string_view reason) {
    std::lock_guard lock(mutex_);
    child_.reset();  // child_run's destructor kills the group and reaps the shell
    snapshot_.start_error = fmt::format("the executor could not watch it ({}), so it was killed", reason);
    spawn_error_ = fmt::format("bashexec: could not watch the command: {}\n", reason);
  }

  /// A spawn that failed: the task is settled as killed, the reason in its
  /// stderr; under a confinement that is a runner failure.
  void fail_to_start(std::string_view reason, const prepared_launch& launch, bool confined) {
    snapshot_.start_error = std::string(reason);
    spawn_error_ = fmt::format("bashexec: could not start the command: {}\n", reason);
    snapshot_.sandbox = launch.info;
    snapshot_.containment = launch.containment;
    if (confined) snapshot_.sandbox->runner_failed = true;
  }

  bool running() const { return child_.has_value(); }

  const std::optional<owner_token>& owner() const noexcept { return owner_token_; }

  task_snapshot snapshot() const {
    std::lock_guard lock(mutex_);
    task_snapshot facts = snapshot_;
    if (egress_) facts.network = egress_->snapshot();  // running: the attempts so far
    return facts;
  }

  bool stop(stop_cause cause) {
    std::lock_guard lock(mutex_);
    if (!child_ || child_->settled()) return false;
    return child_->request_stop(cause, clock::now());
  }

  /// Stops the task when `stop` is requested (contract 9). Call once, with
  /// the registry lock held; the callback may run right here.
  void watch_stop(const std::stop_token& stop) { on_stop_.emplace(stop, stop_relay{this}); }

  /// No stop callback runs after this returns (one in flight is waited
  /// for). Call without holding this task's mutex: the callback takes it.
  void unwatch_stop() { on_stop_.reset(); }

  /// Disposal of a settled task: members that detached from its output
  /// (`daemon >/dev/null &`) and outlived the shell die with the executor.
  void kill_leftovers() {
    std::lock_guard lock(mutex_);
    if (child_ && leftovers_) child_->kill_leftovers();
  }

  std::optional<task_snapshot> wait(std::optional<std::chrono::milliseconds> timeout) {
    std::unique_lock lock(mutex_);
    auto done = [this] { return settled_; };
    if (!timeout)
      settled_cv_.wait(lock, done);
    else if (!settled_cv_.wait_for(lock, *timeout, done))
      return std::nullopt;
    return snapshot_;
  }

  /// What the task printed since the last read (contract 6).
  task_read read() {
    std::lock_guard lock(mutex_);
    task_read r;
    r.task = snapshot_;
    if (!child_) {
      if (!spawn_error_read_) append_stderr_section(r.delta, spawn_error_);
      spawn_error_read_ = true;
      return r;
    }
    auto out = child_->out().since(out_offset_);
    auto err = child_->err().since(err_offset_);
    if (!settled_) {
      // The rest of a character split across pipe reads arrives later:
      // keep its first bytes for the next read rather than split it.
      out.bytes.resize(out.bytes.size() - incomplete_utf8_suffix(out.bytes));
      err.bytes.resize(err.bytes.size() - incomplete_utf8_suffix(err.bytes));
    }
    out_offset_ = out.begin + out.bytes.size();
    err_offset_ = err.begin + err.bytes.size();
    r.lossy = out.lossy || err.lossy;
    r.delta = std::move(out.bytes);
    if (!err.bytes.empty()) append_stderr_section(r.delta, err.bytes);
    // A path is named only while the file exists: the spill budget may
    // have removed a settled task's files to make room.
    auto existing = [](std::optional<std::filesystem::path> path) {
      std::error_code ignored;
      if (path && !std::filesystem::exists(*path, ignored)) path.reset();
      return path;
    };
    r.stdout_spill_path = existing(child_->out().spill_path());
    r.stderr_spill_path = existing(child_->err().spill_path());
    return r;
  }

  // reactor::client — called on the reactor thread.
  int fd(child_source source) override {
    std::lock_guard lock(mutex_);
    return child_ ? child_->fd(source) : -1;
  }
  void on_event(child_source source, char* scratch, std::size_t size, clock::time_point now) override {
    std::lock_guard lock(mutex_);
    child_->dispatch(source, scratch, size, now);
  }
  std::optional<clock::time_point> deadline() override {
    std::lock_guard lock(mutex_);
    return child_->next_deadline();
  }
  void on_time(clock::time_point now) override {
    std::lock_guard lock(mutex_);
    child_->on_time(now);
  }
  bool settled() override {
    std::lock_guard lock(mutex_);
    return child_->settled();
  }
  void on_failure(const char* reason) noexcept override {
    try {
      abandon(reason);
    } catch (...) {
      std::lock_guard lock(mutex_);
      child_.reset();  // killed and reaped all the same, without the words
    }
  }

  /// Stamps the final facts (contract 17), then hands them to the host
  /// (listeners, then the retention policy).
  void on_settled() override {
    task_snapshot final_facts;
    std::uint64_t held = 0;
    std::uint64_t serial = 0;
    {
      std::lock_guard lock(mutex_);
      stamp();
      settled_ = true;
      final_facts = snapshot_;
      held = memory_held();
      serial = serial_;
    }
    settled_cv_.notify_all();
    host_.task_settled(std::move(final_facts), serial, held);
  }

  /// Whether members that detached from the task's output are still live
  /// (a settled task that still has processes is not forgotten: disposal
  /// must reach them). Once they are gone the answer stays no.
  bool holds_live_members() {
    std::lock_guard lock(mutex_);
    if (leftovers_ && !(child_ && child_->has_live_members())) leftovers_ = false;
    return leftovers_;
  }

  /// The retention policy forgot this task: remove its spill files now
  /// (calls in progress on it see the paths withheld); its memory goes
  /// with the last reference.
  void forget_output() {
    std::lock_guard lock(mutex_);
    if (!child_) return;
    for (const auto& path : {child_->out().spill_path(), child_->err().spill_path()})
      if (path) builder_.spills().forget(*path);
  }

 private:
  std::uint64_t memory_held() const {
    std::uint64_t held = snapshot_.command.capacity() + spawn_error_.capacity();
    if (child_) held += held_bytes(child_->out()) + held_bytes(child_->err());
    return held;
  }

  void stamp() {
    if (!child_) {
      snapshot_.status = task_status::killed;
      return;
    }
    leftovers_ = child_->has_live_members();
    const collected_output out = child_->out().finish();  // closes the spill files; the tails stay readable
    const collected_output err = child_->err().finish();
    const verdict v = classify(confinement_, confined_, child_->exit(), err.text, out.text);
    const exit_facts exit = v.command_exit.value_or(child_->exit());
    snapshot_.exit_code = exit.exit_code;
    snapshot_.signal = exit.signal;
    snapshot_.status = exit.signal ? task_status::killed : task_status::completed;
    if (v.runner_failure)
      snapshot_.sandbox->runner_failed = true;
    else if (v.denied)
      snapshot_.sandbox->denied = true;
    confined_.reset();  // the status pipe is read; keep no descriptor per settled task
    if (egress_) {
      snapshot_.network = builder_.close_egress(*egress_);
      egress_.reset();
    }
  }

  task_host& host_;
  const launch_builder& builder_;
  const Confinement& confinement_;
  mutable std::mutex mutex_;
  std::condition_variable settled_cv_;
  task_snapshot snapshot_;
  std::optional<owner_token> owner_token_;
  std::optional<std::string> spec_stdin_;
  std::size_t cap_ = 0;
  std::optional<confined_launch> confined_;
  std::optional<child_run<Collector>> child_;
  std::unique_ptr<egress_session> egress_;  // allowlist: this task's proxy, until it settles
  std::uint64_t out_offset_ = 0;
  std::uint64_t err_offset_ = 0;
  std::string spawn_error_;
  bool spawn_error_read_ = false;
  bool settled_ = false;
  bool leftovers_ = false;  // live group members when the task settled (until they are gone)
  std::uint64_t serial_ = 0;

  /// Runs inside `request_stop`, on whichever thread asked: it takes only
  /// this task's mutex and the reactor's, never the registry's.
  struct stop_relay {
    background_task* task;
    void operator()() const noexcept {
      try {
        if (task->stop(stop_cause::aborted)) task->host_.wake_reactor();
      } catch (...) {
        // A stop callback must not throw (std::terminate). The group was
        // signalled or it is already gone; kill and disposal remain.
      }
    }
  };
  // Last: unregistered first, while everything the callback uses exists.
  std::optional<std::stop_callback<stop_relay>> on_stop_;
};

}  // namespace bashexec::detail

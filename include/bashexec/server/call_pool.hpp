// server/call_pool: the worker slots of a tool server. Each call runs on a
// thread of its own that holds one of `max_in_flight` slots, and the reader
// waits for a free slot before it reads on, so a long foreground `bash`
// never blocks a `bash_output` on the next line. Shared by json_lines_server
// and mcp_server.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "bashexec/server/line_io.hpp"
#include "bashexec/tools/approval.hpp"

namespace bashexec::server {

/// The worker slots of a server: each call runs on a thread of its own that
/// holds one of `max_in_flight` slots, and the reader waits for a free slot
/// before it reads on. `stop()` (a signal, end of input under MCP) wakes
/// every waiter and requests the stop every call's token sees; `join()`
/// waits for the calls to answer. No wait here outlasts the closing flag, so
/// a writer that gives up on stdout (line_io.hpp) ends them all.
class call_pool {
 public:
  call_pool(std::size_t max_in_flight, closing_flag& closing) : max_in_flight_(max_in_flight), closing_(closing) {}
  call_pool(const call_pool&) = delete;
  call_pool& operator=(const call_pool&) = delete;
  ~call_pool() { join(); }

  /// Waits for a free slot; false when the server is closing instead.
  bool acquire() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return in_flight_ < max_in_flight_ || closing_.is_set(); });
    if (closing_.is_set()) return false;
    ++in_flight_;
    return true;
  }

  /// The stop every call sees when the server closes.
  std::stop_token stop_token() const noexcept { return stop_.get_token(); }

  /// Runs `ask` without the calling worker's slot: a call waiting for a
  /// person holds none, otherwise a full house of such calls would stop the
  /// reader before it reads their answers. Never throws (a failure is
  /// `unavailable`).
  template <class Ask>
  approval_outcome without_slot(Ask&& ask) noexcept {
    release();
    approval_outcome outcome = approval_outcome::cancelled;
    try {
      outcome = std::forward<Ask>(ask)();
    } catch (...) {
      outcome = approval_outcome::unavailable;
    }
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return in_flight_ < max_in_flight_ || closing_.is_set(); });
      ++in_flight_;  // even when closing: the worker releases it once more
    }
    return outcome;
  }

  /// Runs `body` on its own thread, which holds the slot `acquire` took and
  /// releases it when `body` returns (finished threads are joined as new
  /// ones start). When no thread can be started, the slot is released and
  /// `failed` gets the reason; neither function may throw.
  template <class Body, class Failed>
  void launch(Body&& body, Failed&& failed) noexcept {
    std::erase_if(workers_, [](worker& w) {
      if (!w.finished->load()) return false;
      w.thread.join();
      return true;
    });
    bool slot_held = true;
    try {
      workers_.reserve(workers_.size() + 1);  // push_back below must not throw with a live thread
      auto finished = std::make_shared<std::atomic<bool>>(false);
      std::thread thread;
      try {
        thread = std::thread([this, body = std::forward<Body>(body), finished]() mutable {
          body();
          release();
          finished->store(true);
        });
      } catch (const std::exception& e) {
        release();
        slot_held = false;
        failed(fmt::format("internal error: {}; the call did not run", e.what()));
        return;
      }
      workers_.push_back({std::move(thread), std::move(finished)});
    } catch (...) {
      if (slot_held) release();
      failed("internal error: out of memory; the call did not run");
    }
  }

  /// Wakes every waiter (to see the closing flag) and stops every call;
  /// safe from any thread.
  void stop() noexcept {
    wake();
    stop_.request_stop();
  }

  /// Wakes every waiter, to see the closing flag, without stopping any
  /// call (the writer, when stdout is gone, from a thread that may be a
  /// call's own).
  void wake() noexcept {
    { std::lock_guard lock(mutex_); }  // no waiter misses the closing flag
    changed_.notify_all();
  }

  /// Waits until no call holds a slot (every call launched so far has
  /// answered, or waits for a person) or the server is closing.
  void wait_idle() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return in_flight_ == 0 || closing_.is_set(); });
  }

  /// Waits for every call's thread (call `stop` first to hurry them).
  void join() {
    for (auto& w : workers_)
      if (w.thread.joinable()) w.thread.join();
    workers_.clear();
  }

  /// Gives back a slot `acquire` took for a call that will not start.
  void release() noexcept {
    {
      std::lock_guard lock(mutex_);
      --in_flight_;
    }
    changed_.notify_all();
  }

 private:
  struct worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };

  std::size_t max_in_flight_;
  closing_flag& closing_;
  std::stop_source stop_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t in_flight_ = 0;
  std::vector<worker> workers_;
};

}  // namespace bashexec::server

// detail/engine/listeners: completion listeners with RAII subscriptions, called on
// a notifier thread of their own — never on the reactor thread, so a slow or
// blocking listener (one that calls `wait`, or writes to a full pipe) cannot
// stall other tasks' I/O and kills. A throwing listener is reported to the
// error sink and the others still run; once silenced (disposal), none fires
// again (contract 10). Unsubscribing waits for a call of that listener that
// is in progress on another thread, so its state may be destroyed right after.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/core.h>

namespace bashexec::detail {

template <class Event>
class listener_hub {
 public:
  using listener = std::function<void(const Event&)>;
  using error_sink = std::function<void(std::string_view)>;

  explicit listener_hub(error_sink sink) : sink_(std::move(sink)) {}
  listener_hub(const listener_hub&) = delete;
  listener_hub& operator=(const listener_hub&) = delete;
  ~listener_hub() { shutdown(); }

  std::uint64_t add(listener fn) {
    std::lock_guard lock(mutex_);
    listeners_.emplace_back(++next_id_, std::make_shared<listener>(std::move(fn)));
    return next_id_;
  }

  /// Unsubscribes; returns once no call of this listener is in progress
  /// (unless called from the listener itself).
  void remove(std::uint64_t id) {
    std::unique_lock lock(mutex_);
    std::erase_if(listeners_, [id](const auto& entry) { return entry.first == id; });
    if (std::this_thread::get_id() == thread_.get_id()) return;
    idle_.wait(lock, [&] { return calling_ != id; });
  }

  /// Disposal has begun: queued events are dropped and nothing fires again.
  void silence() {
    std::lock_guard lock(mutex_);
    silenced_ = true;
    queue_.clear();
  }

  /// Queues `event` for the listeners; returns at once.
  void notify(Event event) {
    std::lock_guard lock(mutex_);
    if (silenced_ || stopping_) return;
    if (listeners_.empty()) return;
    queue_.push_back(std::move(event));
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    wake_.notify_one();
  }

  /// Ends the notifier thread after the call in progress, if any.
  void shutdown() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      queue_.clear();
      wake_.notify_one();
    }
    if (thread_.joinable() && std::this_thread::get_id() != thread_.get_id()) thread_.join();
  }

  void report(std::string_view message) const {
    if (sink_)
      sink_(message);
    else
      fmt::print(stderr, "{}\n", message);
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      Event event = std::move(queue_.front());
      queue_.pop_front();
      // Each listener is called outside the lock, so it may subscribe,
      // unsubscribe or call back into the executor.
      auto current = listeners_;
      for (const auto& [id, fn] : current) {
        if (silenced_ || stopping_) break;
        if (std::none_of(listeners_.begin(), listeners_.end(), [id = id](const auto& e) { return e.first == id; }))
          continue;  // unsubscribed meanwhile
        calling_ = id;
        lock.unlock();
        call(*fn, event);
        lock.lock();
        calling_ = 0;
        idle_.notify_all();
      }
    }
  }

  void call(const listener& fn, const Event& event) const noexcept {
    try {
      fn(event);
    } catch (const std::exception& e) {
      report(fmt::format("bashexec: a task-done listener threw: {}", e.what()));
    } catch (...) {
      report("bashexec: a task-done listener threw a non-standard exception");
    }
  }

  error_sink sink_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::vector<std::pair<std::uint64_t, std::shared_ptr<listener>>> listeners_;
  std::deque<Event> queue_;
  std::thread thread_;
  std::uint64_t next_id_ = 0;
  std::uint64_t calling_ = 0;  // id of the listener being called, 0 for none
  bool silenced_ = false;
  bool stopping_ = false;
};

}  // namespace bashexec::detail

// detail/listeners: completion listeners with RAII subscriptions. A throwing
// listener is reported to the error sink and the others still run; once
// silenced (disposal), none fires again (contract 10).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace bashexec::detail {

template <class Event>
class listener_hub : public std::enable_shared_from_this<listener_hub<Event>> {
 public:
  using listener = std::function<void(const Event&)>;
  using error_sink = std::function<void(std::string_view)>;

  explicit listener_hub(error_sink sink) : sink_(std::move(sink)) {}

  std::uint64_t add(listener fn) {
    std::lock_guard lock(mutex_);
    listeners_.emplace_back(++next_id_, std::make_shared<listener>(std::move(fn)));
    return next_id_;
  }

  void remove(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    std::erase_if(listeners_, [id](const auto& entry) { return entry.first == id; });
  }

  void silence() {
    std::lock_guard lock(mutex_);
    silenced_ = true;
  }

  /// Calls every listener outside the lock, so a listener may subscribe,
  /// unsubscribe or query the executor.
  void notify(const Event& event) {
    std::vector<std::shared_ptr<listener>> current;
    {
      std::lock_guard lock(mutex_);
      if (silenced_) return;
      for (const auto& entry : listeners_) current.push_back(entry.second);
    }
    for (const auto& fn : current) {
      {
        std::lock_guard lock(mutex_);
        if (silenced_) return;
      }
      try {
        (*fn)(event);
      } catch (const std::exception& e) {
        report(fmt::format("bashexec: a task-done listener threw: {}", e.what()));
      } catch (...) {
        report("bashexec: a task-done listener threw a non-standard exception");
      }
    }
  }

  void report(std::string_view message) const {
    if (sink_)
      sink_(message);
    else
      fmt::print(stderr, "{}\n", message);
  }

 private:
  error_sink sink_;
  std::mutex mutex_;
  std::vector<std::pair<std::uint64_t, std::shared_ptr<listener>>> listeners_;
  std::uint64_t next_id_ = 0;
  bool silenced_ = false;
};

}  // namespace bashexec::detail

// detail/engine/task_registry: an executor's background tasks by id, and
// the retention policy that forgets settled ones (executor_config::retention:
// count, bytes held, age; oldest settled first — see docs/architecture.md
// "Retention of settled tasks").
//
// Ids are `bash-N`, never reused, so telling a forgotten id from one never
// issued costs no memory: every N up to the last issued that is not held
// was forgotten (task_forgotten, an unknown_task). Records are shared: a
// call in progress on a task forgotten meanwhile finishes on its own
// reference, and the record is freed when the last such call returns.
//
// `Task` provides set_id(id, serial), owner(), holds_live_members() and
// forget_output() (see background_task.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "bashexec/config.hpp"
#include "bashexec/detail/engine/reactor.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/ids.hpp"

namespace bashexec::detail {

/// "1 h", "90 s", "250 ms": a duration as a reader would write it.
BASHEXEC_DECL std::string duration_text(std::chrono::milliseconds d);

/// "16 MiB", "512 KiB", "1000 bytes".
BASHEXEC_DECL std::string bytes_text(std::uint64_t bytes);

/// The retention policy in words, as task_forgotten messages give it.
BASHEXEC_DECL std::string retention_text(const task_retention& r);

/// `bash-N` → N, for ids an executor could have issued (canonical decimal,
/// no sign or leading zero); empty otherwise.
BASHEXEC_DECL std::optional<std::uint64_t> serial_of(const task_id& id);

template <class Task>
class task_registry {
 public:
  explicit task_registry(const task_retention& limits) : limits_(limits) {}
  task_registry(const task_registry&) = delete;
  task_registry& operator=(const task_registry&) = delete;

  /// Issues the next id to `task` and holds it. `on_registered(task)` runs
  /// under the registry lock (disposal cannot race it). Throws
  /// infrastructure_error once disposal began.
  template <class OnRegistered>
  task_id add(const std::shared_ptr<Task>& task, reactor& driver, OnRegistered&& on_registered) {
    std::lock_guard lock(mutex_);
    if (disposing_) throw infrastructure_error("start: the executor is being disposed of");
    if (!housekeeper_added_) {
      driver.add(housekeeper_);  // no descriptors: it only keeps the retention's age deadline
      housekeeper_added_ = true;
    }
    const std::uint64_t serial = ++last_id_;
    task_id id(fmt::format("bash-{}", serial));
    task->set_id(id, serial);
    tasks_.emplace(serial, task);
    on_registered(*task);
    return id;
  }

  /// Lets go of task `serial` at once, as if forgotten, without removing
  /// its spill files (a foreground run that settled reports them). The
  /// record is freed outside the lock, with the last reference.
  void release(std::uint64_t serial) {
    std::shared_ptr<Task> last;
    std::lock_guard lock(mutex_);
    if (auto it = tasks_.find(serial); it != tasks_.end()) {
      last = std::move(it->second);
      tasks_.erase(it);
    }
  }

  /// The task of `id`. Throws task_forgotten or unknown_task.
  std::shared_ptr<Task> find(const task_id& id) const {
    const auto serial = serial_of(id);
    {
      std::lock_guard lock(mutex_);
      if (serial) {
        if (auto it = tasks_.find(*serial); it != tasks_.end()) return it->second;
        if (*serial <= last_id_) throw task_forgotten(id, retention_text(limits_));
      }
    }
    throw unknown_task(id);
  }

  /// Every task not forgotten, in start order.
  std::vector<std::shared_ptr<Task>> all() const {
    std::lock_guard lock(mutex_);
    std::vector<std::shared_ptr<Task>> out;
    out.reserve(tasks_.size());
    for (auto& [serial, task] : tasks_) out.push_back(task);
    return out;
  }

  /// The stored owner; empty for unknown or forgotten ids.
  std::optional<owner_token> owner_of(const task_id& id) const {
    const auto serial = serial_of(id);
    if (!serial) return std::nullopt;
    std::lock_guard lock(mutex_);
    auto it = tasks_.find(*serial);
    if (it == tasks_.end()) return std::nullopt;
    return it->second->owner();
  }

  /// Disposal: no task is added or forgotten any more; `each(task)` runs for
  /// every task under the registry lock. The reactor may then end without
  /// waiting for the housekeeper.
  template <class Each>
  void dispose(Each&& each) {
    {
      std::lock_guard lock(mutex_);
      disposing_ = true;  // a listener's late `start` must not add a task nobody stops
      for (auto& [serial, task] : tasks_) each(*task);
    }
    housekeeper_.retire();
  }

  /// A task settled (on the reactor thread, or in `start` for a spawn that
  /// failed): it joins the retention queue, which is then enforced.
  void settled(std::uint64_t serial, std::uint64_t bytes) {
    const auto now = clock::now();
    {
      std::lock_guard lock(mutex_);
      if (disposing_ || serial == 0) return;
      settled_.push_back({serial, now, bytes});
      settled_bytes_ += bytes;
    }
    prune(now);
  }

 private:
  /// Keeps the retention's age deadline on the reactor thread: a reactor
  /// client with no descriptors whose deadline is the next time a settled
  /// task may be forgotten.
  class housekeeper final : public reactor::client {
   public:
    explicit housekeeper(task_registry& owner) : registry_(owner) {}
    /// Disposal: the reactor may end without waiting for this client.
    void retire() { retired_ = true; }

    int fd(child_source) override { return -1; }
    void on_event(child_source, char*, std::size_t, clock::time_point) override {}
    std::optional<clock::time_point> deadline() override {
      std::lock_guard lock(registry_.mutex_);
      return registry_.next_prune_at_;
    }
    void on_time(clock::time_point now) override { registry_.prune(now); }
    bool settled() override { return retired_; }
    void on_settled() override {}
    void on_failure(const char*) noexcept override {}  // the next prune runs on the next call

   private:
    task_registry& registry_;
    std::atomic<bool> retired_{false};
  };

  /// A settled task in settle order, as the retention policy sees it.
  struct settled_entry {
    std::uint64_t serial;
    clock::time_point at;
    std::uint64_t bytes;
    /// A task with live detached members is looked at again only after
    /// this (a /proc scan each time otherwise).
    clock::time_point recheck_at{};
  };

  /// Enforces the retention limits: forgets the settled tasks over them,
  /// oldest settled first, and sets the next age deadline.
  void prune(clock::time_point now) {
    std::vector<std::shared_ptr<Task>> forgotten;
    {
      std::lock_guard lock(mutex_);
      if (disposing_) {
        next_prune_at_.reset();  // disposal forgets everything at once
        return;
      }
      std::optional<clock::time_point> recheck;
      std::size_t i = 0;
      while (i < settled_.size()) {
        settled_entry& entry = settled_[i];
        // The count and the bytes never take the task that settled last: a
        // burst of tasks with live detached members must not starve it.
        const bool newest = i + 1 == settled_.size();
        const bool aged = now - entry.at >= limits_.max_age;
        const bool over_count = settled_.size() > limits_.max_tasks && !newest;
        const bool over_bytes = settled_bytes_ > limits_.max_bytes && !newest;
        if (!aged && !over_count && !over_bytes) break;
        auto it = tasks_.find(entry.serial);
        if (it != tasks_.end()) {
          if (now < entry.recheck_at || it->second->holds_live_members()) {
            if (now >= entry.recheck_at) entry.recheck_at = now + std::chrono::seconds(1);
            recheck = recheck ? std::min(*recheck, entry.recheck_at) : entry.recheck_at;
            ++i;
            continue;
          }
          forgotten.push_back(std::move(it->second));
          tasks_.erase(it);
        }
        settled_bytes_ -= std::min(settled_bytes_, entry.bytes);
        settled_.erase(settled_.begin() + static_cast<std::ptrdiff_t>(i));
      }
      // The next age deadline: the first entry not looked at yet, or a
      // pinned entry's next look, whichever comes first.
      next_prune_at_ = recheck;
      if (i < settled_.size()) {
        const auto expiry = settled_[i].at + limits_.max_age;
        next_prune_at_ = next_prune_at_ ? std::min(*next_prune_at_, expiry) : expiry;
      }
    }
    // Outside the registry lock: file removal, and the memory of every task
    // nobody else is reading goes here.
    for (auto& task : forgotten) task->forget_output();
  }

  const task_retention& limits_;
  mutable std::mutex mutex_;
  std::uint64_t last_id_ = 0;
  bool disposing_ = false;
  /// Every task not forgotten, by serial (start order).
  std::map<std::uint64_t, std::shared_ptr<Task>> tasks_;
  /// The settled ones among them, in settle order (the retention queue).
  std::deque<settled_entry> settled_;
  std::uint64_t settled_bytes_ = 0;
  std::optional<clock::time_point> next_prune_at_;
  housekeeper housekeeper_{*this};
  bool housekeeper_added_ = false;
};

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/engine/impl/task_registry.ipp"
#endif

// The bodies of spawn/prespawned.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/spawn/prespawned.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <system_error>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "bashexec/detail/kernel/cgroup.hpp"
#include "bashexec/detail/kernel/clone_into_cgroup.hpp"
#include "bashexec/spawn/detail/warm_process.hpp"
#include "bashexec/spawn/fork_exec.hpp"

namespace bashexec {

namespace detail {

/// A pool key — what a waiting process did before its command was known —
/// and its waiting processes.
struct prespawn_entry {
  /// The key's plan: its hooks and read_only_paths (nothing else is read).
  launch_plan key;
  std::shared_ptr<const void> hook_owner;
  std::deque<warm_process> ready;
  std::chrono::steady_clock::time_point last_used;
  std::chrono::steady_clock::time_point retry_at;  // after a failed start

  bool matches(const launch_plan& plan) const {
    if (plan.hooks.size() != key.hooks.size()) return false;
    for (std::size_t i = 0; i < key.hooks.size(); ++i)
      if (plan.hooks[i].run != key.hooks[i].run || plan.hooks[i].context != key.hooks[i].context ||
          plan.hooks[i].stage != key.hooks[i].stage)
        return false;
    return plan.read_only_paths == key.read_only_paths;
  }
};

}  // namespace detail

struct prespawned::pool {
  explicit pool(const config& c) : settings(c) {}
  ~pool() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    if (worker.joinable()) worker.join();
    keys.clear();  // kills and reaps every waiting process
  }

  const config settings;
  mutable std::mutex mutex;
  std::condition_variable wake;    // the worker: a key wants refilling, or stop
  std::condition_variable filled;  // wait_until_warm
  std::vector<std::shared_ptr<detail::prespawn_entry>> keys;
  /// Under cgroup containment: the executor's cgroup, learnt from the
  /// first plan's per-spawn cgroup (its parent). Each waiting process gets
  /// a cgroup of its own there and is born in it (warm_process::start).
  std::filesystem::path cgroup_parent;
  std::uint64_t homes_made = 0;
  counters totals;
  bool stopping = false;
  std::thread worker;

  void count(std::uint64_t counters::*which) {
    std::lock_guard lock(mutex);
    ++(totals.*which);
  }

  /// Whether `plan` may be served from (and refilled into) a pool.
  static bool poolable(const launch_plan& plan) noexcept {
    return (plan.hooks.empty() || plan.hook_owner) &&
           plan.inherited_fds.size() + 3 <= static_cast<std::size_t>(detail::max_claim_fds);
  }

  /// A waiting process for `plan`'s key, if one is; the stopped or dead
  /// ones found on the way go to `dropped` (to be reaped outside the lock),
  /// so that no later call meets them.
  std::optional<detail::warm_process> take(const launch_plan& plan, std::vector<detail::warm_process>& dropped) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mutex);
    if (cgroup_parent.empty() && plan.cgroup_fd >= 0) cgroup_parent = directory_above(plan.cgroup_fd);
    auto found = std::find_if(keys.begin(), keys.end(), [&](const auto& entry) { return entry->matches(plan); });
    if (found == keys.end()) {
      if (!poolable(plan) || keys.size() >= settings.max_keys) return std::nullopt;
      auto entry = std::make_shared<detail::prespawn_entry>();
      entry->key.argv = {"prespawned"};
      entry->key.hooks = plan.hooks;
      entry->key.read_only_paths = plan.read_only_paths;
      entry->hook_owner = plan.hook_owner;
      entry->last_used = now;
      keys.push_back(std::move(entry));
      if (!worker.joinable()) worker = std::thread([this] { refill(); });
      wake.notify_one();
      return std::nullopt;
    }
    auto& entry = **found;
    entry.last_used = now;
    while (!entry.ready.empty()) {
      detail::warm_process process = std::move(entry.ready.front());
      entry.ready.pop_front();
      if (process.waiting()) return process;
      ++totals.lost;
      dropped.push_back(std::move(process));
    }
    wake.notify_one();
    return std::nullopt;
  }

  /// Every waiting process of `plan`'s key, into `dropped`: one of them did
  /// not take its command in time, and the others were exposed alike.
  void drop_key(const launch_plan& plan, std::vector<detail::warm_process>& dropped) {
    std::lock_guard lock(mutex);
    for (const auto& entry : keys)
      if (entry->matches(plan))
        for (; !entry->ready.empty(); entry->ready.pop_front()) dropped.push_back(std::move(entry->ready.front()));
  }

  /// The path of the directory above the one `dir_fd` names; empty when
  /// /proc cannot tell (the pool then moves its processes at the claim).
  static std::filesystem::path directory_above(int dir_fd) {
    std::error_code error;
    auto path = std::filesystem::read_symlink(fmt::format("/proc/self/fd/{}", dir_fd), error);
    if (error || !path.is_absolute()) return {};
    return path.parent_path();
  }

  /// A cgroup for the next waiting process, beside the executor's per-spawn
  /// ones (called with the lock held; the mkdir runs without it).
  std::optional<detail::cgroup> make_home(std::unique_lock<std::mutex>& lock) {
    if (cgroup_parent.empty() || detail::clone_into_cgroup_refused().load(std::memory_order_relaxed)) return {};
    const auto path = cgroup_parent / fmt::format("prespawn-{}", ++homes_made);
    lock.unlock();
    std::optional<detail::cgroup> home;
    try {
      home.emplace(detail::cgroup::create_at(path));
      home->close_procs_fd();  // the process is born inside; nobody writes it
    } catch (const std::exception&) {
      // Removed by the executor meanwhile, or a leftover of that name: this
      // process is moved at its claim instead.
    }
    lock.lock();
    return home;
  }

  bool wait_until_warm(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex);
    return filled.wait_for(lock, timeout, [&] {
      return std::all_of(keys.begin(), keys.end(),
                         [&](const auto& entry) { return entry->ready.size() >= settings.per_key; });
    });
  }

  /// The worker: starts a process for the emptiest key below `per_key` (the
  /// mutex released meanwhile), drops idle keys, sleeps until asked again or
  /// the next key may go idle.
  void refill() {
    std::unique_lock lock(mutex);
    while (!stopping) {
      const auto now = std::chrono::steady_clock::now();
      std::vector<std::shared_ptr<detail::prespawn_entry>> idle;
      std::erase_if(keys, [&](const auto& entry) {
        if (now - entry->last_used < settings.idle_timeout) return false;
        idle.push_back(entry);
        return true;
      });
      if (!idle.empty()) {
        lock.unlock();
        idle.clear();  // kills and reaps outside the lock
        lock.lock();
        filled.notify_all();
        continue;
      }

      std::shared_ptr<detail::prespawn_entry> wanting;
      for (const auto& entry : keys)
        if (entry->ready.size() < settings.per_key && entry->retry_at <= now &&
            (!wanting || entry->ready.size() < wanting->ready.size()))
          wanting = entry;
      if (wanting) {
        std::optional<detail::cgroup> home = make_home(lock);
        lock.unlock();
        std::optional<detail::warm_process> process;
        try {
          process = detail::warm_process::start(wanting->key, std::move(home));
        } catch (const std::exception&) {
          // A refused clone (EAGAIN under RLIMIT_NPROC, …) or a failing
          // hook: this key is served cold for a while — where the same
          // failure reaches the caller as it would without a pool — rather
          // than spinning here.
        }
        lock.lock();
        if (process) {
          ++totals.started;
          if (std::find(keys.begin(), keys.end(), wanting) != keys.end()) {
            wanting->ready.push_back(std::move(*process));
            filled.notify_all();
          } else {
            lock.unlock();
            process.reset();
            lock.lock();
          }
        } else {
          wanting->retry_at = std::chrono::steady_clock::now() + std::chrono::seconds(1);
          filled.notify_all();
        }
        continue;
      }

      auto next = now + settings.idle_timeout;
      for (const auto& entry : keys) {
        next = std::min(next, entry->last_used + settings.idle_timeout);
        if (entry->ready.size() < settings.per_key) next = std::min(next, entry->retry_at);
      }
      wake.wait_until(lock, next);
    }
  }
};

BASHEXEC_DECL prespawned::prespawned() : prespawned(config{}) {}

BASHEXEC_DECL prespawned::prespawned(config settings) {
  if (settings.per_key < 1 || settings.per_key > config::max_per_key)
    throw std::invalid_argument(
        fmt::format("prespawn.per_key: {} is not in 1 … {}", settings.per_key, config::max_per_key));
  if (settings.idle_timeout.count() <= 0) throw std::invalid_argument("prespawn.idle_timeout: must be positive");
  if (settings.max_keys < 1) throw std::invalid_argument("prespawn.max_keys: must be at least 1");
  pool_ = std::make_unique<pool>(settings);
}

BASHEXEC_DECL prespawned::~prespawned() = default;

BASHEXEC_DECL process_handle prespawned::spawn(const launch_plan& plan) const {
  if (plan.argv.empty()) throw std::invalid_argument("launch_plan.argv must not be empty");
  refuse_unsupported<prespawned>(plan);
  // A call's timeout bounds its wait for a waiting process too.
  int patience_ms = detail::warm_process::default_patience_ms;
  if (plan.deadline) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*plan.deadline - std::chrono::steady_clock::now());
    patience_ms = static_cast<int>(std::clamp<std::int64_t>(left.count(), 1, patience_ms));
  }
  std::vector<detail::warm_process> dropped;  // reaped when this returns, outside the pool's lock
  for (;;) {
    std::optional<detail::warm_process> process = pool_->take(plan, dropped);
    if (!process) break;
    // The refill waits until this claim is done: starting the next process
    // meanwhile would compete with this one for the CPU.
    struct refill_after {
      pool& p;
      ~refill_after() { p.wake.notify_one(); }
    } refill{*pool_};
    const auto claimed_at = std::chrono::steady_clock::now();
    if (auto handle = std::move(*process).claim(plan, patience_ms)) {
      pool_->count(&counters::warm);
      return std::move(*handle);
    }
    pool_->count(&counters::lost);
    // Killed while it waited: try the next one. It outwaited the patience
    // (stopped after `take` looked, or traced): the others may be stuck too,
    // so they go with it — once, not once per call — and this call goes cold.
    if (std::chrono::steady_clock::now() - claimed_at >= std::chrono::milliseconds(std::min(patience_ms, 1000))) {
      pool_->drop_key(plan, dropped);
      break;
    }
  }
  pool_->count(&counters::cold);
  return fork_exec{}.spawn(plan);
}

BASHEXEC_DECL bool prespawned::wait_until_warm(std::chrono::milliseconds timeout) const {
  return pool_->wait_until_warm(timeout);
}

BASHEXEC_DECL prespawned::counters prespawned::stats() const {
  std::lock_guard lock(pool_->mutex);
  return pool_->totals;
}

BASHEXEC_DECL const prespawned::config& prespawned::settings() const noexcept { return pool_->settings; }

}  // namespace bashexec

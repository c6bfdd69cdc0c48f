// The bodies of detail/engine/reactor.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/reactor.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <limits>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <csignal>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bashexec/errors.hpp"

namespace bashexec::detail {

BASHEXEC_DECL void reactor::start() {
  std::lock_guard lock(mutex_);
  start_locked();
}

BASHEXEC_DECL void reactor::add(client& c) {
  std::lock_guard lock(mutex_);
  if (!broken_.empty()) throw infrastructure_error("the executor's reactor thread stopped: " + broken_);
  start_locked();
  for (std::size_t i = 0; i < 4; ++i) {
    int fd = c.fd(sources[i]);
    if (fd < 0) continue;
    const std::uint32_t index = acquire_slot(c, sources[i]);
    c.slots_[i] = index;
    epoll_event ev{};
    ev.events = sources[i] == child_source::in ? EPOLLOUT : EPOLLIN;
    ev.data.u64 = token(index);
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      const int error = errno;
      for (std::size_t j = 0; j < i; ++j)
        if (int added = c.fd(sources[j]); added >= 0) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, added, nullptr);
      release_slots_locked(c);
      throw_syscall("epoll_ctl", error);
    }
  }
  pending_.push_back(&c);
  signal_wake();
}

BASHEXEC_DECL void reactor::wake() {
  std::lock_guard lock(mutex_);
  if (thread_.joinable()) signal_wake();
}

BASHEXEC_DECL void reactor::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    signal_wake();
  }
  thread_.join();
}

BASHEXEC_DECL std::uint32_t reactor::acquire_slot(client& c, child_source source) {
  std::uint32_t index;
  if (!free_slots_.empty()) {
    index = free_slots_.back();
    free_slots_.pop_back();
  } else {
    index = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  slots_[index].owner = &c;
  slots_[index].source = source;
  return index;
}

BASHEXEC_DECL void reactor::release_slots_locked(client& c) {
  for (auto& index : c.slots_) {
    if (index == client::no_slot) continue;
    slots_[index].owner = nullptr;
    ++slots_[index].generation;
    free_slots_.push_back(index);
    index = client::no_slot;
  }
}

BASHEXEC_DECL void reactor::start_locked() {
  if (thread_.joinable()) return;
  epoll_ = unique_fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) throw_syscall("epoll_create1");
  wake_ = unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) throw_syscall("eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = wake_token;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0) throw_syscall("epoll_ctl");
  // The thread inherits this mask: the host's signals are never delivered
  // to the reactor (and a SIGPIPE from a stdin write stays contained).
  sigset_t all, previous;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  thread_ = std::thread([this] { loop(); });
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

BASHEXEC_DECL void reactor::signal_wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof one);
}

BASHEXEC_DECL void reactor::fail(client& c, const char* reason) noexcept {
  {
    std::lock_guard lock(mutex_);
    release_slots_locked(c);
  }
  c.on_failure(reason);
  try {
    c.on_settled();
  } catch (...) {
    // The task's facts are stamped before anything that could throw here.
  }
}

BASHEXEC_DECL void reactor::loop() noexcept {
  std::vector<client*> clients;
  std::string reason;
  try {
    drive(clients);
    return;
  } catch (const std::exception& e) {
    reason = e.what();
  } catch (...) {
    reason = "unknown error";
  }
  // The loop itself failed (a broken epoll set): no client can be driven.
  std::vector<client*> waiting;
  {
    std::lock_guard lock(mutex_);
    broken_ = reason.empty() ? "unknown error" : reason;
    waiting.swap(pending_);
  }
  clients.insert(clients.end(), waiting.begin(), waiting.end());
  for (client* c : clients) fail(*c, reason.c_str());
}

BASHEXEC_DECL void reactor::drive(std::vector<client*>& clients) {
  std::vector<char> scratch(1 << 16);
  std::array<epoll_event, 256> events;
  std::vector<std::pair<client*, child_source>> ready;
  std::vector<std::pair<client*, std::string>> failed;
  // Runs one client callback; a throw fails that client alone.
  auto guarded = [&failed](client* c, auto&& call) {
    try {
      call();
    } catch (const std::exception& e) {
      failed.emplace_back(c, e.what());
    } catch (...) {
      failed.emplace_back(c, "unknown error");
    }
  };
  auto has_failed = [&failed](client* c) {
    return std::any_of(failed.begin(), failed.end(), [c](const auto& f) { return f.first == c; });
  };
  auto settle_failed = [&] {
    for (std::size_t i = 0; i < failed.size(); ++i) {
      client* c = failed[i].first;
      if (std::find(clients.begin(), clients.end(), c) == clients.end()) continue;  // already failed
      std::erase(clients, c);
      fail(*c, failed[i].second.c_str());
    }
    failed.clear();
  };
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      clients.insert(clients.end(), pending_.begin(), pending_.end());
      pending_.clear();
    }
    // Before blocking: a client can settle on events that arrived before it
    // joined `clients`; with its fds closed nothing would wake us for it.
    std::erase_if(clients, [&](client* c) {
      bool settled = false;
      guarded(c, [&] { settled = c->settled(); });
      if (!settled) return false;
      {
        std::lock_guard lock(mutex_);
        release_slots_locked(*c);  // from here on `c` may be destroyed by anyone
      }
      guarded(nullptr, [&] { c->on_settled(); });
      return true;
    });
    std::erase_if(failed, [](const auto& f) { return f.first == nullptr; });  // an on_settled that threw: done
    settle_failed();
    {
      std::lock_guard lock(mutex_);
      if (stopping_ && clients.empty() && pending_.empty()) return;
    }
    int timeout_ms = -1;
    const auto now = clock::now();
    for (client* c : clients)
      guarded(c, [&] {
        if (auto at = c->deadline()) {
          auto ms = std::chrono::ceil<std::chrono::milliseconds>(*at - now).count();
          ms = std::clamp<decltype(ms)>(ms, 0, std::numeric_limits<int>::max());
          if (timeout_ms < 0 || ms < timeout_ms) timeout_ms = static_cast<int>(ms);
        }
      });
    if (!failed.empty()) timeout_ms = 0;
    int n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), timeout_ms);
    if (n < 0 && errno != EINTR) throw_syscall("epoll_wait");  // caught by loop(): every client fails
    if (n < 0) n = 0;
    const auto after = clock::now();
    ready.clear();
    {
      std::lock_guard lock(mutex_);
      for (int i = 0; i < n; ++i) {
        const std::uint64_t t = events[i].data.u64;
        if (t == wake_token) {
          std::uint64_t count;
          [[maybe_unused]] auto r = ::read(wake_.get(), &count, sizeof count);
          continue;
        }
        const auto index = static_cast<std::uint32_t>(t);
        if (index >= slots_.size() || slots_[index].generation != static_cast<std::uint32_t>(t >> 32) ||
            slots_[index].owner == nullptr)
          continue;  // released: its client settled, and may be gone
        ready.emplace_back(slots_[index].owner, slots_[index].source);
      }
    }
    // Only this thread releases slots, so every client in `ready` lives on.
    for (auto [owner, source] : ready) {
      if (has_failed(owner)) continue;
      guarded(owner, [&, owner = owner, source = source] {
        // A stale event for a descriptor closed earlier in this batch.
        if (owner->fd(source) < 0) return;
        owner->on_event(source, scratch.data(), scratch.size(), after);
        // Still open but no longer read: out of the set, or epoll would
        // report it ready (hung up) on every round.
        if (const int parked = owner->parked_fd(source); parked >= 0)
          ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, parked, nullptr);
      });
    }
    for (client* c : clients) {
      if (has_failed(c)) continue;
      guarded(c, [&] {
        auto at = c->deadline();
        if (at && *at <= after) c->on_time(after);
      });
    }
    settle_failed();
  }
}

}  // namespace bashexec::detail

// detail/reactor: one thread per executor that drives every background
// child — epoll over pipe fds and pidfds, with timers from the children's
// own deadlines. No thread per task, no SIGCHLD handler (pidfds instead).
//
// Threading: `add` and `wake` may be called from any thread; every client
// callback runs on the reactor thread; clients lock their own state.
#pragma once

#include <algorithm>
#include <array>
#include <limits>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <csignal>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "bashexec/detail/child_run.hpp"

namespace bashexec::detail {

class reactor {
 public:
  /// One background child as the reactor sees it.
  class client {
   public:
    virtual ~client() = default;
    /// The descriptor of `source`, or -1 once closed.
    virtual int fd(child_source source) = 0;
    virtual void on_event(child_source source, char* scratch, std::size_t size, clock::time_point now) = 0;
    virtual std::optional<clock::time_point> deadline() = 0;
    virtual void on_time(clock::time_point now) = 0;
    virtual bool settled() = 0;
    /// Called once, on the reactor thread, right after the child settled.
    virtual void on_settled() = 0;

   private:
    friend class reactor;
    struct watch {
      client* owner;
      child_source source;
    };
    std::array<watch, 4> watches_{};
  };

  reactor() = default;
  reactor(const reactor&) = delete;
  reactor& operator=(const reactor&) = delete;

  ~reactor() { shutdown(); }

  /// Starts the reactor thread (and its epoll set) if it is not running.
  /// Callers start it before spawning, so a child never lacks its driver.
  void start() {
    std::lock_guard lock(mutex_);
    start_locked();
  }

  /// Starts watching `c` (its fds must be open). On failure nothing of `c`
  /// stays registered.
  void add(client& c) {
    std::lock_guard lock(mutex_);
    start_locked();
    constexpr child_source sources[] = {child_source::out, child_source::err, child_source::in, child_source::exit};
    for (std::size_t i = 0; i < 4; ++i) {
      c.watches_[i] = {&c, sources[i]};
      int fd = c.fd(sources[i]);
      if (fd < 0) continue;
      epoll_event ev{};
      ev.events = sources[i] == child_source::in ? EPOLLOUT : EPOLLIN;
      ev.data.ptr = &c.watches_[i];
      if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
        const int error = errno;
        for (std::size_t j = 0; j < i; ++j)
          if (int added = c.fd(sources[j]); added >= 0) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, added, nullptr);
        throw_syscall("epoll_ctl", error);
      }
    }
    pending_.push_back(&c);
    signal_wake();
  }

  /// Makes the loop look at deadlines again (after a kill request).
  void wake() {
    std::lock_guard lock(mutex_);
    if (thread_.joinable()) signal_wake();
  }

  /// Returns once every client added so far has settled and the thread ended.
  void shutdown() {
    {
      std::lock_guard lock(mutex_);
      if (!thread_.joinable()) return;
      stopping_ = true;
      signal_wake();
    }
    thread_.join();
  }

 private:
  void start_locked() {
    if (thread_.joinable()) return;
    epoll_ = unique_fd(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_) throw_syscall("epoll_create1");
    wake_ = unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_) throw_syscall("eventfd");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0) throw_syscall("epoll_ctl");
    // The thread inherits this mask: the host's signals are never delivered
    // to the reactor (and a SIGPIPE from a stdin write stays contained).
    sigset_t all, previous;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &previous);
    thread_ = std::thread([this] { loop(); });
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  }

  void signal_wake() {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof one);
  }

  void loop() {
    std::vector<client*> clients;
    std::vector<char> scratch(1 << 16);
    std::array<epoll_event, 256> events;
    for (;;) {
      {
        std::lock_guard lock(mutex_);
        clients.insert(clients.end(), pending_.begin(), pending_.end());
        pending_.clear();
      }
      // Before blocking: a client can settle on events that arrived before it
      // joined `clients`; with its fds closed nothing would wake us for it.
      std::erase_if(clients, [](client* c) {
        if (!c->settled()) return false;
        c->on_settled();
        return true;
      });
      {
        std::lock_guard lock(mutex_);
        if (stopping_ && clients.empty() && pending_.empty()) return;
      }
      int timeout_ms = -1;
      const auto now = clock::now();
      for (client* c : clients)
        if (auto at = c->deadline()) {
          auto ms = std::chrono::ceil<std::chrono::milliseconds>(*at - now).count();
          ms = std::clamp<decltype(ms)>(ms, 0, std::numeric_limits<int>::max());
          if (timeout_ms < 0 || ms < timeout_ms) timeout_ms = static_cast<int>(ms);
        }
      int n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), timeout_ms);
      if (n < 0 && errno != EINTR) throw_syscall("epoll_wait");  // terminates: a broken epoll is fatal
      const auto after = clock::now();
      for (int i = 0; i < n; ++i) {
        auto* w = static_cast<client::watch*>(events[i].data.ptr);
        if (w == nullptr) {
          std::uint64_t count;
          [[maybe_unused]] auto r = ::read(wake_.get(), &count, sizeof count);
          continue;
        }
        // A stale event for a descriptor closed earlier in this batch.
        if (w->owner->fd(w->source) < 0) continue;
        w->owner->on_event(w->source, scratch.data(), scratch.size(), after);
      }
      for (client* c : clients) {
        auto at = c->deadline();
        if (at && *at <= after) c->on_time(after);
      }
    }
  }

  std::mutex mutex_;
  std::thread thread_;
  unique_fd epoll_;
  unique_fd wake_;
  std::vector<client*> pending_;
  bool stopping_ = false;
};

}  // namespace bashexec::detail

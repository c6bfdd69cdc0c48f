// The CLI's handling of SIGINT, SIGTERM and SIGHUP: blocked in every thread
// and taken by one thread of its own with sigwait(2), so that no real work
// ever runs in an asynchronous signal handler. The first such signal runs the
// stop action the current subcommand registered (abort the run, stop the
// server); the subcommand then cleans up — kills and reaps every command,
// removes spill files and its private directories — and the program exits
// 128+N. Children start with an empty signal mask whatever ours is (the spawn
// policies reset it, contract 8).
#pragma once

#include <atomic>
#include <csignal>
#include <cstring>
#include <functional>
#include <mutex>
#include <pthread.h>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fmt/format.h>

namespace bashexec::cli {

class signal_watch {
 public:
  /// Blocks the three signals in the calling thread — call it from `main`
  /// before any other thread exists, so that every thread inherits the mask —
  /// and starts the waiting thread. The object lives until the process ends:
  /// the waiting thread is never joined, and must never see it destroyed.
  static signal_watch& start() {
    static signal_watch* watch = new signal_watch();  // deliberately never deleted
    return *watch;
  }

  /// The signal received, or 0.
  int received() const noexcept { return signal_.load(); }

  /// Runs `action` on the first signal (at once if one already came) until
  /// the returned guard is destroyed; the action never runs after that.
  class registration {
   public:
    explicit registration(signal_watch& watch) : watch_(&watch) {}
    registration(const registration&) = delete;
    registration& operator=(const registration&) = delete;
    ~registration() {
      std::lock_guard lock(watch_->mutex_);
      watch_->action_ = nullptr;
    }

   private:
    signal_watch* watch_;
  };

  [[nodiscard]] registration on_signal(std::function<void()> action) {
    std::lock_guard lock(mutex_);
    if (signal_.load() != 0)
      action();
    else
      action_ = std::move(action);
    return registration(*this);
  }

 private:
  signal_watch() {
    sigemptyset(&set_);
    for (int signo : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set_, signo);
    if (int error = ::pthread_sigmask(SIG_BLOCK, &set_, nullptr); error != 0)
      throw std::runtime_error(fmt::format("pthread_sigmask: {}", std::strerror(error)));
    std::thread([this] { wait_loop(); }).detach();
  }

  void wait_loop() noexcept {
    for (;;) {
      int signo = 0;
      if (::sigwait(&set_, &signo) != 0) continue;
      std::lock_guard lock(mutex_);
      if (signal_.load() != 0) continue;  // the first signal decides; shutdown is already under way
      signal_.store(signo);
      if (action_) {
        try {
          std::exchange(action_, nullptr)();
        } catch (...) {
          // The stop actions do not throw; a failure must not end this thread.
        }
      }
    }
  }

  sigset_t set_;
  std::mutex mutex_;
  std::function<void()> action_;
  std::atomic<int> signal_{0};
};

}  // namespace bashexec::cli

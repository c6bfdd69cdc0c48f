// The bodies of detail/engine/spawn_thread.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/spawn_thread.hpp"

#include <csignal>
#include <mutex>
#include <thread>
#include <utility>

#include <pthread.h>

namespace bashexec::detail {

BASHEXEC_DECL void spawn_thread::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (!thread_.joinable()) return;
  }
  wake_.notify_one();
  thread_.join();
}

BASHEXEC_DECL void spawn_thread::start_locked() {
  if (thread_.joinable()) return;
  sigset_t all, previous;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);  // inherited by the thread
  thread_ = std::thread([this] { loop(); });
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

BASHEXEC_DECL void spawn_thread::loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, nothing left
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();  // never throws: exceptions travel to the caller
    lock.lock();
  }
}

}  // namespace bashexec::detail

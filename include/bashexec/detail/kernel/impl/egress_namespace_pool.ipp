// The bodies of detail/kernel/egress_namespace_pool.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/egress_namespace_pool.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sched.h>
#include <fmt/core.h>

namespace bashexec::detail {

BASHEXEC_DECL egress_namespace_pool::egress_namespace_pool(std::size_t ready, std::uint16_t port) : wanted_(ready) {
  worker_ = std::thread([this, ready, port] { work(ready, port); });
}

BASHEXEC_DECL egress_namespace_pool::~egress_namespace_pool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

BASHEXEC_DECL std::optional<ready_egress_namespace> egress_namespace_pool::take() {
  std::optional<ready_egress_namespace> taken;
  {
    std::lock_guard lock(mutex_);
    if (ready_.empty()) return std::nullopt;
    taken.emplace(std::move(ready_.front()));
    ready_.pop_front();
  }
  return taken;  // refilled at replenish(), after the call
}

BASHEXEC_DECL void egress_namespace_pool::replenish() {
  {
    std::lock_guard lock(mutex_);
    refill_asked_ = true;
  }
  changed_.notify_all();
}

BASHEXEC_DECL bool egress_namespace_pool::wait_full(std::chrono::milliseconds patience) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, patience, [&] { return ready_.size() >= wanted_ || !broken_.empty(); }) &&
         broken_.empty();
}

BASHEXEC_DECL std::string egress_namespace_pool::broken() const {
  std::lock_guard lock(mutex_);
  return broken_;
}

BASHEXEC_DECL void egress_namespace_pool::work(std::size_t ready, std::uint16_t port) {
  const auto stop = [&](std::string why) {
    std::lock_guard lock(mutex_);
    broken_ = std::move(why);
    changed_.notify_all();
  };
  // The namespace this thread starts in, to come back to after each one made.
  const unique_fd home(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!home) return stop(fmt::format("open /proc/thread-self/ns/net: {}", std::strerror(errno)));
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || (refill_asked_ && ready_.size() < ready); });
    if (stopping_) return;
    lock.unlock();
    ready_egress_namespace made;
    std::string failure;
    if (::unshare(CLONE_NEWNET) != 0) {
      failure = fmt::format("unshare(CLONE_NEWNET): {}", std::strerror(errno));
    } else {
      made.network.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
      if (!made.network) failure = fmt::format("open the new namespace: {}", std::strerror(errno));
      if (const int error = failure.empty() ? egress_loopback_up() : 0; error != 0)
        failure = fmt::format("lo up: {}", std::strerror(error));
      if (failure.empty()) {
        const int listener = egress_open_listener(port);
        if (listener < 0)
          failure = fmt::format("listen on 127.0.0.1:{}: {}", port, std::strerror(-listener));
        else
          made.listener.reset(listener);
      }
      // Back home before anything else; a thread that cannot come back
      // makes nothing more (it never touches the network otherwise).
      if (::setns(home.get(), CLONE_NEWNET) != 0) {
        stop(fmt::format("setns back to the host's network namespace: {}", std::strerror(errno)));
        return;
      }
    }
    if (!failure.empty()) return stop(std::move(failure));
    lock.lock();
    ready_.push_back(std::move(made));
    if (ready_.size() >= ready) refill_asked_ = false;
    changed_.notify_all();
  }
}

}  // namespace bashexec::detail

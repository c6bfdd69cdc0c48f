// detail/kernel/egress_namespace_pool: network namespaces for `allowlist`
// commands made ahead of the call, so that the kernel's cost of making one
// (setup_net: ≈ 1 ms on the machines measured, docs/benchmarks.md) is paid
// between an agent's calls rather than on each call's path.
//
// Each ready namespace is what detail/kernel/egress_namespace.hpp's step
// makes in the child — only a loopback, up, and one listening socket,
// 127.0.0.1:<port>, bound before anything else could run there — held as two
// close-on-exec descriptors: the namespace (an nsfs descriptor) and the
// listener. A call takes one; its pre-exec child joins the namespace with
// setns(2) instead of making one, and the executor serves the listener it
// already holds. Every namespace serves exactly one command and is never
// handed out twice; nothing but the pool has it until then.
//
// Who makes them: one worker thread of the pool's own. It leaves the host's
// namespace for a new one (unshare(CLONE_NEWNET), which affects only the
// calling thread), makes the loopback and the listener there, and returns
// with setns(2) to the namespace it started in. Only a process with
// CAP_SYS_ADMIN can do this (and only it can setns the child into a
// namespace the initial user namespace owns), so the pool serves only such
// executors; without that power each command's child makes its own
// namespace inside a user namespace, as before. A worker that cannot make or
// cannot leave a namespace stops (broken(), with the reason): every later
// call makes its own, on its own path, and fails closed there if it must.
//
// When it refills: not when a call takes one, but when the engine says that
// call is over (replenish()). Making a namespace costs the kernel about a
// millisecond of CPU and some of its locks; made during the call, beside its
// spawn, it cost the call as much as making it in the child did (measured:
// docs/benchmarks.md). A pool of one: calls spaced apart (an agent's) always
// find one ready; a burst takes the ready one and makes its own for the rest.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "bashexec/detail/kernel/egress_namespace.hpp"
#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// One namespace made ahead: the namespace and its bound listener.
struct ready_egress_namespace {
  unique_fd network;   // open("/proc/thread-self/ns/net") while inside it
  unique_fd listener;  // 127.0.0.1:<port> in it, listening
};

class egress_namespace_pool {
 public:
  /// Starts the worker, which makes `ready` namespaces and keeps that many.
  explicit egress_namespace_pool(std::size_t ready = 1, std::uint16_t port = egress_proxy_port);
  /// Stops the worker and closes every namespace not taken.
  ~egress_namespace_pool();

  egress_namespace_pool(const egress_namespace_pool&) = delete;
  egress_namespace_pool& operator=(const egress_namespace_pool&) = delete;

  /// A ready namespace, or none when the pool is empty or broken (the
  /// caller makes its own). Never waits, and never starts a refill.
  std::optional<ready_egress_namespace> take();

  /// A call under allowlist is over (whether or not it took one): the
  /// worker may make namespaces again, up to `ready`.
  void replenish();

  /// Blocks until the pool holds its `ready` namespaces or is broken, up to
  /// `patience` (for tests and benchmarks that count descriptors).
  bool wait_full(std::chrono::milliseconds patience);

  /// Why the worker stopped; empty while it works.
  std::string broken() const;

 private:
  void work(std::size_t ready, std::uint16_t port);

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<ready_egress_namespace> ready_;
  std::size_t wanted_;
  bool stopping_ = false;
  bool refill_asked_ = true;  // the first `ready` are made at once
  std::string broken_;
  std::thread worker_;
};

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/egress_namespace_pool.ipp"
#endif

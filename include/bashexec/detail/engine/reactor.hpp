// detail/engine/reactor: one thread per executor that drives every background
// child — epoll over pipe fds and pidfds, with timers from the children's
// own deadlines. No thread per task, no SIGCHLD handler (pidfds instead).
//
// Threading: `add` and `wake` may be called from any thread; every client
// callback runs on the reactor thread; clients lock their own state.
//
// Failure: nothing leaves the reactor thread by exception (that would
// terminate the host). A client whose callback throws is failed alone — its
// `on_failure` kills its child and records why, then it settles. A broken
// epoll set fails every client and ends the thread; `add` then throws
// infrastructure_error with the reason, so later tasks are refused with it.
//
// Lifetime: a client may be destroyed once its `on_settled` has begun (the
// executor forgets settled tasks). epoll reports events per open file
// description, and a description outlives our close while a child being
// spawned holds a copy of the descriptor table — so an event can arrive for
// a descriptor we closed, of a client that no longer exists. Events
// therefore carry a slot token (index and generation), not a pointer; a
// settled client's slots are released before `on_settled`, and an event
// whose slot was released is dropped.
#pragma once

#include <array>
#include <limits>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bashexec/detail/engine/child_run.hpp"
#include "bashexec/detail/linkage.hpp"

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
    /// A descriptor of `source` the client stopped reading but keeps open
    /// until it settles (child_run::parked_fd); -1 for none. Asked after
    /// each event of `source`: the reactor removes it from its set once.
    virtual int parked_fd(child_source) { return -1; }
    virtual void on_time(clock::time_point now) = 0;
    virtual bool settled() = 0;
    /// Called once, on the reactor thread, right after the child settled.
    virtual void on_settled() = 0;
    /// The reactor cannot drive this client any more (`reason`): kill and
    /// reap its child and record why; `on_settled` follows, and no other
    /// callback. Must not throw.
    virtual void on_failure(const char* reason) noexcept = 0;

   private:
    friend class reactor;
    static constexpr std::uint32_t no_slot = std::numeric_limits<std::uint32_t>::max();
    std::array<std::uint32_t, 4> slots_{no_slot, no_slot, no_slot, no_slot};
  };

  reactor() = default;
  reactor(const reactor&) = delete;
  reactor& operator=(const reactor&) = delete;

  ~reactor() { shutdown(); }

  /// Starts the reactor thread (and its epoll set) if it is not running.
  /// Callers start it before spawning, so a child never lacks its driver.
  void start();

  /// Starts watching `c` (its fds must be open). On failure nothing of `c`
  /// stays registered; a reactor that broke (see the file comment) refuses
  /// with infrastructure_error naming why.
  void add(client& c);

  /// Makes the loop look at deadlines again (after a kill request).
  void wake();

  /// Returns once every client added so far has settled and the thread ended.
  void shutdown();

 private:
  static constexpr child_source sources[] = {child_source::out, child_source::err, child_source::in,
                                            child_source::exit};
  static constexpr std::uint64_t wake_token = std::numeric_limits<std::uint64_t>::max();

  /// Who a registration belongs to; `generation` changes when it is released.
  struct slot {
    client* owner = nullptr;
    child_source source = child_source::out;
    std::uint32_t generation = 0;
  };

  std::uint64_t token(std::uint32_t index) const {
    return (std::uint64_t{slots_[index].generation} << 32) | index;
  }

  std::uint32_t acquire_slot(client& c, child_source source);
  void release_slots_locked(client& c);
  void start_locked();
  void signal_wake();
  /// The thread's body: `drive`, and whatever it throws fails every client.
  void loop() noexcept;
  void drive(std::vector<client*>& clients);
  /// Fails `c` with `reason` (on_failure, then on_settled) and releases it.
  void fail(client& c, const char* reason) noexcept;

  std::mutex mutex_;
  std::thread thread_;
  unique_fd epoll_;
  unique_fd wake_;
  std::vector<client*> pending_;
  std::vector<slot> slots_;
  std::vector<std::uint32_t> free_slots_;
  bool stopping_ = false;
  /// Why the loop ended on its own; empty while it runs.
  std::string broken_;
};

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/engine/impl/reactor.ipp"
#endif

// detail/engine/spawn_thread: one long-lived thread per executor on which background
// tasks are spawned.
//
// Why: the kernel ties PR_SET_PDEATHSIG to the THREAD that created a process,
// not to its process. bwrap's --die-with-parent uses it, so a task spawned
// from a short-lived caller thread (a server answering each request on its
// own thread) would be SIGKILLed when that thread returned, and reported as
// killed although nobody killed it. Spawning on a thread that lives as long
// as the executor gives every such tie the executor's lifetime — which is
// exactly what disposal promises anyway.
//
// `call(f)` runs `f` on the thread and returns its result (or rethrows its
// exception, with its type) to the caller, who blocks meanwhile. The thread
// starts on the first call and blocks every signal, like the reactor.
// The hand-over is a mutex and a condition variable rather than
// std::packaged_task: <future> alone was a twentieth of the umbrella
// header's compile cost.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <exception>
#include <memory>
#include <optional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

#include "bashexec/detail/linkage.hpp"
#include "bashexec/errors.hpp"

namespace bashexec::detail {

class spawn_thread {
 public:
  spawn_thread() = default;
  spawn_thread(const spawn_thread&) = delete;
  spawn_thread& operator=(const spawn_thread&) = delete;
  ~spawn_thread() { shutdown(); }

  template <class F>
  std::invoke_result_t<F&> call(F&& f) {
    using result = std::invoke_result_t<F&>;
    static_assert(!std::is_void_v<result>, "spawn_thread::call: f must return a value");
    std::optional<result> value;
    std::exception_ptr error;
    bool done = false;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) throw infrastructure_error("spawn: the executor is being disposed of");
      start_locked();
      jobs_.emplace_back([&] {
        try {
          value.emplace(f());
        } catch (...) {
          error = std::current_exception();
        }
        std::lock_guard done_lock(mutex_);
        done = true;
        finished_.notify_all();
      });
    }
    wake_.notify_one();
    std::unique_lock lock(mutex_);
    finished_.wait(lock, [&] { return done; });
    if (error) std::rethrow_exception(error);
    return std::move(*value);
  }

  /// Runs the jobs already queued, then ends the thread.
  void shutdown();

 private:
  void start_locked();
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable finished_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/engine/impl/spawn_thread.ipp"
#endif

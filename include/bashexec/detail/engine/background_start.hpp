// detail/engine/background_start: the background driver's first half — the
// counterpart of foreground.hpp's run_foreground for `start`. It spawns a
// prepared launch on the executor's spawn thread, hands the child to its
// task, registers the task (an id, and the stop token watched) and gives it
// to the reactor, which drives it from then on. A spawn that fails settles
// the task as killed with the reason (classify_spawn_failure: a runner
// failure under a confinement); nothing of a failed start is left running.
#pragma once

#include <exception>
#include <memory>
#include <stop_token>
#include <utility>

#include "bashexec/detail/engine/launch_builder.hpp"
#include "bashexec/detail/engine/reactor.hpp"
#include "bashexec/detail/engine/spawn_step.hpp"
#include "bashexec/detail/engine/spawn_thread.hpp"
#include "bashexec/detail/engine/verdict.hpp"
#include "bashexec/ids.hpp"

namespace bashexec::detail {

/// Starts `launch` for `task` and registers it in `tasks`; returns its id.
/// The reactor must be running already (a child never lacks its driver).
template <class Task, class Spawn, class Registry>
task_id start_background(const std::shared_ptr<Task>& task, prepared_launch launch, const Spawn& spawner,
                         spawn_thread& spawn_on, reactor& driver, Registry& tasks, const std::stop_token& stop) {
  try {
    // On the executor's spawn thread: whatever the kernel ties to the
    // spawning thread (bwrap's die-with-parent) lives as long as we do.
    process_handle process = spawn_on.call([&] { return spawn_launch(spawner, launch); });
    task->begin(std::move(process), std::move(launch));
  } catch (...) {
    const spawn_failure failure = classify_spawn_failure(launch.confined.has_value());
    task->fail_to_start(failure.reason, launch, failure.runner_failure);
  }
  // A stop requested meanwhile runs the callback right in `watch_stop`.
  const task_id id = tasks.add(task, driver, [&stop](Task& added) {
    if (added.running() && stop.stop_possible()) added.watch_stop(stop);
  });
  if (task->running()) {
    try {
      driver.add(*task);
    } catch (const std::exception& e) {
      task->abandon(e.what());  // killed and reaped; settles as killed with the reason
    }
  }
  if (!task->running()) {
    task->on_settled();
    driver.wake();  // the retention deadline may have moved
  }
  return id;
}

}  // namespace bashexec::detail

// The member definitions of basic_executor (basic_executor.hpp), and the
// engine state it holds by pointer. Header-only mode includes this at the end
// of basic_executor.hpp. In the separately compiled mode the library compiles
// it for the shipped executors only; a translation unit that composes its own
// `basic_executor<policies<…>>` includes this header itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "bashexec/basic_executor.hpp"
#include "bashexec/detail/engine/background_start.hpp"
#include "bashexec/detail/engine/background_task.hpp"
#include "bashexec/detail/engine/foreground.hpp"
#include "bashexec/detail/engine/launch_builder.hpp"
#include "bashexec/detail/engine/listeners.hpp"
#include "bashexec/detail/engine/reactor.hpp"
#include "bashexec/detail/engine/resolve.hpp"
#include "bashexec/detail/engine/spawn_step.hpp"
#include "bashexec/detail/engine/spawn_thread.hpp"
#include "bashexec/detail/engine/spill_placement.hpp"
#include "bashexec/detail/engine/task_registry.hpp"
#include "bashexec/detail/engine/verdict.hpp"
#include "bashexec/detail/text/text_match.hpp"

namespace bashexec {

template <class Policies>
struct basic_executor<Policies>::engine {
  using collector = typename output_type::collector;
  using task_type = detail::background_task<collector, confinement_type>;

  /// How a background task reaches its executor.
  struct task_events final : detail::task_host {
    task_events(basic_executor& owner, engine& state) : executor(owner), self(state) {}
    void task_settled(task_snapshot final_facts, std::uint64_t serial, std::uint64_t held,
                      bool tell_listeners) override {
      // A foreground run's task that settled before it was handed on is the
      // run's result, not a task: let go of it here, the last thing its
      // on_settled does, so it lives until then whatever the run does.
      if (!tell_listeners) return self.tasks.release(serial);
      executor.listeners_->notify(std::move(final_facts));  // the listener's own copy
      self.tasks.settled(serial, held);
    }
    void wake_reactor() override { self.reactor.wake(); }
    void task_waiting(task_snapshot facts) override { executor.input_listeners_->notify(std::move(facts)); }
    basic_executor& executor;
    engine& self;
  };

  explicit engine(basic_executor& owner)
      : containment((detail::refuse_config_beyond_spawn<Policies>(owner.config_),
                     detail::choose_containment(owner.config_, executor_can<Policies, spawn_capability::cgroup>,
                                                spawn_type::name))),
        launches(owner.config_, owner.workspace_root_, owner.spills_, containment.cgroups),
        host(owner, *this),
        tasks(owner.config_.retention) {}

  detail::containment_choice containment;
  detail::launch_builder launches;
  std::once_flag selected;
  task_events host;
  detail::task_registry<task_type> tasks;
  detail::spawn_thread spawner;
  // Declared last: destroyed (joined) first, while the tasks still exist.
  detail::reactor reactor;
};

template <class Policies>
basic_executor<Policies>::basic_executor(executor_config config, const confinement_config& confinement,
                                         const spawn_config& spawn)
    : config_((validate(config), validate_confinement_config(confinement), validate_spawn_config(spawn),
               std::move(config))),
      cwd_(config_.cwd ? std::filesystem::absolute(*config_.cwd) : detail::current_directory()),
      workspace_root_(config_.sandbox.workspace_root ? std::filesystem::absolute(*config_.sandbox.workspace_root)
                                                     : cwd_),
      spills_(detail::choose_spill_parent(config_, workspace_root_, confines), config_.spill_budget_bytes,
              config_.keep_spill_dir),
      confinement_(config_.sandbox, confinement),
      listeners_(std::make_shared<detail::listener_hub<task_snapshot>>(config_.error_sink)),
      input_listeners_(std::make_shared<detail::listener_hub<task_snapshot>>(config_.error_sink)),
      spawn_(detail::make_spawn_policy<spawn_type>(config_, spawn)),
      engine_(std::make_unique<engine>(*this)) {}

template <class Policies>
basic_executor<Policies>::~basic_executor() {
  listeners_->silence();
  input_listeners_->silence();
  engine_->tasks.dispose([](typename engine::task_type& task) {
    task.unwatch_stop();  // no stop callback may reach the reactor once it is gone
    if (!task.stop(detail::stop_cause::disposal)) task.kill_leftovers();
  });
  engine_->reactor.wake();  // lets the reactor end once the tasks have settled
  engine_->reactor.shutdown();
  engine_->spawner.shutdown();
  listeners_->shutdown();
  input_listeners_->shutdown();
}

template <class Policies>
containment_mechanism basic_executor<Policies>::containment() const noexcept {
  return engine_->containment.cgroups ? containment_mechanism::cgroup : containment_mechanism::process_group;
}

template <class Policies>
const std::string& basic_executor<Policies>::containment_fallback() const noexcept {
  return engine_->containment.fallback;
}

template <class Policies>
exec_spec basic_executor<Policies>::resolve(exec_request request) const {
  return detail::resolve(std::move(request), {config_, cwd_, default_mode()});
}

template <class Policies>
run_result basic_executor<Policies>::run(const exec_spec& spec) {
  if (spec.stop.stop_requested())
    throw infrastructure_error("run: stop was requested before the command was spawned");
  if (spec.terminal || spec.keep_stdin_open) return run_interactive(spec);
  const auto under = confine_under(spec);
  auto& launches = engine_->launches;
  launches.require_runnable(spec);
  return detail::run_foreground<typename engine::collector>(spawn_, spec, launches.build(spec, confinement_, under),
                                                            confinement_, confinement_type::name, launches);
}

template <class Policies>
struct basic_executor<Policies>::started_task {
  task_id id;
  std::shared_ptr<typename engine::task_type> task;
};

template <class Policies>
task_id basic_executor<Policies>::start(const exec_spec& spec) {
  return start_task(spec, false).id;
}

template <class Policies>
auto basic_executor<Policies>::start_task(const exec_spec& spec, bool foreground) -> started_task {
  if (spec.stop.stop_requested())
    throw infrastructure_error(fmt::format("{}: stop was requested before the command was spawned",
                                           foreground ? "run" : "start"));
  engine& state = *engine_;
  const auto under = confine_under(spec);  // the order of run's checks
  state.launches.require_runnable(spec);
  state.reactor.start();  // before anything is spawned: a child must never lack its driver
  auto task = std::make_shared<typename engine::task_type>(state.host, state.launches, confinement_, spec,
                                                           ownership_type::keep(spec.owner), foreground);
  // A task's final state is never taken (calls go on meanwhile): no capture.
  detail::prepared_launch launch = spec.capture_state ? [&] {
    exec_spec without = spec;
    without.capture_state = false;
    return state.launches.build(without, confinement_, under);
  }()
                                              : state.launches.build(spec, confinement_, under);
  task_id id = detail::start_background(task, std::move(launch), spawn_, state.spawner, state.reactor, state.tasks,
                                        spec.stop);
  return {std::move(id), std::move(task)};
}

template <class Policies>
run_result basic_executor<Policies>::run_interactive(const exec_spec& spec) {
  engine& state = *engine_;
  const auto deadline = detail::clock::now() + std::min(spec.timeout, config_.max_timeout);
  const auto [id, task] = start_task(spec, true);
  task_snapshot facts = task->wait_for_input_or_settled(deadline);
  // Waiting: from here on it is a task like any other, unless it settled
  // in the meantime (then it is this run's result after all).
  if (facts.input_wait && !task->hand_off()) facts = task->wait(std::nullopt).value();
  bool timed_out = false;
  if (facts.status == task_status::running && !facts.input_wait) {
    // The call's timeout, before any wait for input: stopped like a run.
    timed_out = task->stop(detail::stop_cause::timed_out);
    if (timed_out) state.reactor.wake();
    facts = task->wait(std::nullopt).value();
  }
  run_result result;
  result.timeout = spec.timeout;
  result.terminal = facts.terminal;
  result.sandbox = facts.sandbox;
  result.containment = facts.containment;
  result.network = facts.network;
  if (facts.status == task_status::running) {
    // Waiting for input: the output so far, and the task goes on. The
    // call's stop token was the call's: it no longer reaches the task.
    task->unwatch_stop();
    task_read so_far = task->read();
    result.out.text = std::move(so_far.delta);
    result.out.truncated = so_far.lossy;
    result.out.spill_path = so_far.stdout_spill_path;
    result.continued_as = id;
    result.input_wait = facts.input_wait;
    state.host.task_waiting(std::move(facts));
    return result;
  }
  // Settled within the call: a run like any other, and no task is left
  // (its id stays unused, like a forgotten one; task_events lets go of it).
  auto [out, err] = task->final_output();
  if (facts.start_error) throw infrastructure_error(*facts.start_error);
  if (facts.sandbox && facts.sandbox->runner_failed)
    throw detail::runner_unavailable(confinement_type::name, *facts.sandbox, detail::first_line(err.text.empty() ? out.text : err.text));
  result.exit_code = facts.exit_code;
  result.signal = facts.signal;
  result.out = std::move(out);
  result.err = std::move(err);
  const auto cause = task->cause();
  result.timed_out = timed_out || cause == detail::stop_cause::timed_out;
  result.aborted = !result.timed_out && cause == detail::stop_cause::aborted;
  result.leftovers_killed = cause == detail::stop_cause::leftovers;
  return result;
}

template <class Policies>
std::size_t basic_executor<Policies>::write_input(const task_id& id, std::string_view bytes) {
  return engine_->tasks.find(id)->write_input(bytes);
}

template <class Policies>
void basic_executor<Policies>::close_input(const task_id& id) {
  engine_->tasks.find(id)->close_input();
}

template <class Policies>
void basic_executor<Policies>::resize(const task_id& id, terminal_size size) {
  engine_->tasks.find(id)->resize(size);
}

template <class Policies>
bool basic_executor<Policies>::interrupt(const task_id& id) {
  return engine_->tasks.find(id)->interrupt();
}

template <class Policies>
std::optional<task_snapshot> basic_executor<Policies>::wait_for_input(const task_id& id,
                                                                      std::chrono::milliseconds timeout) {
  task_snapshot facts = engine_->tasks.find(id)->wait_for_input_or_settled(detail::clock::now() + timeout);
  if (facts.status == task_status::running && !facts.input_wait) return std::nullopt;
  return facts;
}

template <class Policies>
task_snapshot basic_executor<Policies>::get(const task_id& id) const {
  return engine_->tasks.find(id)->snapshot();
}

template <class Policies>
std::vector<task_snapshot> basic_executor<Policies>::list() const {
  std::vector<task_snapshot> out;
  for (auto& task : engine_->tasks.all()) out.push_back(task->snapshot());
  return out;
}

template <class Policies>
std::optional<owner_token> basic_executor<Policies>::owner_of(const task_id& id) const {
  return engine_->tasks.owner_of(id);
}

template <class Policies>
bool basic_executor<Policies>::may_access(const task_id& id, const std::optional<owner_token>& caller) const {
  return ownership_type::may_access(engine_->tasks.find(id)->owner(), caller);
}

template <class Policies>
task_read basic_executor<Policies>::read_output(const task_id& id) {
  return engine_->tasks.find(id)->read();
}

template <class Policies>
bool basic_executor<Policies>::kill(const task_id& id) {
  bool started = engine_->tasks.find(id)->stop(detail::stop_cause::killed);
  if (started) engine_->reactor.wake();
  return started;
}

template <class Policies>
task_snapshot basic_executor<Policies>::wait(const task_id& id) {
  return engine_->tasks.find(id)->wait(std::nullopt).value();
}

template <class Policies>
std::optional<task_snapshot> basic_executor<Policies>::wait_for(const task_id& id,
                                                                std::chrono::milliseconds timeout) {
  return engine_->tasks.find(id)->wait(timeout);
}

template <class Policies>
std::string basic_executor<Policies>::retention_text() const {
  return detail::retention_text(config_.retention);
}

template <class Policies>
subscription basic_executor<Policies>::subscribe(const std::shared_ptr<detail::listener_hub<task_snapshot>>& to,
                                                 std::function<void(const task_snapshot&)> listener) {
  auto id = to->add(std::move(listener));
  std::weak_ptr<detail::listener_hub<task_snapshot>> hub = to;
  return subscription([hub, id] {
    if (auto alive = hub.lock()) alive->remove(id);
  });
}

/// The mode a spawn is confined under; empty when it runs unconfined (an
/// executor that never confines, or danger-full-access). The first confined
/// call selects a chain's candidate.
template <class Policies>
std::optional<sandbox_mode> basic_executor<Policies>::confine_under(const exec_spec& spec) {
  if constexpr (confines) {
    const sandbox_mode mode = spec.mode.value_or(*default_mode());
    if (mode == sandbox_mode::danger_full_access) return std::nullopt;
    ensure_selected();
    return mode;
  } else {
    return std::nullopt;
  }
}

/// A chain of candidates probes once per executor lifetime, on the first
/// confined call: a run of `true` under a read-only profile. The probe holds
/// the launch builder only; it never calls back into the executor.
template <class Policies>
void basic_executor<Policies>::ensure_selected() {
  if constexpr (requires { confinement_type::needs_selection; }) {
    std::call_once(engine_->selected, [this] {
      confinement_.select(detail::functional_probe<spawn_type, typename engine::collector>{
          spawn_, engine_->launches, config_.sandbox.probe_timeout, confinement_type::name});
    });
  }
}

}  // namespace bashexec

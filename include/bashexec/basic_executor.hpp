// basic_executor: the executor seam — foreground `run`, background `start`
// with incremental reads, kills and completion listeners — composed at
// compile time from spawn, confinement, output and ownership policies
// (see policies.hpp). Contract items 1–17 of docs/contract.md live here.
//
// A facade over one path (detail/engine/): `resolve` turns a request into a
// spec, the launch builder prepares the spawn (confined or not), and the
// foreground driver or a background task drives the child through the one
// event dispatch of child_run and classifies it with the one `classify`;
// the task registry holds background tasks under the retention policy.
//
// Threading: every member may be called from any thread. `run`, `wait` and
// the destructor block; everything else returns promptly. Background
// children are driven by one reactor thread per executor, started on the
// first `start`.
//
// Retention: settled tasks are forgotten by executor_config::retention
// (count, bytes held, age; oldest settled first); see task_registry.hpp.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bashexec/config.hpp"
#include "bashexec/detail/engine/background_task.hpp"
#include "bashexec/detail/engine/foreground.hpp"
#include "bashexec/detail/engine/launch_builder.hpp"
#include "bashexec/detail/engine/resolve.hpp"
#include "bashexec/detail/engine/spawn_step.hpp"
#include "bashexec/detail/engine/spill_placement.hpp"
#include "bashexec/detail/engine/task_registry.hpp"
#include "bashexec/detail/listeners.hpp"
#include "bashexec/detail/reactor.hpp"
#include "bashexec/detail/spawn_thread.hpp"
#include "bashexec/detail/spill_directory.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/executor_traits.hpp"
#include "bashexec/policies.hpp"
#include "bashexec/request.hpp"
#include "bashexec/result.hpp"
#include "bashexec/subscription.hpp"

namespace bashexec {

template <class Policies = policies<>>
class basic_executor {
 public:
  using spawn_type = typename Policies::spawn;
  using confinement_type = typename Policies::confinement;
  using output_type = typename Policies::output;
  using ownership_type = typename Policies::ownership;

  static_assert(spawn_policy<spawn_type>, "basic_executor: the spawn policy does not model bashexec::spawn_policy");
  static_assert(confinement_policy<confinement_type>,
                "basic_executor: the confinement policy does not model bashexec::confinement_policy");
  static_assert(output_policy<output_type>,
                "basic_executor: the output policy does not model bashexec::output_policy");
  static_assert(ownership_policy<ownership_type>,
                "basic_executor: the ownership policy does not model bashexec::ownership_policy");
  /// What this executor can do, computed from its policies (executor_traits.hpp).
  static constexpr auto traits = executor_traits<Policies>;

  static_assert(!executor_can<Policies, executor_capability::needs_pre_exec> ||
                    executor_can<Policies, spawn_capability::pre_exec>,
                "basic_executor: this confinement applies itself in the child right before exec (a pre-exec "
                "hook), but the spawn policy has no pre-exec hook; use spawn_with<fork_exec>");
  static_assert(!confinement_type::confines || confining_policy<confinement_type>,
                "basic_executor: a confining policy must provide prepare, runner_failure and is_denial");

  static constexpr bool confines = confinement_type::confines;
  /// The confinement's own knobs (bwrap's program, a runner's argv…); the
  /// knobs every confinement shares are `executor_config::sandbox`.
  using confinement_config = typename confinement_type::config;

  explicit basic_executor(executor_config config = {}, const confinement_config& confinement = {})
      : config_((validate(config), validate_confinement_config(confinement), std::move(config))),
        cwd_(config_.cwd ? std::filesystem::absolute(*config_.cwd) : detail::current_directory()),
        workspace_root_(config_.sandbox.workspace_root ? std::filesystem::absolute(*config_.sandbox.workspace_root)
                                                       : cwd_),
        spills_(detail::choose_spill_parent(config_, workspace_root_, confines), config_.spill_budget_bytes,
                config_.keep_spill_dir),
        confinement_(config_.sandbox, confinement),
        listeners_(std::make_shared<detail::listener_hub<task_snapshot>>(config_.error_sink)),
        spawn_(detail::make_spawn_policy<spawn_type>(config_)),
        containment_((detail::refuse_config_beyond_spawn<Policies>(config_),
                      detail::choose_containment(config_, executor_can<Policies, spawn_capability::cgroup>,
                                                 spawn_type::name))),
        launches_(config_, workspace_root_, spills_, containment_.cgroups),
        tasks_(config_.retention) {}

  basic_executor(const basic_executor&) = delete;
  basic_executor& operator=(const basic_executor&) = delete;

  /// Disposal (contract 12): listeners are silenced first, then every running
  /// task's group is stopped (SIGTERM, SIGKILL after the grace) and reaped.
  ~basic_executor() {
    listeners_->silence();
    tasks_.dispose([](task_type& task) {
      task.unwatch_stop();  // no stop callback may reach the reactor once it is gone
      if (!task.stop(detail::stop_cause::disposal)) task.kill_leftovers();
    });
    reactor_.wake();  // lets the reactor end once the tasks have settled
    reactor_.shutdown();
    spawner_.shutdown();
    listeners_->shutdown();
  }

  /// The mode a request without one runs under; empty for an executor that
  /// never confines (the fact the tool layer reads).
  std::optional<sandbox_mode> default_mode() const {
    if constexpr (confines)
      return config_.sandbox.default_mode.value_or(sandbox_mode::read_only);
    else
      return std::nullopt;
  }

  /// What contains every spawn of this executor (bwrap-confined runs may
  /// add a pid namespace; each result says what contained it).
  containment_mechanism containment() const noexcept {
    return containment_.cgroups ? containment_mechanism::cgroup : containment_mechanism::process_group;
  }
  /// Why `automatic` containment chose the process group rather than a
  /// cgroup; empty when it did not, or when process_group was asked for.
  const std::string& containment_fallback() const noexcept { return containment_.fallback; }

  /// The executor's one spawn policy instance (a pool's statistics, say).
  const spawn_type& spawner() const noexcept { return spawn_; }
  const executor_config& config() const noexcept { return config_; }
  const std::filesystem::path& workspace_root() const noexcept { return workspace_root_; }
  /// The private spill directory; empty until a stream first overflowed.
  std::filesystem::path spill_directory() const { return spills_.path(); }

  /// Applies defaults and caps (contract 1). Throws std::invalid_argument
  /// naming the offending field.
  exec_spec resolve(exec_request request) const {
    return detail::resolve(std::move(request), {config_, cwd_, default_mode()});
  }

  /// Runs to completion (contract 2–8). Throws only when the command could
  /// not be executed at all; a non-zero exit, a timeout or an abort is a
  /// result.
  run_result run(const exec_spec& spec) {
    if (spec.stop.stop_requested())
      throw infrastructure_error("run: stop was requested before the command was spawned");
    const auto under = confine_under(spec);
    launches_.require_runnable(spec);
    return detail::run_foreground<collector>(spawn_, spec, launches_.build(spec, confinement_, under), confinement_,
                                             confinement_type::name, launches_);
  }

  /// Starts a background task and returns its id at once (contract 9). The
  /// request's stop token means what it means for `run`: already requested,
  /// nothing is spawned and no id is used (infrastructure_error); requested
  /// later, the task's group is stopped (TERM, KILL after the grace).
  task_id start(const exec_spec& spec) {
    if (spec.stop.stop_requested())
      throw infrastructure_error("start: stop was requested before the command was spawned");
    launches_.require_runnable(spec);
    const auto under = confine_under(spec);
    reactor_.start();  // before anything is spawned: a child must never lack its driver

    auto task = std::make_shared<task_type>(host_, launches_, confinement_, spec, ownership_type::keep(spec.owner));
    detail::prepared_launch launch = launches_.build(spec, confinement_, under);
    try {
      // On the executor's spawn thread: whatever the kernel ties to the
      // spawning thread (bwrap's die-with-parent) lives as long as we do.
      process_handle process =
          spawner_.call([this, &launch] { return detail::spawn_checked(spawn_, launch.plan); });
      task->begin(std::move(process), std::move(launch));
    } catch (const pre_exec_failed& e) {
      // The confinement's own step failed in the child: a runner failure.
      task->fail_to_start(e.what(), launch, launch.confined.has_value());
    } catch (const infrastructure_error& e) {
      // The command never ran: the task settles as killed with the reason.
      task->fail_to_start(e.what(), launch, false);
    }
    // A stop requested meanwhile runs the callback right in `watch_stop`.
    const task_id id = tasks_.add(task, reactor_, [&spec](task_type& added) {
      if (added.running() && spec.stop.stop_possible()) added.watch_stop(spec.stop);
    });
    if (task->running()) {
      try {
        reactor_.add(*task);
      } catch (const std::exception& e) {
        task->abandon(e.what());  // killed and reaped; settles as killed with the reason
      }
    }
    if (!task->running()) {
      task->on_settled();
      reactor_.wake();  // the retention deadline may have moved
    }
    return id;
  }

  /// Throws unknown_task for an id never issued, task_forgotten for one
  /// the retention policy has forgotten (so do the calls below).
  task_snapshot get(const task_id& id) const { return tasks_.find(id)->snapshot(); }

  /// Snapshots of every task not forgotten, in start order.
  std::vector<task_snapshot> list() const {
    std::vector<task_snapshot> out;
    for (auto& task : tasks_.all()) out.push_back(task->snapshot());
    return out;
  }

  /// The owner token stored with the task, verbatim; empty for unknown or
  /// forgotten ids and ownerless tasks (contract 11).
  std::optional<owner_token> owner_of(const task_id& id) const { return tasks_.owner_of(id); }

  /// Whether `caller` may read or kill task `id`, as the ownership policy
  /// decides from the stored owner (docs/contract.md item 19). Throws
  /// unknown_task or task_forgotten like the calls it guards.
  bool may_access(const task_id& id, const std::optional<owner_token>& caller) const {
    return ownership_type::may_access(tasks_.find(id)->owner(), caller);
  }

  /// What the task printed since the last read (contract 6).
  task_read read_output(const task_id& id) { return tasks_.find(id)->read(); }

  /// Stops a running task's group; false when it had already finished.
  bool kill(const task_id& id) {
    bool started = tasks_.find(id)->stop(detail::stop_cause::killed);
    if (started) reactor_.wake();
    return started;
  }

  /// Blocks until the task settles.
  task_snapshot wait(const task_id& id) { return tasks_.find(id)->wait(std::nullopt).value(); }

  /// Blocks at most `timeout`; empty when the task is still running then.
  std::optional<task_snapshot> wait_for(const task_id& id, std::chrono::milliseconds timeout) {
    return tasks_.find(id)->wait(timeout);
  }

  /// The retention policy in words, as task_forgotten messages give it.
  std::string retention_text() const { return detail::retention_text(config_.retention); }

  /// Calls `listener(const task_snapshot&)` once per task when it settles,
  /// after its final facts are stamped (contract 10). Keep the returned
  /// subscription alive as long as the listener should stay subscribed.
  template <class Listener>
  [[nodiscard]] subscription on_task_done(Listener&& listener) {
    auto id = listeners_->add(std::function<void(const task_snapshot&)>(std::forward<Listener>(listener)));
    std::weak_ptr<detail::listener_hub<task_snapshot>> hub = listeners_;
    return subscription([hub, id] {
      if (auto alive = hub.lock()) alive->remove(id);
    });
  }

 private:
  using collector = typename output_type::collector;
  using task_type = detail::background_task<collector, confinement_type>;

  /// The mode a spawn is confined under; empty when it runs unconfined (an
  /// executor that never confines, or danger-full-access). The first
  /// confined call selects a chain's candidate.
  std::optional<sandbox_mode> confine_under(const exec_spec& spec) {
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
  /// confined call: a run of `true` under a read-only profile. The probe
  /// holds the launch builder only; it never calls back into the executor.
  void ensure_selected() {
    if constexpr (requires { confinement_type::needs_selection; }) {
      std::call_once(selected_, [this] {
        confinement_.select(detail::functional_probe<spawn_type, collector>{
            spawn_, launches_, config_.sandbox.probe_timeout, confinement_type::name});
      });
    }
  }

  /// How a background task reaches its executor.
  struct task_events final : detail::task_host {
    explicit task_events(basic_executor& owner) : executor(owner) {}
    void task_settled(task_snapshot final_facts, std::uint64_t serial, std::uint64_t held) override {
      executor.listeners_->notify(std::move(final_facts));  // the listener's own copy
      executor.tasks_.settled(serial, held);
    }
    void wake_reactor() override { executor.reactor_.wake(); }
    basic_executor& executor;
  };

  executor_config config_;
  std::filesystem::path cwd_;
  std::filesystem::path workspace_root_;
  detail::spill_directory spills_;
  confinement_type confinement_;
  std::shared_ptr<detail::listener_hub<task_snapshot>> listeners_;
  // Before the tasks: destroyed after them (a pool outlives what it lent).
  spawn_type spawn_;
  detail::containment_choice containment_;
  detail::launch_builder launches_;
  std::once_flag selected_;
  task_events host_{*this};
  detail::task_registry<task_type> tasks_;
  detail::spawn_thread spawner_;
  // Declared last: destroyed (joined) first, while the tasks still exist.
  detail::reactor reactor_;
};

}  // namespace bashexec

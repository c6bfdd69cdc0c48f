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
//
// This header holds the class; its member definitions are in
// impl/basic_executor.hpp, included at the end (header-only mode). In the
// separately compiled mode (detail/linkage.hpp) they are not: the library
// instantiates the shipped executors (local_executor, sandbox_executor), and
// a translation unit that composes its own executor includes
// <bashexec/impl/basic_executor.hpp> itself.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bashexec/config.hpp"
#include "bashexec/containment.hpp"
#include "bashexec/spill_directory.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/executor_traits.hpp"
#include "bashexec/policies.hpp"
#include "bashexec/request.hpp"
#include "bashexec/result.hpp"
#include "bashexec/subscription.hpp"
#include "bashexec/terminal.hpp"

namespace bashexec {

namespace detail {
template <class Event>
class listener_hub;
}  // namespace detail

template <class Policies = policies<>>
class basic_executor {
 public:
  using spawn_type = typename Policies::spawn;
  using confinement_type = typename Policies::confinement;
  using output_type = typename Policies::output;
  using ownership_type = typename Policies::ownership;

  static_assert(spawn_policy<spawn_type>, "basic_executor: the spawn policy does not model bashexec::spawn_policy");
  static_assert(spawn_constructible<spawn_type>,
                "basic_executor: the executor cannot construct its spawn policy; give it one of "
                "S(const executor_config&, const S::config&), S(const executor_config&), S(const S::config&) "
                "or S(), with a nested `config` that is default-constructible (bashexec/spawn.hpp)");
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

  /// The spawn policy's own settings (`S::config` when its constructor
  /// takes them, else `no_spawn_config`; spawn.hpp), validated here.
  using spawn_config = spawn_config_t<spawn_type>;

  explicit basic_executor(executor_config config = {}, const confinement_config& confinement = {},
                          const spawn_config& spawn = {});

  basic_executor(const basic_executor&) = delete;
  basic_executor& operator=(const basic_executor&) = delete;

  /// Disposal (contract 12): listeners are silenced first, then every running
  /// task's group is stopped (SIGTERM, SIGKILL after the grace) and reaped.
  ~basic_executor();

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
  containment_mechanism containment() const noexcept;
  /// Why `automatic` containment chose the process group rather than a
  /// cgroup; empty when it did not, or when process_group was asked for.
  const std::string& containment_fallback() const noexcept;

  /// The executor's one spawn policy instance (a pool's statistics, say).
  const spawn_type& spawner() const noexcept { return spawn_; }
  const executor_config& config() const noexcept { return config_; }
  const std::filesystem::path& workspace_root() const noexcept { return workspace_root_; }
  /// The private spill directory; empty until a stream first overflowed.
  std::filesystem::path spill_directory() const { return spills_.path(); }

  /// Applies defaults and caps (contract 1). Throws std::invalid_argument
  /// naming the offending field.
  exec_spec resolve(exec_request request) const;

  /// Runs to completion (contract 2–8). Throws only when the command could
  /// not be executed at all; a non-zero exit, a timeout or an abort is a
  /// result.
  run_result run(const exec_spec& spec);

  /// Starts a background task and returns its id at once (contract 9). The
  /// request's stop token means what it means for `run`: already requested,
  /// nothing is spawned and no id is used (infrastructure_error); requested
  /// later, the task's group is stopped (TERM, KILL after the grace).
  task_id start(const exec_spec& spec);

  /// Throws unknown_task for an id never issued, task_forgotten for one
  /// the retention policy has forgotten (so do the calls below).
  task_snapshot get(const task_id& id) const;

  /// Snapshots of every task not forgotten, in start order.
  std::vector<task_snapshot> list() const;

  /// The owner token stored with the task, verbatim; empty for unknown or
  /// forgotten ids and ownerless tasks (contract 11).
  std::optional<owner_token> owner_of(const task_id& id) const;

  /// Whether `caller` may read or kill task `id`, as the ownership policy
  /// decides from the stored owner (docs/contract.md item 19). Throws
  /// unknown_task or task_forgotten like the calls it guards.
  bool may_access(const task_id& id, const std::optional<owner_token>& caller) const;

  /// What the task printed since the last read (contract 6).
  task_read read_output(const task_id& id);

  /// Stops a running task's group; false when it had already finished.
  bool kill(const task_id& id);

  /// Writes `bytes` to a running task's input — its terminal (as typed
  /// keys: "\r" or "\n" is Enter, "\x03" ^C, "\x04" ^D, "\x1b[A" the up
  /// arrow) or its kept stdin pipe. Returns how many bytes were taken
  /// within terminal_settings::write_timeout: fewer only when the input
  /// stayed full that long, never silently dropped. Throws input_closed
  /// when the task settled, takes no input, or closed it.
  std::size_t write_input(const task_id& id, std::string_view bytes);

  /// End of input: a kept stdin pipe is closed; a terminal gets its EOF
  /// character (^D), which ends a read at the start of a line.
  void close_input(const task_id& id);

  /// The task's terminal gets a new window (SIGWINCH to its foreground
  /// group). std::invalid_argument for a task without a terminal.
  void resize(const task_id& id, terminal_size size);

  /// What ^C does: SIGINT to the terminal's foreground process group (the
  /// task's group for a task on pipes). False when it had settled.
  bool interrupt(const task_id& id);

  /// Blocks at most `timeout` until the task waits for input or settles;
  /// its facts then (`input_wait` set when it waits), empty on timeout.
  std::optional<task_snapshot> wait_for_input(const task_id& id, std::chrono::milliseconds timeout);

  /// Blocks until the task settles.
  task_snapshot wait(const task_id& id);

  /// Blocks at most `timeout`; empty when the task is still running then.
  std::optional<task_snapshot> wait_for(const task_id& id, std::chrono::milliseconds timeout);

  /// The retention policy in words, as task_forgotten messages give it.
  std::string retention_text() const;

  /// Calls `listener(const task_snapshot&)` once per task when it settles,
  /// after its final facts are stamped (contract 10). Keep the returned
  /// subscription alive as long as the listener should stay subscribed.
  template <class Listener>
  [[nodiscard]] subscription on_task_done(Listener&& listener) {
    return subscribe(listeners_, std::function<void(const task_snapshot&)>(std::forward<Listener>(listener)));
  }

  /// Calls `listener(const task_snapshot&)` once per input wait of a task
  /// (its `input_wait` set), when the executor first sees it (terminal.hpp).
  /// A foreground terminal run's wait is told too, once it continues as a
  /// task. The same rules as on_task_done.
  template <class Listener>
  [[nodiscard]] subscription on_input_wait(Listener&& listener) {
    return subscribe(input_listeners_,
                     std::function<void(const task_snapshot&)>(std::forward<Listener>(listener)));
  }

 private:
  /// The engine's state: the launch builder, the task registry, the spawn
  /// thread and the reactor (impl/basic_executor.hpp). Held by pointer so
  /// that this class needs none of their headers.
  struct engine;

  subscription subscribe(const std::shared_ptr<detail::listener_hub<task_snapshot>>& hub,
                         std::function<void(const task_snapshot&)> listener);
  /// A foreground run with a terminal or a kept stdin: driven as a task
  /// from the start, so that a wait for input can hand it on.
  run_result run_interactive(const exec_spec& spec);
  /// `start`, for a foreground run too: its task tells no listener until
  /// it is handed on. Answers the task itself beside its id: a foreground
  /// run's task that settles at once has left the registry by the time
  /// `start_task` returns, so its run could not find it by id.
  struct started_task;
  started_task start_task(const exec_spec& spec, bool foreground);
  std::optional<sandbox_mode> confine_under(const exec_spec& spec);
  void ensure_selected();

  executor_config config_;
  std::filesystem::path cwd_;
  std::filesystem::path workspace_root_;
  bashexec::spill_directory spills_;
  confinement_type confinement_;
  std::shared_ptr<detail::listener_hub<task_snapshot>> listeners_;
  std::shared_ptr<detail::listener_hub<task_snapshot>> input_listeners_;
  // Before the engine (which holds the tasks): destroyed after them (a pool
  // outlives what it lent).
  spawn_type spawn_;
  std::unique_ptr<engine> engine_;
};

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/impl/basic_executor.hpp"
#endif

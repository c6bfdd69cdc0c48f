// basic_executor: the executor seam — foreground `run`, background `start`
// with incremental reads, kills and completion listeners — composed at
// compile time from spawn, confinement, output and ownership policies
// (see policies.hpp). Contract items 1–17 of DESIGN.md live here.
//
// Threading: every member may be called from any thread. `run`, `wait` and
// the destructor block; everything else returns promptly. Background
// children are driven by one reactor thread per executor, started on the
// first `start`.
//
// Retention: settled tasks are forgotten by executor_config::retention
// (count, bytes held, age; oldest settled first). Task records are shared:
// a call in progress on a task that is forgotten meanwhile finishes on its
// own copy, and the record is freed when the last such call returns.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "bashexec/config.hpp"
#include "bashexec/detail/executor_cgroup.hpp"
#include "bashexec/detail/child_run.hpp"
#include "bashexec/detail/environment.hpp"
#include "bashexec/detail/listeners.hpp"
#include "bashexec/detail/reactor.hpp"
#include "bashexec/detail/spawn_thread.hpp"
#include "bashexec/detail/resource_limits.hpp"
#include "bashexec/detail/spill_directory.hpp"
#include "bashexec/detail/utf8_boundary.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/policies.hpp"
#include "bashexec/request.hpp"
#include "bashexec/result.hpp"
#include "bashexec/subscription.hpp"

namespace bashexec {

namespace detail {

/// Moves a descriptor above 0–2 so renumbering the child's stdio can never
/// clobber it (a host that closed its own stdin would otherwise get fd 0).
inline unique_fd above_stdio(unique_fd fd) {
  if (fd.get() > 2) return fd;
  int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
  if (moved < 0) throw_syscall("fcntl(F_DUPFD_CLOEXEC)");
  return unique_fd(moved);
}

/// A pipe whose parent end is non-blocking and whose child end is blocking.
struct child_pipe {
  unique_fd parent;
  unique_fd child;
};

inline child_pipe make_child_pipe(bool parent_reads) {
  auto [r, w] = make_pipe();
  unique_fd parent = above_stdio(parent_reads ? std::move(r) : std::move(w));
  unique_fd child = above_stdio(parent_reads ? std::move(w) : std::move(r));
  if (::fcntl(parent.get(), F_SETFL, O_NONBLOCK) != 0) throw_syscall("fcntl(O_NONBLOCK)");
  return {std::move(parent), std::move(child)};
}

inline void require_directory(const std::filesystem::path& workdir) {
  struct stat st {};
  if (::stat(workdir.c_str(), &st) != 0)
    throw infrastructure_error(fmt::format("workdir {}: {}", workdir.string(), std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    throw infrastructure_error(fmt::format("workdir {}: not a directory", workdir.string()));
  if (::access(workdir.c_str(), X_OK) != 0)
    throw infrastructure_error(fmt::format("workdir {}: {}", workdir.string(), std::strerror(errno)));
}

inline void require_executable(const std::filesystem::path& shell) {
  if (::access(shell.c_str(), X_OK) != 0)
    throw infrastructure_error(fmt::format("shell {}: {}", shell.string(), std::strerror(errno)));
}

/// The writable root (/tmp or the workspace, as workspace-write grants
/// them) that `path` lies under, if any.
inline std::optional<std::filesystem::path> writable_root_holding(const std::filesystem::path& path,
                                                                  const std::filesystem::path& workspace_root) {
  std::error_code ignored;
  const auto target = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ignored), ignored);
  for (const std::filesystem::path& root : {std::filesystem::path("/tmp"), workspace_root}) {
    const auto base = std::filesystem::weakly_canonical(root, ignored);
    if (std::mismatch(base.begin(), base.end(), target.begin(), target.end()).first == base.end()) return root;
  }
  return std::nullopt;
}

/// Where the spill directory goes. A confining executor keeps spill files
/// outside every root a confined command may write — Landlock cannot make a
/// path read-only inside a root it grants — so it refuses a configured
/// parent there (std::invalid_argument naming spill_parent) and skips such
/// default candidates.
inline std::filesystem::path choose_spill_parent(const executor_config& config,
                                                 const std::filesystem::path& workspace_root, bool confining) {
  if (config.spill_parent) {
    if (confining)
      if (auto root = writable_root_holding(*config.spill_parent, workspace_root))
        throw std::invalid_argument(fmt::format(
            "spill_parent {} lies under {}, which workspace-write commands may write; spill files must be "
            "readable but never writable by confined commands: choose a directory outside it",
            config.spill_parent->string(), root->string()));
    return *config.spill_parent;
  }
  const auto candidates = default_spill_parents();
  if (confining)
    for (const auto& candidate : candidates)
      if (!writable_root_holding(candidate, workspace_root)) return candidate;
  return candidates.front();
}

/// "1 h", "90 s", "250 ms": a duration as a reader would write it.
inline std::string duration_text(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms % 3600000 == 0) return fmt::format("{} h", ms / 3600000);
  if (ms % 60000 == 0) return fmt::format("{} min", ms / 60000);
  if (ms % 1000 == 0) return fmt::format("{} s", ms / 1000);
  return fmt::format("{} ms", ms);
}

/// "16 MiB", "512 KiB", "1000 bytes".
inline std::string bytes_text(std::uint64_t bytes) {
  if (bytes % (std::uint64_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} bytes", bytes);
}

inline std::filesystem::path current_directory() {
  std::error_code ec;
  auto cwd = std::filesystem::current_path(ec);
  if (ec) throw infrastructure_error(fmt::format("getcwd: {}", ec.message()));
  return cwd;
}

}  // namespace detail

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
  static_assert(!confinement_type::needs_pre_exec || spawn_type::supports_pre_exec,
                "basic_executor: this confinement applies itself in the child right before exec (a pre-exec "
                "hook), but the spawn policy has no pre-exec hook; use spawn_with<fork_exec>");
  static_assert(!confinement_type::confines || confining_policy<confinement_type>,
                "basic_executor: a confining policy must provide prepare, runner_failure and is_denial");

  static constexpr bool confines = confinement_type::confines;

  explicit basic_executor(executor_config config = {})
      : config_((validate(config), std::move(config))),
        cwd_(config_.cwd ? std::filesystem::absolute(*config_.cwd) : detail::current_directory()),
        workspace_root_(config_.sandbox.workspace_root ? std::filesystem::absolute(*config_.sandbox.workspace_root)
                                                       : cwd_),
        spills_(detail::choose_spill_parent(config_, workspace_root_, confines), config_.spill_budget_bytes,
                config_.keep_spill_dir),
        confinement_(config_),
        listeners_(std::make_shared<detail::listener_hub<task_snapshot>>(config_.error_sink)) {
    detail::require_pre_exec_for(config_, spawn_type::supports_pre_exec, spawn_type::name);
    choose_containment();
    dev_null_ = detail::unique_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!dev_null_) detail::throw_syscall("open /dev/null");
    dev_null_ = detail::above_stdio(std::move(dev_null_));
  }

  basic_executor(const basic_executor&) = delete;
  basic_executor& operator=(const basic_executor&) = delete;

  /// Disposal (contract 12): listeners are silenced first, then every running
  /// task's group is stopped (SIGTERM, SIGKILL after the grace) and reaped.
  ~basic_executor() {
    listeners_->silence();
    {
      std::lock_guard lock(registry_mutex_);
      disposing_ = true;  // a listener's late `start` must not add a task nobody stops
      for (auto& [serial, task] : tasks_) {
        task->unwatch_stop();  // no stop callback may reach the reactor once it is gone
        if (!task->stop(detail::stop_cause::disposal)) task->kill_leftovers();
      }
    }
    housekeeper_.retire();  // lets the reactor end once the tasks have settled
    reactor_.wake();
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
    return cgroups_ ? containment_mechanism::cgroup : containment_mechanism::process_group;
  }
  /// Why `automatic` containment chose the process group rather than a
  /// cgroup; empty when it did not, or when process_group was asked for.
  const std::string& containment_fallback() const noexcept { return containment_fallback_; }

  const executor_config& config() const noexcept { return config_; }
  const std::filesystem::path& workspace_root() const noexcept { return workspace_root_; }
  /// The private spill directory; empty until a stream first overflowed.
  std::filesystem::path spill_directory() const { return spills_.path(); }

  /// Applies defaults and caps (contract 1). Throws std::invalid_argument
  /// naming the offending field.
  exec_spec resolve(exec_request request) const {
    if (request.command.empty()) throw std::invalid_argument("command must not be empty");
    if (request.timeout && request.timeout->count() <= 0)
      throw std::invalid_argument(fmt::format("timeout must be positive, got {} ms", request.timeout->count()));
    if (request.stdout_max_bytes && *request.stdout_max_bytes == 0)
      throw std::invalid_argument("stdout_max_bytes must be positive, got 0");
    if (request.workdir && request.workdir->empty()) throw std::invalid_argument("workdir must not be empty");
    if (request.mode) detail::require_known_mode(*request.mode, "mode");
    exec_spec spec;
    spec.command = std::move(request.command);
    spec.workdir = request.workdir ? cwd_ / *request.workdir : cwd_;  // an absolute workdir replaces cwd_
    spec.timeout = std::min(request.timeout.value_or(config_.default_timeout), config_.max_timeout);
    spec.stdout_max_bytes = request.stdout_max_bytes.value_or(config_.output_cap);
    spec.stop = std::move(request.stop);
    spec.stdin_data = std::move(request.stdin_data);
    spec.env = std::move(request.env);
    spec.owner = std::move(request.owner);
    spec.mode = request.mode;
    spec.progress = std::move(request.progress);
    if constexpr (confines)
      if (!spec.mode) spec.mode = default_mode();
    return spec;
  }

  /// Runs to completion (contract 2–8). Throws only when the command could
  /// not be executed at all; a non-zero exit, a timeout or an abort is a
  /// result.
  run_result run(const exec_spec& spec) {
    if (spec.stop.stop_requested())
      throw infrastructure_error("run: stop was requested before the command was spawned");
    return run_with(spec, select_confinement(spec));
  }

  /// Starts a background task and returns its id at once (contract 9). The
  /// request's stop token means what it means for `run`: already requested,
  /// nothing is spawned and no id is used (infrastructure_error); requested
  /// later, the task's group is stopped (TERM, KILL after the grace).
  task_id start(const exec_spec& spec) {
    if (spec.stop.stop_requested())
      throw infrastructure_error("start: stop was requested before the command was spawned");
    detail::require_directory(spec.workdir);
    detail::require_executable(config_.shell);
    const confinement_choice choice = select_confinement(spec);
    reactor_.start();  // before anything is spawned: a child must never lack its driver

    auto task = std::make_shared<task_record>(*this, spec);
    prepared launch = prepare(spec, choice);
    try {
      // On the executor's spawn thread: whatever the kernel ties to the
      // spawning thread (bwrap's die-with-parent) lives as long as we do.
      spawned_process process = spawner_.call([&launch] { return spawn_type::spawn(launch.plan); });
      task->begin(std::move(process), std::move(launch));
    } catch (const pre_exec_failed& e) {
      // The confinement's own step failed in the child: a runner failure.
      task->fail_to_start(e.what(), launch, launch.confined.has_value());
    } catch (const infrastructure_error& e) {
      // The command never ran: the task settles as killed with the reason.
      task->fail_to_start(e.what(), launch, false);
    }
    task_id id;
    {
      std::lock_guard lock(registry_mutex_);
      if (disposing_) throw infrastructure_error("start: the executor is being disposed of");
      if (!housekeeper_added_) {
        reactor_.add(housekeeper_);  // no descriptors: it only keeps the retention's age deadline
        housekeeper_added_ = true;
      }
      const std::uint64_t serial = ++last_id_;
      id = task_id(fmt::format("bash-{}", serial));
      task->set_id(id, serial);
      tasks_.emplace(serial, task);
      // Under the registry lock, so disposal's `unwatch_stop` cannot race it.
      // A stop requested meanwhile runs the callback right here.
      if (task->running() && spec.stop.stop_possible()) task->watch_stop(spec.stop);
    }
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
  task_snapshot get(const task_id& id) const { return find(id)->snapshot(); }

  /// Snapshots of every task not forgotten, in start order.
  std::vector<task_snapshot> list() const {
    std::vector<std::shared_ptr<task_record>> all;
    {
      std::lock_guard lock(registry_mutex_);
      all.reserve(tasks_.size());
      for (auto& [serial, task] : tasks_) all.push_back(task);
    }
    std::vector<task_snapshot> out;
    out.reserve(all.size());
    for (auto& task : all) out.push_back(task->snapshot());
    return out;
  }

  /// The owner token stored with the task, verbatim; empty for unknown or
  /// forgotten ids and ownerless tasks (contract 11).
  std::optional<owner_token> owner_of(const task_id& id) const {
    const auto serial = serial_of(id);
    if (!serial) return std::nullopt;
    std::lock_guard lock(registry_mutex_);
    auto it = tasks_.find(*serial);
    if (it == tasks_.end()) return std::nullopt;
    return it->second->owner();
  }

  /// What the task printed since the last read (contract 6).
  task_read read_output(const task_id& id) { return find(id)->read(); }

  /// Stops a running task's group; false when it had already finished.
  bool kill(const task_id& id) {
    bool started = find(id)->stop(detail::stop_cause::killed);
    if (started) reactor_.wake();
    return started;
  }

  /// Blocks until the task settles.
  task_snapshot wait(const task_id& id) { return find(id)->wait(std::nullopt).value(); }

  /// Blocks at most `timeout`; empty when the task is still running then.
  std::optional<task_snapshot> wait_for(const task_id& id, std::chrono::milliseconds timeout) {
    return find(id)->wait(timeout);
  }

  /// The retention policy in words, as task_forgotten messages give it.
  std::string retention_text() const {
    const task_retention& r = config_.retention;
    return fmt::format(
        "settled tasks are kept for at most {}, at most the {} that settled last, and at most {} of their output "
        "in memory",
        detail::duration_text(r.max_age), r.max_tasks, detail::bytes_text(r.max_bytes));
  }

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

  /// How one spawn is confined: not at all, or by the executor's policy
  /// under `mode`.
  struct confinement_choice {
    bool confine = false;
    std::optional<sandbox_mode> mode;
  };

  struct prepared {
    launch_plan plan;
    std::optional<confined_launch> confined;
    std::optional<sandbox_info> info;
    detail::parent_pipes pipes;
    detail::unique_fd child_in, child_out, child_err;
    std::optional<detail::cgroup_lease> cgroup;  // cgroup containment
    containment_mechanism containment = containment_mechanism::process_group;
  };

  /// Decided once: `automatic` takes a cgroup where the spawn policy can
  /// join one before exec and the host offers one, else the process group;
  /// an explicit `cgroup` throws instead of falling back.
  void choose_containment() {
    if (config_.containment == process_containment::process_group) return;
    if constexpr (!spawn_type::supports_pre_exec) {
      containment_fallback_ = fmt::format(
          "the {} spawn policy cannot join a cgroup before exec (use spawn_with<fork_exec>)", spawn_type::name);
    } else {
      try {
        cgroups_ = detail::executor_cgroup::create(detail::locate_cgroup_parent(config_.cgroup_parent));
      } catch (const infrastructure_error& e) {
        if (config_.containment == process_containment::cgroup) throw;
        containment_fallback_ = e.what();
      }
    }
  }

  confinement_choice select_confinement(const exec_spec& spec) {
    if constexpr (confines) {
      sandbox_mode mode = spec.mode.value_or(*default_mode());
      if (mode == sandbox_mode::danger_full_access) return {false, mode};
      ensure_selected();
      return {true, mode};
    } else {
      return {false, std::nullopt};
    }
  }

  /// A chain of candidates probes once per executor lifetime, on the first
  /// confined call: a run of `true` under a read-only profile.
  void ensure_selected() {
    if constexpr (requires { confinement_type::needs_selection; }) {
      std::call_once(selected_, [this] {
        confinement_.select([this](const auto& candidate) { return probe(candidate); });
      });
    }
  }

  template <class Candidate>
  bool probe(const Candidate& candidate) {
    exec_spec spec;
    spec.command = "true";
    spec.workdir = "/";
    spec.timeout = config_.sandbox.probe_timeout;
    spec.stdout_max_bytes = 4096;
    spec.mode = sandbox_mode::read_only;
    // Failures throw with their reason, which the chain keeps for the
    // sandbox_unavailable message ("apt-get install bubblewrap", ...).
    prepared launch = prepare_with(spec, &candidate, sandbox_mode::read_only);
    auto result = drive(spec, std::move(launch), candidate);
    if (result.timed_out)
      throw infrastructure_error(fmt::format("the probe did not finish within {} ms", spec.timeout.count()));
    if (result.exit_code != 0)
      throw infrastructure_error(fmt::format("the probe `true` failed: {}", first_line(result.err.text)));
    return true;
  }

  prepared prepare(const exec_spec& spec, const confinement_choice& choice) {
    if constexpr (confines) {
      if (choice.confine) return prepare_with(spec, &confinement_, *choice.mode);
      prepared launch = prepare_with(spec, static_cast<const confinement_type*>(nullptr), sandbox_mode::read_only);
      launch.info = sandbox_info{*choice.mode, false, std::nullopt, false};  // danger-full-access: unwrapped
      return launch;
    } else {
      return prepare_with(spec, static_cast<const confinement_type*>(nullptr), sandbox_mode::read_only);
    }
  }

  /// The plan for one spawn: `shell -c command`, the scrubbed environment,
  /// fresh pipes, and (when `confinement` is set) the confinement's edits.
  template <class Confinement>
  prepared prepare_with(const exec_spec& spec, const Confinement* confinement, sandbox_mode mode) {
    prepared p;
    auto out = detail::make_child_pipe(true);
    auto err = detail::make_child_pipe(true);
    p.pipes.out = std::move(out.parent);
    p.pipes.err = std::move(err.parent);
    p.child_out = std::move(out.child);
    p.child_err = std::move(err.child);
    if (spec.stdin_data) {
      auto in = detail::make_child_pipe(false);
      p.pipes.in = std::move(in.parent);
      p.child_in = std::move(in.child);
    }
    p.plan.argv = {config_.shell.string(), "-c", spec.command};
    p.plan.env = detail::child_environment(spec.env ? &*spec.env : nullptr);
    p.plan.workdir = spec.workdir;
    p.plan.stdin_fd = p.child_in ? p.child_in.get() : dev_null_.get();
    p.plan.stdout_fd = p.child_out.get();
    p.plan.stderr_fd = p.child_err.get();
    p.plan.limits = detail::plan_limits(config_.limits);
    if (auto spills = spills_.path(); !spills.empty()) p.plan.read_only_paths.push_back(std::move(spills));
    if (cgroups_) {
      p.cgroup.emplace(cgroups_->acquire());
      p.plan.cgroup_procs_fd = p.cgroup->procs_fd();
      p.containment = containment_mechanism::cgroup;
    }
    if constexpr (Confinement::confines) {
      if (confinement) {
        p.confined = confinement->prepare(mode, workspace_root_, p.plan);
        p.info = p.confined->info;
        if (p.confined->pid_namespace) p.containment = containment_mechanism::pid_namespace;
      }
    }
    return p;
  }

  run_result run_with(const exec_spec& spec, const confinement_choice& choice) {
    detail::require_directory(spec.workdir);
    detail::require_executable(config_.shell);
    return drive(spec, prepare(spec, choice), confinement_);
  }

  /// Spawns and drives one foreground child in the calling thread.
  template <class Confinement>
  run_result drive(const exec_spec& spec, prepared launch, const Confinement& confinement) {
    spawned_process process;
    try {
      process = spawn_type::spawn(launch.plan);
    } catch (const pre_exec_failed& e) {
      // The confinement's own step failed in the child: the command never ran.
      if (launch.confined) throw runner_unavailable(*launch.info, e.what());
      throw;
    }
    launch.child_in.reset();
    launch.child_out.reset();
    launch.child_err.reset();
    if (launch.confined) launch.confined->keep_alive.reset();  // only the spawn needed it
    const auto started = detail::clock::now();
    detail::child_run<collector> child(std::move(process), std::move(launch.pipes),
                                       spec.stdin_data.value_or(std::string{}),
                                       collector(spec.stdout_max_bytes, spills_, output_stream::out),
                                       collector(config_.output_cap, spills_, output_stream::err), foreground_timing(),
                                       started + std::min(spec.timeout, config_.max_timeout),
                                       std::move(launch.cgroup));
    drive_until_settled(child, spec.stop, spec.progress.get());

    run_result result;
    result.exit_code = child.exit().exit_code;
    result.signal = child.exit().signal;
    result.timed_out = child.cause() == detail::stop_cause::timed_out;
    result.aborted = child.cause() == detail::stop_cause::aborted;
    result.leftovers_killed = child.cause() == detail::stop_cause::leftovers;
    result.timeout = spec.timeout;
    result.out = child.out().finish();
    result.err = child.err().finish();
    result.sandbox = launch.info;
    result.containment = launch.containment;
    if constexpr (Confinement::confines) {
      if (launch.confined && result.exit_code && *result.exit_code != 0) {
        if (auto reason = confinement.runner_failure(*launch.confined, result.err.text, result.out.text))
          throw runner_unavailable(*launch.info, *reason);
        result.sandbox->denied = confinement.is_denial(result.err.text);
      }
    }
    return result;
  }

  static sandbox_unavailable runner_unavailable(const sandbox_info& info, std::string_view reason) {
    return sandbox_unavailable(info.mode, fmt::format("{} sandbox runner failed under {} mode: {}",
                                                      confinement_type::name, info.mode, first_line(reason)));
  }

  static std::string_view first_line(std::string_view text) {
    while (!text.empty() && (text.front() == '\n' || text.front() == '\r')) text.remove_prefix(1);
    return text.substr(0, text.find('\n'));
  }

  /// The foreground event loop: poll over the child's pipes, its pidfd and
  /// (when the caller can stop) an eventfd the stop callback signals.
  void drive_until_settled(detail::child_run<collector>& child, const std::stop_token& stop,
                           run_progress* progress) {
    detail::unique_fd stop_fd;
    std::optional<std::stop_callback<std::function<void()>>> on_stop;
    if (stop.stop_possible()) {
      stop_fd = detail::unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
      if (!stop_fd) detail::throw_syscall("eventfd");
      on_stop.emplace(stop, std::function<void()>([fd = stop_fd.get()] {
                        std::uint64_t one = 1;
                        [[maybe_unused]] auto n = ::write(fd, &one, sizeof one);
                      }));
    }
    constexpr std::size_t scratch_size = 1 << 16;
    auto scratch = std::make_unique_for_overwrite<char[]>(scratch_size);  // no zero-fill per run
    using source = detail::child_source;
    bool stop_seen = false;  // the eventfd stays readable once signalled: watch it until then only
    while (!child.settled()) {
      pollfd fds[5];
      source sources[5];
      nfds_t count = 0;
      auto watch = [&](int fd, short events, source s) {
        if (fd < 0) return;
        fds[count] = {fd, events, 0};
        sources[count++] = s;
      };
      watch(child.fd(source::out), POLLIN, source::out);
      watch(child.fd(source::err), POLLIN, source::err);
      watch(child.fd(source::in), POLLOUT, source::in);
      watch(child.fd(source::exit), POLLIN, source::exit);
      const nfds_t stop_index = count;
      if (stop_fd && !stop_seen) fds[count++] = {stop_fd.get(), POLLIN, 0};

      int timeout_ms = -1;
      if (auto at = child.next_deadline()) {
        auto ms = std::chrono::ceil<std::chrono::milliseconds>(*at - detail::clock::now()).count();
        timeout_ms = static_cast<int>(std::clamp<decltype(ms)>(ms, 0, std::numeric_limits<int>::max()));
      }
      int ready = ::poll(fds, count, timeout_ms);
      if (ready < 0 && errno != EINTR) detail::throw_syscall("poll");
      const auto now = detail::clock::now();
      if (stop_fd && !stop_seen && ready > 0 && fds[stop_index].revents) {
        stop_seen = true;
        child.request_stop(detail::stop_cause::aborted, now);
      }
      for (nfds_t i = 0; ready > 0 && i < stop_index; ++i) {
        if (!fds[i].revents || child.fd(sources[i]) < 0) continue;
        if (sources[i] == source::in)
          child.on_writable(now);
        else if (sources[i] == source::exit)
          child.on_exit_signalled(now);
        else
          child.on_readable(sources[i], scratch.get(), scratch_size, now);
      }
      if (progress) {
        progress->stdout_bytes.store(child.out().total(), std::memory_order_relaxed);
        progress->stderr_bytes.store(child.err().total(), std::memory_order_relaxed);
      }
      child.on_time(now);
    }
  }

  detail::stop_timing foreground_timing() const { return {config_.kill_grace, config_.drain_timeout, true}; }
  /// A background task lives as long as its output is held open: no drain
  /// limit, and detached members are left to `kill` and disposal.
  detail::stop_timing background_timing() const { return {config_.kill_grace, std::nullopt, false}; }

  /// One background task: its child, its facts and its read offsets.
  class task_record final : public detail::reactor::client {
   public:
    task_record(basic_executor& owner, const exec_spec& spec)
        : executor_(owner), owner_token_(ownership_type::keep(spec.owner)), spec_stdin_(spec.stdin_data) {
      snapshot_.command = spec.command;
      cap_ = spec.stdout_max_bytes;
    }

    void set_id(const task_id& id, std::uint64_t serial) {
      std::lock_guard lock(mutex_);
      snapshot_.id = id;
      serial_ = serial;
    }

    void begin(spawned_process process, prepared launch) {
      launch.child_in.reset();
      launch.child_out.reset();
      launch.child_err.reset();
      snapshot_.sandbox = launch.info;
      snapshot_.containment = launch.containment;
      confined_ = std::move(launch.confined);
      if (confined_) confined_->keep_alive.reset();  // only the spawn needed it
      child_.emplace(std::move(process), std::move(launch.pipes), spec_stdin_.value_or(std::string{}),
                     collector(cap_, executor_.spills_, output_stream::out),
                     collector(executor_.config_.output_cap, executor_.spills_, output_stream::err),
                     executor_.background_timing(), std::nullopt, std::move(launch.cgroup));
      spec_stdin_.reset();
    }

    /// The reactor could not take the child: kill and reap it now, and settle
    /// the task as killed with the reason.
    void abandon(std::string_view reason) {
      std::lock_guard lock(mutex_);
      child_.reset();  // child_run's destructor kills the group and reaps the shell
      spawn_error_ = fmt::format("bashexec: could not watch the command: {}\n", reason);
    }

    /// A spawn that failed: the task is settled as killed, the reason in its
    /// stderr; under a confinement that is a runner failure.
    void fail_to_start(std::string_view reason, const prepared& launch, bool confined) {
      spawn_error_ = fmt::format("bashexec: could not start the command: {}\n", reason);
      const std::optional<sandbox_info>& info = launch.info;
      snapshot_.sandbox = info;
      snapshot_.containment = launch.containment;
      if (confined) snapshot_.sandbox->runner_failed = true;
    }

    bool running() const { return child_.has_value(); }

    std::optional<owner_token> owner() const { return owner_token_; }

    task_snapshot snapshot() const {
      std::lock_guard lock(mutex_);
      return snapshot_;
    }

    bool stop(detail::stop_cause cause) {
      std::lock_guard lock(mutex_);
      if (!child_ || child_->settled()) return false;
      return child_->request_stop(cause, detail::clock::now());
    }

    /// Stops the task when `stop` is requested (contract 9). Call once, with
    /// the registry lock held; the callback may run right here.
    void watch_stop(const std::stop_token& stop) { on_stop_.emplace(stop, stop_relay{this}); }

    /// No stop callback runs after this returns (one in flight is waited
    /// for). Call without holding this task's mutex: the callback takes it.
    void unwatch_stop() { on_stop_.reset(); }

    /// Disposal of a settled task: members that detached from its output
    /// (`daemon >/dev/null &`) and outlived the shell die with the executor.
    void kill_leftovers() {
      std::lock_guard lock(mutex_);
      if (child_ && leftovers_) child_->kill_leftovers();
    }

    std::optional<task_snapshot> wait(std::optional<std::chrono::milliseconds> timeout) {
      std::unique_lock lock(mutex_);
      auto done = [this] { return settled_; };
      if (!timeout)
        settled_cv_.wait(lock, done);
      else if (!settled_cv_.wait_for(lock, *timeout, done))
        return std::nullopt;
      return snapshot_;
    }

    task_read read() {
      std::lock_guard lock(mutex_);
      task_read r;
      r.task = snapshot_;
      if (!child_) {
        r.delta = spawn_error_read_ ? "" : "[stderr]\n" + spawn_error_;
        spawn_error_read_ = true;
        return r;
      }
      auto out = child_->out().since(out_offset_);
      auto err = child_->err().since(err_offset_);
      if (!settled_) {
        // The rest of a character split across pipe reads arrives later:
        // keep its first bytes for the next read rather than split it.
        out.bytes.resize(out.bytes.size() - detail::incomplete_utf8_suffix(out.bytes));
        err.bytes.resize(err.bytes.size() - detail::incomplete_utf8_suffix(err.bytes));
      }
      out_offset_ = out.begin + out.bytes.size();
      err_offset_ = err.begin + err.bytes.size();
      r.lossy = out.lossy || err.lossy;
      r.delta = std::move(out.bytes);
      if (!err.bytes.empty()) {
        if (!r.delta.empty() && r.delta.back() != '\n') r.delta += '\n';
        r.delta += "[stderr]\n";
        r.delta += err.bytes;
      }
      // A path is named only while the file exists: the spill budget may
      // have removed a settled task's files to make room.
      auto existing = [](std::optional<std::filesystem::path> path) {
        std::error_code ignored;
        if (path && !std::filesystem::exists(*path, ignored)) path.reset();
        return path;
      };
      r.stdout_spill_path = existing(child_->out().spill_path());
      r.stderr_spill_path = existing(child_->err().spill_path());
      return r;
    }

    // reactor::client — called on the reactor thread.
    int fd(detail::child_source source) override {
      std::lock_guard lock(mutex_);
      return child_ ? child_->fd(source) : -1;
    }
    void on_event(detail::child_source source, char* scratch, std::size_t size,
                  detail::clock::time_point now) override {
      std::lock_guard lock(mutex_);
      if (source == detail::child_source::in)
        child_->on_writable(now);
      else if (source == detail::child_source::exit)
        child_->on_exit_signalled(now);
      else
        child_->on_readable(source, scratch, size, now);
    }
    std::optional<detail::clock::time_point> deadline() override {
      std::lock_guard lock(mutex_);
      return child_->next_deadline();
    }
    void on_time(detail::clock::time_point now) override {
      std::lock_guard lock(mutex_);
      child_->on_time(now);
    }
    bool settled() override {
      std::lock_guard lock(mutex_);
      return child_->settled();
    }

    /// Stamps the final facts (contract 17), then tells the listeners, then
    /// hands the task to the retention policy.
    void on_settled() override {
      task_snapshot final_facts;
      std::uint64_t held = 0;
      std::uint64_t serial = 0;
      {
        std::lock_guard lock(mutex_);
        stamp();
        settled_ = true;
        final_facts = snapshot_;
        held = memory_held();
        serial = serial_;
      }
      settled_cv_.notify_all();
      executor_.listeners_->notify(std::move(final_facts));  // the listener's own copy
      executor_.task_settled(serial, held);
    }

    /// Whether members that detached from the task's output are still live
    /// (a settled task that still has processes is not forgotten: disposal
    /// must reach them). Once they are gone the answer stays no.
    bool holds_live_members() {
      std::lock_guard lock(mutex_);
      if (leftovers_ && !(child_ && child_->has_live_members())) leftovers_ = false;
      return leftovers_;
    }

    /// The retention policy forgot this task: remove its spill files now
    /// (calls in progress on it see the paths withheld); its memory goes
    /// with the last reference.
    void forget_output() {
      std::lock_guard lock(mutex_);
      if (!child_) return;
      for (const auto& path : {child_->out().spill_path(), child_->err().spill_path()})
        if (path) executor_.spills_.forget(*path);
    }

   private:
    std::uint64_t memory_held() const {
      std::uint64_t held = snapshot_.command.capacity() + spawn_error_.capacity();
      if (child_) held += detail::held_bytes(child_->out()) + detail::held_bytes(child_->err());
      return held;
    }

    void stamp() {
      if (!child_) {
        snapshot_.status = task_status::killed;
        return;
      }
      const auto& exit = child_->exit();
      leftovers_ = child_->has_live_members();
      snapshot_.exit_code = exit.exit_code;
      snapshot_.signal = exit.signal;
      snapshot_.status = exit.signal ? task_status::killed : task_status::completed;
      const collected_output out = child_->out().finish();  // closes the spill files; the tails stay readable
      const collected_output err = child_->err().finish();
      if constexpr (confines) {
        if (confined_ && exit.exit_code && *exit.exit_code != 0) {
          if (executor_.confinement_.runner_failure(*confined_, err.text, out.text))
            snapshot_.sandbox->runner_failed = true;
          else
            snapshot_.sandbox->denied = executor_.confinement_.is_denial(err.text);
        }
      }
      confined_.reset();  // the status pipe is read; keep no descriptor per settled task
    }

    basic_executor& executor_;
    mutable std::mutex mutex_;
    std::condition_variable settled_cv_;
    task_snapshot snapshot_;
    std::optional<owner_token> owner_token_;
    std::optional<std::string> spec_stdin_;
    std::size_t cap_ = 0;
    std::optional<confined_launch> confined_;
    std::optional<detail::child_run<collector>> child_;
    std::uint64_t out_offset_ = 0;
    std::uint64_t err_offset_ = 0;
    std::string spawn_error_;
    bool spawn_error_read_ = false;
    bool settled_ = false;
    bool leftovers_ = false;  // live group members when the task settled (until they are gone)
    std::uint64_t serial_ = 0;

    /// Runs inside `request_stop`, on whichever thread asked: it takes only
    /// this task's mutex and the reactor's, never the registry's.
    struct stop_relay {
      task_record* task;
      void operator()() const noexcept {
        try {
          if (task->stop(detail::stop_cause::aborted)) task->executor_.reactor_.wake();
        } catch (...) {
          // A stop callback must not throw (std::terminate). The group was
          // signalled or it is already gone; kill and disposal remain.
        }
      }
    };
    // Last: unregistered first, while everything the callback uses exists.
    std::optional<std::stop_callback<stop_relay>> on_stop_;
  };

  /// Keeps the retention's age deadline on the reactor thread: a reactor
  /// client with no descriptors whose deadline is the next time a settled
  /// task may be forgotten.
  class housekeeper final : public detail::reactor::client {
   public:
    explicit housekeeper(basic_executor& owner) : executor_(owner) {}
    /// Disposal: the reactor may end without waiting for this client.
    void retire() { retired_ = true; }

    int fd(detail::child_source) override { return -1; }
    void on_event(detail::child_source, char*, std::size_t, detail::clock::time_point) override {}
    std::optional<detail::clock::time_point> deadline() override {
      std::lock_guard lock(executor_.registry_mutex_);
      return executor_.next_prune_at_;
    }
    void on_time(detail::clock::time_point now) override { executor_.prune(now); }
    bool settled() override { return retired_; }
    void on_settled() override {}

   private:
    basic_executor& executor_;
    std::atomic<bool> retired_{false};
  };

  /// A settled task in settle order, as the retention policy sees it.
  struct settled_entry {
    std::uint64_t serial;
    detail::clock::time_point at;
    std::uint64_t bytes;
    /// A task with live detached members is looked at again only after
    /// this (a /proc scan each time otherwise).
    detail::clock::time_point recheck_at{};
  };

  /// `bash-N` → N, for ids this executor could have issued (canonical
  /// decimal, no sign or leading zero); empty otherwise.
  static std::optional<std::uint64_t> serial_of(const task_id& id) {
    std::string_view text = id.value();
    constexpr std::string_view prefix = "bash-";
    if (!text.starts_with(prefix)) return std::nullopt;
    text.remove_prefix(prefix.size());
    if (text.empty() || text.front() < '1' || text.front() > '9') return std::nullopt;
    std::uint64_t serial = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), serial);
    if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
    return serial;
  }

  /// The task of `id`; a shared reference, so a call in progress survives
  /// the task being forgotten meanwhile. Every id up to the last issued one
  /// that is not held any more was forgotten (ids are never reused).
  std::shared_ptr<task_record> find(const task_id& id) const {
    const auto serial = serial_of(id);
    {
      std::lock_guard lock(registry_mutex_);
      if (serial) {
        if (auto it = tasks_.find(*serial); it != tasks_.end()) return it->second;
        if (*serial <= last_id_) throw task_forgotten(id, retention_text());
      }
    }
    throw unknown_task(id);
  }

  /// A task settled (on the reactor thread, or in `start` for a spawn that
  /// failed): it joins the retention queue, which is then enforced.
  void task_settled(std::uint64_t serial, std::uint64_t bytes) {
    const auto now = detail::clock::now();
    {
      std::lock_guard lock(registry_mutex_);
      if (disposing_ || serial == 0) return;
      settled_.push_back({serial, now, bytes});
      settled_bytes_ += bytes;
    }
    prune(now);
  }

  /// Enforces the retention limits: forgets the settled tasks over them,
  /// oldest settled first, and sets the next age deadline.
  void prune(detail::clock::time_point now) {
    const task_retention& limits = config_.retention;
    std::vector<std::shared_ptr<task_record>> forgotten;
    {
      std::lock_guard lock(registry_mutex_);
      if (disposing_) {
        next_prune_at_.reset();  // disposal forgets everything at once
        return;
      }
      std::optional<detail::clock::time_point> recheck;
      std::size_t i = 0;
      while (i < settled_.size()) {
        settled_entry& entry = settled_[i];
        // The count and the bytes never take the task that settled last: a
        // burst of tasks with live detached members must not starve it.
        const bool newest = i + 1 == settled_.size();
        const bool aged = now - entry.at >= limits.max_age;
        const bool over_count = settled_.size() > limits.max_tasks && !newest;
        const bool over_bytes = settled_bytes_ > limits.max_bytes && !newest;
        if (!aged && !over_count && !over_bytes) break;
        auto it = tasks_.find(entry.serial);
        if (it != tasks_.end()) {
          if (now < entry.recheck_at || it->second->holds_live_members()) {
            if (now >= entry.recheck_at) entry.recheck_at = now + std::chrono::seconds(1);
            recheck = recheck ? std::min(*recheck, entry.recheck_at) : entry.recheck_at;
            ++i;
            continue;
          }
          forgotten.push_back(std::move(it->second));
          tasks_.erase(it);
        }
        settled_bytes_ -= std::min(settled_bytes_, entry.bytes);
        settled_.erase(settled_.begin() + static_cast<std::ptrdiff_t>(i));
      }
      // The next age deadline: the first entry not looked at yet, or a
      // pinned entry's next look, whichever comes first.
      next_prune_at_ = recheck;
      if (i < settled_.size()) {
        const auto expiry = settled_[i].at + limits.max_age;
        next_prune_at_ = next_prune_at_ ? std::min(*next_prune_at_, expiry) : expiry;
      }
    }
    // Outside the registry lock: file removal, and the memory of every task
    // nobody else is reading goes here.
    for (auto& task : forgotten) task->forget_output();
  }

  executor_config config_;
  std::filesystem::path cwd_;
  std::filesystem::path workspace_root_;
  detail::spill_directory spills_;
  confinement_type confinement_;
  std::once_flag selected_;
  detail::unique_fd dev_null_;
  // Empty: process-group containment. Shared with every cgroup lease, so
  // it is torn down (its guardian reaped) after the last task.
  std::shared_ptr<detail::executor_cgroup> cgroups_;
  std::string containment_fallback_;
  std::shared_ptr<detail::listener_hub<task_snapshot>> listeners_;

  mutable std::mutex registry_mutex_;
  std::uint64_t last_id_ = 0;
  bool disposing_ = false;
  /// Every task not forgotten, by serial (start order).
  std::map<std::uint64_t, std::shared_ptr<task_record>> tasks_;
  /// The settled ones among them, in settle order (the retention queue).
  std::deque<settled_entry> settled_;
  std::uint64_t settled_bytes_ = 0;
  std::optional<detail::clock::time_point> next_prune_at_;
  housekeeper housekeeper_{*this};
  bool housekeeper_added_ = false;
  detail::spawn_thread spawner_;
  // Declared last: destroyed (joined) first, while the tasks still exist.
  detail::reactor reactor_;
};

}  // namespace bashexec

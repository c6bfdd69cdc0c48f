// detail/engine/launch_builder: everything one spawn needs before the spawn
// policy runs — `shell -c command`, the scrubbed environment (contract 7),
// fresh pipes (stdin only with `stdin_data`, else /dev/null: contract 8),
// the resource limits, a cgroup lease under cgroup containment, and the
// confinement's edits when the spawn is confined. The foreground driver and
// the background task both start from a `prepared_launch`; the probe of a
// confinement chain does too, so selection needs only a builder, never the
// executor.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bashexec/config.hpp"
#include "bashexec/confinement.hpp"
#include "bashexec/egress.hpp"
#include "bashexec/detail/engine/child_run.hpp"
#include "bashexec/detail/engine/environment.hpp"
#include "bashexec/detail/engine/executor_cgroup.hpp"
#include "bashexec/detail/engine/resource_limits.hpp"
#include "bashexec/detail/engine/spill_placement.hpp"
#include "bashexec/detail/kernel/egress_namespace.hpp"
#include "bashexec/detail/kernel/egress_namespace_pool.hpp"
#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/launch.hpp"
#include "bashexec/output.hpp"
#include "bashexec/request.hpp"
#include "bashexec/result.hpp"
#include "bashexec/spill_directory.hpp"

namespace bashexec::detail {

/// Moves a descriptor above 0–2 so renumbering the child's stdio can never
/// clobber it (a host that closed its own stdin would otherwise get fd 0).
BASHEXEC_DECL unique_fd above_stdio(unique_fd fd);

/// A pipe whose parent end is non-blocking and whose child end is blocking.
struct child_pipe {
  unique_fd parent;
  unique_fd child;
};

BASHEXEC_DECL child_pipe make_child_pipe(bool parent_reads);

/// The pipe whose write end is `fd`, opened anew (O_WRONLY, non-blocking,
/// close-on-exec, above 0-2): a second open file description, not a dup.
/// epoll keeps a registration while any descriptor of its description is
/// open, so the kept input of a task must not share the description the
/// reactor watches while it feeds `stdin_data`.
BASHEXEC_DECL unique_fd reopen_pipe_end(const unique_fd& fd);

BASHEXEC_DECL void require_directory(const std::filesystem::path& workdir);

/// Why `shell` must not run for this executor: not an absolute path, not
/// found, not trusted (detail/trust/find_program.hpp), or under a root a confined
/// command may write (so a command could replace it); empty when it may.
BASHEXEC_DECL std::string shell_refusal(const std::filesystem::path& shell, const std::filesystem::path& workspace_root);

/// One spawn, ready for the spawn policy, and what the parent keeps of it.
struct prepared_launch {
  launch_plan plan;
  std::optional<confined_launch> confined;
  std::optional<sandbox_info> info;
  parent_pipes pipes;
  unique_fd child_in, child_out, child_err;
  /// On a terminal: the slave's device number (how /proc names it) — the
  /// input-wait probe's evidence (detail/kernel/input_wait_probe.hpp).
  dev_t terminal_device = 0;
  /// With exec_request::capture_state: the file the shell's exit trap
  /// writes its state to (the parent reads it once the shell exited).
  unique_fd state_file;
  std::optional<cgroup_lease> cgroup;  // cgroup containment
  containment_mechanism containment = containment_mechanism::process_group;
  /// Under `network = allowlist`: that step's context (on the heap: the
  /// plan's hook points at it) and either a namespace made ahead, which the
  /// child joins, or the socketpair the child's step sends the listener of
  /// the namespace it makes on.
  struct egress_step {
    egress_namespace_context context;
    std::optional<ready_egress_namespace> ready;  // taken from the pool
    std::optional<egress_channel> channel;        // the child makes its own
    std::vector<std::string> grants;              // exec_spec::network_grants
  };
  std::unique_ptr<egress_step> egress;

  /// After the spawn: the child holds its ends now, and only the spawn
  /// needed the confinement's keep-alive (a Landlock ruleset fd). The one
  /// place the parent lets go of them.
  void release_child_ends() noexcept {
    child_in.reset();
    child_out.reset();
    child_err.reset();
    if (confined) confined->keep_alive.reset();
  }

  /// The spawned process is a runner whose pid namespace holds the command
  /// (bwrap's outer process), not the shell itself.
  bool runner_holds_command() const noexcept { return confined && confined->pid_namespace; }
};

/// The spawn policy created `process` in the cgroup it names
/// (process_handle::placed_in_cgroup) rather than in the plan's: that one
/// becomes `launch`'s lease, and the plan's goes back unused. A name the
/// executor cannot take (no cgroup containment, or not a cgroup of the
/// policy's own beside the plan's) kills and reaps the process and throws
/// infrastructure_error: a process nothing contains never runs on.
BASHEXEC_DECL void adopt_placed_cgroup(process_handle& process, prepared_launch& launch);

/// What contains an executor's spawns, decided once at construction.
struct containment_choice {
  /// Empty: process-group containment. Shared with every cgroup lease, so
  /// it is torn down (its guardian reaped) after the last task.
  std::shared_ptr<executor_cgroup> cgroups;
  /// Why `automatic` chose the process group; empty when it did not.
  std::string fallback;
};

/// `automatic` takes a cgroup where the spawn policy can join one before
/// exec and the host offers one, else the process group; an explicit
/// `cgroup` throws instead of falling back.
BASHEXEC_DECL containment_choice choose_containment(const executor_config& config, bool spawn_joins_cgroup,
                                                    std::string_view spawn_name);

/// Which driver a child_run serves.
///   foreground  drains its output at most `drain_timeout` after the shell
///               exited and leaves no process behind;
///   background  lives as long as its output is held open: no drain limit,
///               and detached members are left to `kill` and disposal.
enum class run_kind { foreground, background };

/// Builds the `prepared_launch` of each spawn of one executor, and the
/// child_run of each spawned one.
class launch_builder {
 public:
  launch_builder(const executor_config& config, const std::filesystem::path& workspace_root, spill_directory& spills,
                 std::shared_ptr<executor_cgroup> cgroups);

  const executor_config& config() const noexcept { return config_; }
  spill_directory& spills() const noexcept { return spills_; }
  bool contains_by_cgroup() const noexcept { return static_cast<bool>(cgroups_); }

  /// What would make a spawn meaningless (contract 2): throws
  /// infrastructure_error before anything is spawned.
  void require_runnable(const exec_spec& spec) const;

  /// The plan for one spawn; confined by `confinement` under `confine_under`
  /// when that is set (never danger-full-access), unconfined otherwise — for
  /// a confining policy that is danger-full-access, reported as such.
  template <class Confinement>
  prepared_launch build(const exec_spec& spec, const Confinement& confinement,
                        std::optional<sandbox_mode> confine_under) const {
    prepared_launch p;
    if (spec.terminal) {
      add_terminal(p, spec);
    } else {
      auto out = make_child_pipe(true);
      auto err = make_child_pipe(true);
      p.pipes.out = std::move(out.parent);
      p.pipes.err = std::move(err.parent);
      p.child_out = std::move(out.child);
      p.child_err = std::move(err.child);
      if (spec.stdin_data || spec.keep_stdin_open) {
        auto in = make_child_pipe(false);
        if (spec.keep_stdin_open) p.pipes.input = reopen_pipe_end(in.parent);
        p.pipes.in = std::move(in.parent);
        p.child_in = std::move(in.child);
      }
      p.plan.env = child_environment(spec.env ? &*spec.env : nullptr, config_.scrub);
      p.plan.stdin_fd = p.child_in ? p.child_in.get() : dev_null_.get();
      p.plan.stdout_fd = p.child_out.get();
      p.plan.stderr_fd = p.child_err.get();
    }
    p.plan.argv = {config_.shell.string(), "-c", spec.command};
    if (spec.capture_state) add_state_capture(p, spec);
    if (!spec.env_unset.empty()) remove_unset(p.plan.env, spec);
    p.plan.workdir = spec.workdir;
    p.plan.limits = plan_limits(config_.limits);
    // A spill directory under a root workspace-write grants (a workspace of
    // `/`) is made before such a spawn, so that it is bound read-only.
    if (confine_under == sandbox_mode::workspace_write && spills_under_writable_root_) spills_.ensure();
    if (auto spills = spills_.path(); !spills.empty()) p.plan.read_only_paths.push_back(std::move(spills));
    if (cgroups_) {
      p.cgroup.emplace(cgroups_->acquire());
      p.plan.cgroup_procs_fd = p.cgroup->procs_fd();
      p.plan.cgroup_fd = p.cgroup->dir_fd();
      p.containment = containment_mechanism::cgroup;
    }
    if constexpr (Confinement::confines) {
      // First among the hooks: the namespace exists before the confinement's
      // own steps drop the powers that make it.
      if (confine_under && proxies_network(config_.sandbox.network))
        add_egress_step(p, *confine_under, spec.network_grants);
      if (confine_under) {
        p.confined = confinement.prepare(*confine_under, workspace_root_, p.plan);
        p.confined->info.backend = backend_name(confinement);
        p.info = p.confined->info;
        if (p.confined->pid_namespace) p.containment = containment_mechanism::pid_namespace;
      } else {
        p.info.emplace();  // unwrapped: no enforcement, no backend
        p.info->mode = sandbox_mode::danger_full_access;
      }
    }
    return p;
  }

  /// After the spawn of an allowlist launch: its proxy, serving the
  /// listener the child sent, under `sandbox.egress` widened by the
  /// request's `network_grants`. Empty for any other
  /// launch. A spawn that returned has run the step, so a missing listener
  /// is a broken invariant: infrastructure_error.
  std::unique_ptr<egress_session> open_egress(prepared_launch& launch) const;

  /// The command of an allowlist launch is gone: its proxy and tunnels go
  /// with it, and the pool of namespaces may refill now that the call no
  /// longer competes with it. Returns the final report.
  network_report close_egress(egress_session& session) const;

  /// The one place a spawned `launch` becomes a child_run, for both drivers:
  /// the parent lets go of the child's ends, stdout is collected up to
  /// `stdout_cap` and stderr up to the executor's output_cap, and `kind`
  /// says how the child is stopped. Constructed in `slot` (a child_run is
  /// neither copied nor moved: the reactor holds its address).
  template <class Collector>
  child_run<Collector>& start_child(std::optional<child_run<Collector>>& slot, process_handle process,
                                    prepared_launch& launch, std::string stdin_data, std::size_t stdout_cap,
                                    run_kind kind, std::optional<clock::time_point> deadline) const {
    launch.release_child_ends();
    const stop_timing timing{config_.kill_grace,
                             kind == run_kind::foreground ? std::optional(config_.drain_timeout) : std::nullopt,
                             kind == run_kind::foreground, launch.runner_holds_command()};
    return slot.emplace(std::move(process), std::move(launch.pipes), std::move(stdin_data),
                        Collector(stdout_cap, spills_, output_stream::out),
                        Collector(config_.output_cap, spills_, output_stream::err), timing, deadline,
                        std::move(launch.cgroup));
  }

 private:
  /// A terminal of the command's own (detail/kernel/pseudo_terminal.hpp):
  /// its slave as the plan's stdin, stdout, stderr and controlling
  /// terminal, its master as the parent's output and input, TERM a real
  /// terminal type (unless the request sets one).
  void add_terminal(prepared_launch& p, const exec_spec& spec) const;

  /// The shell's final state through a file of its own
  /// (detail/engine/shell_state_capture.hpp): the wrapper as the script, the
  /// command as its argument, the file as the next inherited descriptor.
  void add_state_capture(prepared_launch& p, const exec_spec& spec) const;

  /// Removes `spec.env_unset`'s names from `env`, but not those `spec.env` sets.
  static void remove_unset(std::vector<std::string>& env, const exec_spec& spec);

  /// Plans the egress step (detail/kernel/egress_namespace.hpp) and the proxy
  /// variables; sandbox_unavailable under `mode` when the namespace cannot
  /// be made here (not root and user namespaces refused).
  void add_egress_step(prepared_launch& p, sandbox_mode mode, const std::vector<std::string>& grants) const;

  /// The backend that confines: a chain's selected candidate, else the
  /// policy itself.
  template <class Confinement>
  static std::string_view backend_name(const Confinement& confinement) {
    if constexpr (requires { confinement.selected_name(); })
      return confinement.selected_name();
    else
      return Confinement::name;
  }

  const executor_config& config_;
  const std::filesystem::path& workspace_root_;
  /// Why the configured shell must not run (detail/trust/find_program.hpp),
  /// decided once; empty when it may.
  std::string shell_refusal_;
  spill_directory& spills_;
  /// The spill parent lies under a root workspace-write grants: fixed per
  /// executor, so decided once rather than canonicalised on every spawn.
  bool spills_under_writable_root_;
  std::shared_ptr<executor_cgroup> cgroups_;
  unique_fd dev_null_;
  /// Under `network = allowlist` with CAP_SYS_ADMIN: namespaces made ahead
  /// of the call (detail/kernel/egress_namespace_pool.hpp); else empty.
  std::unique_ptr<egress_namespace_pool> egress_namespaces_;
};

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/engine/impl/launch_builder.ipp"
#endif

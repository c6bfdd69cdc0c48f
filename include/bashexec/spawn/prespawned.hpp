// spawn/prespawned: a spawn policy with a warm pool — processes started
// ahead of the call, in their own session, their plan's pre-exec hooks
// already run (a Landlock domain already enforced), waiting for the
// command-dependent half of a plan: argv, env, workdir and the descriptors.
// Each runs one command (execve of exactly the plan's argv, so `bash -c` is
// a cold `bash -c`) and is never reused. The waiting process shares the
// host's memory until its exec, like fork_exec's vfork child, so a waiting
// process costs its kernel task and a few stack pages, not a copy of the host
// (spawn/detail/prespawn_child.hpp).
//
// Lifecycle (docs/policies.md, "prespawned"):
//   - Key: everything fixed before the command is known — the hooks
//     (function, context, stage), the limits and the read_only_paths. A plan
//     is pooled only when it has no hooks or a `hook_owner` (launch.hpp) that
//     keeps their contexts alive for later calls; else it is served cold.
//   - A call whose key has a waiting process takes it (a warm spawn); any
//     other is served cold by fork_exec — the same child steps — and asks for
//     a refill. A waiting process found stopped or dead is dropped, not
//     taken; one that does not take its command within the claim's patience
//     (10 s, or what is left of the call's timeout: launch_plan::deadline)
//     is dropped with the rest of its key, and the call goes cold. Refill runs on one background thread owned by the policy, off
//     the caller's path, up to `config::per_key` per key.
//   - A key nobody asked for in `config::idle_timeout` loses its processes.
//   - The destructor kills and reaps every waiting process; none of them
//     holds any host descriptor, and none holds another's socket, so a
//     command from the pool sees no pool machinery.
//   - Cgroup: under cgroup containment each waiting process is created by
//     clone3(CLONE_INTO_CGROUP) in a cgroup of its own, `prespawn-N`, made
//     beside the executor's per-spawn cgroups (their parent is learnt from
//     the first plan's cgroup_fd); the call is then contained by that
//     cgroup (process_handle::placed_in_cgroup) and nothing moves on the
//     call's path — a move costs an RCU grace period on an idle machine.
//     Where clone3 is refused, the parent writes the taken process's pid to
//     the plan's cgroup_procs_fd before it sends the command instead. Either
//     way the process is in the call's cgroup before any command code runs.
//     Limits are applied right before exec, as in the cold path.
// What may differ from a cold spawn: state the process took from the host
// when it was started rather than at the call — the host's umask, rlimits,
// cgroup and credentials at that time (the call's own limits and cgroup are
// applied at the call), and the name of the call's cgroup (prespawn-N, not
// spawn-N).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include <boost/hana/set.hpp>
#include <boost/hana/type.hpp>

#include "bashexec/config.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/launch.hpp"
#include "bashexec/process_handle.hpp"
#include "bashexec/spawn.hpp"

namespace bashexec {

/// Spawn policy with a warm pool of processes per key; see the file comment.
class prespawned {
 public:
  static constexpr std::string_view name = "prespawned";
  static constexpr auto capabilities = boost::hana::make_set(
      boost::hana::type_c<spawn_capability::pre_exec>, boost::hana::type_c<spawn_capability::limits>,
      boost::hana::type_c<spawn_capability::cgroup>,
      boost::hana::type_c<spawn_capability::controlling_terminal>, boost::hana::type_c<spawn_capability::prespawned>);

  /// per_key, idle_timeout, max_keys (config.hpp).
  using config = prespawn_settings;

  /// What the pool did so far.
  struct counters {
    std::uint64_t warm = 0;     // calls served by a waiting process
    std::uint64_t cold = 0;     // calls served by fork_exec
    std::uint64_t started = 0;  // waiting processes started
    std::uint64_t lost = 0;     // waiting processes found dead or stopped when taken
  };

  prespawned();
  /// Throws std::invalid_argument naming the field of an invalid `settings`.
  explicit prespawned(config settings);
  /// The executor's `prespawn` settings.
  explicit prespawned(const executor_config& executor) : prespawned(executor.prespawn) {}
  prespawned(const prespawned&) = delete;
  prespawned& operator=(const prespawned&) = delete;
  ~prespawned();

  /// A warm spawn when `plan`'s key has a waiting process, else fork_exec's
  /// (and the key is refilled in the background).
  process_handle spawn(const launch_plan& plan) const;

  /// Blocks until every key asked for so far has `per_key` processes
  /// waiting, or `timeout` passed; whether they have. For a warm-up after
  /// a first call, and for tests.
  bool wait_until_warm(std::chrono::milliseconds timeout) const;

  counters stats() const;

  const config& settings() const noexcept;

 private:
  struct pool;  // spawn/impl/prespawned.ipp
  std::unique_ptr<pool> pool_;
};

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/spawn/impl/prespawned.ipp"
#endif

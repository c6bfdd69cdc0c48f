// containment: what a kill reaches — the choice an executor is configured
// with (`process_containment`) and the mechanism that actually contained a
// run or a task (`containment_mechanism`, stated on every result).
// docs/contract.md "Beyond": no orphans, ever.
#pragma once

#include <string_view>

#include "bashexec/detail/text/enum_names.hpp"

namespace bashexec {

namespace detail {
/// The spellings the two enums below share: `process_group` and `cgroup` name
/// the same mechanism whether configured or reported, so they are spelled once.
inline constexpr std::string_view process_group_spelling = "process_group";
inline constexpr std::string_view cgroup_spelling = "cgroup";
}  // namespace detail

/// What an executor contains its commands with (executor_config::containment).
enum class process_containment {
  /// The default: `cgroup` where it works, else `process_group`, decided once
  /// at construction and never an error. cgroup is chosen when the spawn
  /// policy has a pre-exec hook (`spawn_with<fork_exec>`, `sandbox_executor`),
  /// a writable cgroup2 hierarchy offers `cgroup.kill` (Linux 5.14+) and the
  /// guardian process starts; `local_executor` (posix_spawn, no hook) always
  /// gets `process_group`. basic_executor::containment() says which, and
  /// containment_fallback() why not cgroup.
  automatic,
  /// The child's process group only (no extra system calls): a command that
  /// calls setsid or double-forks into a new group escapes kills, the
  /// foreground leftover rule and disposal.
  process_group,
  /// The process group plus a cgroup v2 per spawn, which the child joins
  /// before exec: kills also write cgroup.kill, a run or task is settled only
  /// once its cgroup is empty, and a guardian process kills whatever is left
  /// when the executor's process dies, by any signal. The constructor throws
  /// when it cannot be had rather than fall back (invalid_argument for a
  /// spawn policy without a pre-exec hook, infrastructure_error naming what
  /// to enable for the host).
  cgroup,
};

template <>
struct detail::enum_names<process_containment> {
  static constexpr enum_table<process_containment, 3> table{{{process_containment::automatic, "automatic"},
      {process_containment::process_group, process_group_spelling},
      {process_containment::cgroup, cgroup_spelling}}};
};

/// The mechanism that contained one run or task (run_result::containment,
/// task_snapshot::containment): what its kills, its leftover rule and the
/// death of the executor's process reach.
enum class containment_mechanism {
  /// Its process group: a member that calls setsid escapes, and nothing is
  /// killed when the executor's process dies.
  process_group,
  /// Its own cgroup v2 under the executor's cgroup: setsid, nohup, double
  /// forks and daemons stay inside; the guardian kills them if the
  /// executor's process dies.
  cgroup,
  /// A pid namespace (bwrap confinement): every process of the command dies
  /// with the namespace's init.
  pid_namespace,
};

template <>
struct detail::enum_names<containment_mechanism> {
  static constexpr enum_table<containment_mechanism, 3> table{{{containment_mechanism::process_group,
      process_group_spelling}, {containment_mechanism::cgroup, cgroup_spelling},
      {containment_mechanism::pid_namespace, "pid_namespace"}}};
};

}  // namespace bashexec

// containment: what a kill reaches — the choice an executor is configured
// with (`process_containment`) and the mechanism that actually contained a
// run or a task (`containment_mechanism`, stated on every result).
// docs/contract.md "Beyond": no orphans, ever.
#pragma once

#include <string_view>

namespace bashexec {

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

constexpr std::string_view to_string(process_containment containment) noexcept {
  switch (containment) {
    case process_containment::automatic: return "automatic";
    case process_containment::process_group: return "process_group";
    case process_containment::cgroup: return "cgroup";
  }
  return "unknown";
}

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

constexpr std::string_view to_string(containment_mechanism mechanism) noexcept {
  switch (mechanism) {
    case containment_mechanism::process_group: return "process_group";
    case containment_mechanism::cgroup: return "cgroup";
    case containment_mechanism::pid_namespace: return "pid_namespace";
  }
  return "unknown";
}

}  // namespace bashexec

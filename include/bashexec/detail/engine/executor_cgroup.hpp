// detail/engine/executor_cgroup: an executor's own cgroup v2 — the parent of its
// per-spawn cgroups, a free list of them ready for the next spawn, and the
// guardian that kills them all if the executor's process dies
// (docs/contract.md "Beyond": no orphans, ever; see detail/kernel/cgroup.hpp for what a
// per-spawn cgroup does).
//
//   <host cgroup>/bashexec-<pid>-<random>/     this object, watched by the guardian
//                                       spawn-1/   one per running spawn
//                                       spawn-2/   (idle ones wait in the free list)
//
// Cost: creating and removing a cgroup costs about as much as the spawn of
// `true` itself (~0.7–2 ms of mkdir+rmdir here), so per-spawn cgroups are
// reused. A cgroup goes back to the free list once its run or task settled
// and it is verified reusable (cgroup.events: "populated 0", "frozen 0");
// one created at construction waits there for the first spawn. A call makes
// at most one mkdir — only when every idle cgroup is in use — and none in
// steady state; at most `keep` idle cgroups are kept, the rest removed.
//
// Trust: a per-spawn cgroup holds against any command that cannot write the
// cgroup filesystem (an unprivileged one, or one confined by Landlock or
// bwrap). An unconfined root command can move itself to another cgroup, as
// it can do anything else to its host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "bashexec/detail/kernel/cgroup.hpp"
#include "bashexec/detail/kernel/cgroup_guardian.hpp"
#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

class cgroup_lease;

class executor_cgroup : public std::enable_shared_from_this<executor_cgroup> {
 public:
  /// Idle cgroups kept (two descriptors each: cgroup.procs, cgroup.events).
  static constexpr std::size_t default_keep = 16;

  /// Starts the guardian, then creates `bashexec-<pid>-<random>` under
  /// `host_parent` (from locate_cgroup_parent) and one idle per-spawn cgroup.
  /// Throws infrastructure_error ("cgroup containment: …") naming what is
  /// missing; nothing is left behind then.
  static std::shared_ptr<executor_cgroup> create(const std::filesystem::path& host_parent,
                                                 std::size_t keep = default_keep);

  executor_cgroup(const executor_cgroup&) = delete;
  executor_cgroup& operator=(const executor_cgroup&) = delete;

  /// Every lease is gone (each holds a reference), so nothing of ours runs
  /// but what a lease gave up on: idle cgroups go, then the parent is killed
  /// (recursively) and removed, then the guardian is released and reaped.
  ~executor_cgroup();

  /// A per-spawn cgroup for the next child, its cgroup.procs open for it to
  /// join: an idle one when there is one, else a fresh one (one mkdir).
  cgroup_lease acquire();

  /// Takes over `placed`, a cgroup a spawn policy made directly in this
  /// executor's cgroup and created its process in (process_handle::
  /// placed_in_cgroup): the call is contained by it from then on, and it
  /// joins the free list when settled. Throws infrastructure_error for any
  /// other path — one outside this cgroup, or one of its own `spawn-` ones.
  cgroup_lease adopt(const std::filesystem::path& placed);

  const std::filesystem::path& path() const noexcept { return self_->path(); }
  pid_t guardian_pid() const noexcept { return guardian_.pid(); }

  /// Idle cgroups waiting in the free list (tests and benchmarks).
  std::size_t idle_count() const {
    std::lock_guard lock(mutex_);
    return idle_.size();
  }

 private:
  friend class cgroup_lease;

  explicit executor_cgroup(std::size_t keep) : keep_(keep) { idle_.reserve(keep); }

  cgroup make_spawn_cgroup();

  /// A settled spawn's cgroup: back to the free list when it is empty,
  /// unfrozen and has room, removed otherwise. No allocation (the free list
  /// holds its capacity from the start).
  void recycle(cgroup&& used) noexcept;

  const std::size_t keep_;
  mutable std::mutex mutex_;
  std::vector<cgroup> idle_;
  std::uint64_t created_ = 0;
  cgroup_guardian guardian_;
  std::optional<cgroup> self_;
};

/// One spawn's cgroup, on loan from its executor_cgroup. Destroying the
/// lease kills what is left in it (briefly waiting it out) and returns it
/// to the free list when it is reusable, else removes it.
class cgroup_lease {
 public:
  cgroup_lease(std::shared_ptr<executor_cgroup> owner, cgroup held) : owner_(std::move(owner)), cgroup_(std::move(held)) {}
  cgroup_lease(cgroup_lease&&) noexcept = default;
  cgroup_lease& operator=(cgroup_lease&&) = delete;
  cgroup_lease(const cgroup_lease&) = delete;
  ~cgroup_lease();

  const std::filesystem::path& path() const noexcept { return cgroup_->path(); }
  int procs_fd() const noexcept { return cgroup_->procs_fd(); }
  int dir_fd() const noexcept { return cgroup_->dir_fd(); }
  void close_procs_fd() noexcept { cgroup_->close_procs_fd(); }
  void kill() noexcept { cgroup_->kill(); }
  void signal_members(int signo) noexcept { cgroup_->signal_members(signo); }
  bool populated() const noexcept { return cgroup_->populated(); }
  member_census census() const noexcept { return cgroup_->census(); }

  /// A lease of `placed` from the same executor cgroup (executor_cgroup::
  /// adopt), for the call this lease was taken for: the spawn policy created
  /// its process there instead. This lease, unused, goes back as usual.
  cgroup_lease exchange_for(const std::filesystem::path& placed) const { return owner_->adopt(placed); }

 private:
  std::shared_ptr<executor_cgroup> owner_;
  std::optional<cgroup> cgroup_;
};

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/engine/impl/executor_cgroup.ipp"
#endif

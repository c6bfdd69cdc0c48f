// The bodies of detail/engine/executor_cgroup.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/executor_cgroup.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sys/stat.h>

#include <fmt/core.h>

#include "bashexec/detail/kernel/cgroup.hpp"
#include "bashexec/detail/kernel/cgroup_guardian.hpp"
#include "bashexec/errors.hpp"

namespace bashexec::detail {

BASHEXEC_DECL std::shared_ptr<executor_cgroup> executor_cgroup::create(const std::filesystem::path& host_parent,
                                                                      std::size_t keep) {
  std::shared_ptr<executor_cgroup> made(new executor_cgroup(keep));
  const std::string name = unique_cgroup_name();
  // Watcher first: no moment exists in which our cgroup has none.
  made->guardian_ = cgroup_guardian::start(host_parent / name);
  made->self_.emplace(create_checked_cgroup(host_parent, name));
  made->self_->close_procs_fd();  // nothing runs in the parent itself
  made->idle_.push_back(made->make_spawn_cgroup());
  return made;
}

BASHEXEC_DECL executor_cgroup::~executor_cgroup() {
  idle_.clear();
  self_.reset();  // kill if populated, bounded wait, rmdir of the whole tree
  guardian_.stop();
}

BASHEXEC_DECL cgroup_lease executor_cgroup::acquire() {
  for (;;) {
    std::optional<cgroup> idle;
    {
      std::lock_guard lock(mutex_);
      if (idle_.empty()) break;
      idle.emplace(std::move(idle_.back()));
      idle_.pop_back();
    }
    // Checked again: a root command elsewhere may have joined or frozen it
    // while it waited. Such a one is removed (after a kill) on destruction.
    if (idle->reusable()) return cgroup_lease(shared_from_this(), std::move(*idle));
  }
  return cgroup_lease(shared_from_this(), make_spawn_cgroup());
}

BASHEXEC_DECL cgroup_lease executor_cgroup::adopt(const std::filesystem::path& placed) {
  // The same directory by identity, not spelling: the policy found the
  // parent through a descriptor, this object through a configured path.
  const std::string name = placed.filename().string();
  struct stat here {}, there {};
  const bool beside = ::fstat(self_->dir_fd(), &here) == 0 && ::stat(placed.parent_path().c_str(), &there) == 0 &&
                      here.st_dev == there.st_dev && here.st_ino == there.st_ino;
  if (!beside || name.empty() || name == "." || name == ".." || name.rfind("spawn-", 0) == 0)
    throw infrastructure_error(fmt::format(
        "cgroup containment: the spawn policy placed its process in {}, which is not a cgroup of its own "
        "directly under {}",
        placed.string(), self_->path().string()));
  return cgroup_lease(shared_from_this(), cgroup::open_existing(placed));
}

BASHEXEC_DECL cgroup executor_cgroup::make_spawn_cgroup() {
  std::uint64_t n;
  {
    std::lock_guard lock(mutex_);
    n = ++created_;
  }
  return cgroup::create_at(path() / fmt::format("spawn-{}", n));
}

BASHEXEC_DECL void executor_cgroup::recycle(cgroup&& used) noexcept {
  if (used.reusable() && used.reopen_procs_fd()) {
    std::lock_guard lock(mutex_);
    if (idle_.size() < keep_) {
      idle_.push_back(std::move(used));
      return;
    }
  }
  // `used` is destroyed here: killed and waited for if a process is left.
}

BASHEXEC_DECL cgroup_lease::~cgroup_lease() {
  if (!owner_ || !cgroup_) return;
  if (cgroup_->populated()) {
    cgroup_->kill();
    cgroup_->wait_empty(std::chrono::milliseconds(2000));
  }
  owner_->recycle(std::move(*cgroup_));
}

}  // namespace bashexec::detail

// detail/kernel/cgroup: cgroup v2 containment (docs/contract.md "Beyond": no orphans, ever).
//
// A process group is easy to leave (setsid, setpgid); a cgroup is not — an
// unprivileged command cannot move itself out of it. Under cgroup
// containment every spawn runs in a cgroup of its own below the executor's
// cgroup (detail/engine/executor_cgroup.hpp); the child joins it before exec
// (fork_exec writes "0" to its cgroup.procs, see
// launch_plan::cgroup_procs_fd), so everything the command starts —
// double-forked, setsid'd or not — is in it. Kills add `cgroup.kill`
// (kernel 5.14+) to the group signal, and "settled" waits for
// `cgroup.events` to say "populated 0" (zombies do not count there either).
//
// Zombies: a process leaves its cgroup when it exits, not when it is reaped,
// so an init that never reaps orphans cannot keep a cgroup populated.
#pragma once

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include "bashexec/detail/kernel/cgroup_mount.hpp"
#include "bashexec/detail/kernel/process_group.hpp"
#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// `bashexec-<pid>-<random>`: the name of a cgroup this process creates
/// directly under a host's cgroup.
BASHEXEC_DECL std::string unique_cgroup_name();

/// One cgroup directory: created empty, removed with the object (after
/// killing and briefly waiting out whatever is still in it).
class cgroup {
 public:
  /// Creates `bashexec-<pid>-<random>` under `parent` and opens its
  /// cgroup.procs for writing (close-on-exec), ready for the child to join.
  static cgroup create(const std::filesystem::path& parent);

  /// Creates exactly `path` (throws on EEXIST too) and opens its cgroup.procs.
  static cgroup create_at(std::filesystem::path path);

  /// Takes over the existing cgroup `path` (made by another owner that let
  /// go of it: `release`), opening its descriptors; this object removes it.
  static cgroup open_existing(std::filesystem::path path) { return adopt(std::move(path)); }

  cgroup(cgroup&& other) noexcept
      : path_(std::move(other.path_)),
        dir_(std::move(other.dir_)),
        procs_(std::move(other.procs_)),
        events_(std::move(other.events_)),
        killed_(other.killed_) {
    other.path_.clear();
  }
  cgroup& operator=(cgroup&&) = delete;
  cgroup(const cgroup&) = delete;
  ~cgroup();

  const std::filesystem::path& path() const noexcept { return path_; }
  /// cgroup.procs, open for writing: the child writes "0" to it to join.
  int procs_fd() const noexcept { return procs_.get(); }
  /// The directory itself (O_DIRECTORY): where clone3(CLONE_INTO_CGROUP)
  /// creates a child, so it never has to move in (launch_plan::cgroup_fd).
  int dir_fd() const noexcept { return dir_.get(); }

  /// Once the child joined (or the spawn failed) the descriptor is not needed.
  void close_procs_fd() noexcept { procs_.reset(); }

  /// Lets go of the directory without touching it: its descriptors close,
  /// and another owner (open_existing) removes it. Returns its path.
  std::filesystem::path release() noexcept {
    dir_.reset();
    procs_.reset();
    events_.reset();
    return std::exchange(path_, {});
  }

  /// Opens cgroup.procs again for the next child (a reused cgroup); false
  /// when that fails (the directory was removed behind our back).
  bool reopen_procs_fd() noexcept;

  /// SIGKILLs every process in it, including ones forked meanwhile. A
  /// killed cgroup is never reused (see `reusable`).
  void kill() noexcept {
    killed_ = true;
    write_file("cgroup.kill", "1");
  }

  /// Sends `signo` to every process listed in cgroup.procs (the polite
  /// SIGTERM before cgroup.kill; there is no cgroup.signal).
  void signal_members(int signo) noexcept;

  /// Its members by their /proc facts (running or exiting, see
  /// process_group.hpp); the scan stops at the first running one. When
  /// cgroup.procs cannot be read, a populated cgroup counts as running.
  member_census census() const noexcept;

  /// True while a process (not a zombie) is in it; true when unreadable
  /// too, so a caller's wait stays bounded by its own give-up time.
  bool populated() const noexcept;

  /// Waits at most `limit` for "populated 0" (cgroup.events notifies
  /// POLLPRI on change; short polls guard against a missed notification).
  bool wait_empty(std::chrono::milliseconds limit) const noexcept;

  /// Fit to hold the next spawn: nothing lives in it and it is not frozen
  /// (a root command could write its own cgroup.freeze; the next command
  /// must not start frozen) and this object never wrote its cgroup.kill (a
  /// child born in a killed cgroup is SIGKILLed: `killed_`). Sub-cgroups a
  /// command made are harmless: kills and "populated" cover the whole
  /// subtree, and removal takes them too.
  bool reusable() const noexcept;

  /// rmdir, sub-cgroups first (a command may have made some); true once the
  /// directory is gone (EBUSY while populated).
  bool remove() noexcept;

  /// rmdir of `dir` after its sub-directories (cgroupfs has no other kind of
  /// entry one may remove); bounded depth, so a deep hostile tree costs no
  /// more than a refusal.
  static bool remove_tree(const char* dir, int depth) noexcept;

  /// Whether cgroup.kill can be written here (Linux 5.14+; a non-root
  /// cgroup has it, the root cgroup does not).
  bool has_kill() const noexcept;

 private:
  explicit cgroup(std::filesystem::path path) : path_(std::move(path)) {}

  static cgroup adopt(std::filesystem::path path);

  static unique_fd open_in(const std::filesystem::path& dir, const char* file, int flags);
  static unique_fd open_in(const std::filesystem::path& dir, const char* file, int flags, std::nothrow_t) noexcept;

  /// Calls `visit(pid)` for each pid in cgroup.procs until it returns
  /// false; false when the file could not be opened.
  template <class Visit>
  bool for_each_member(Visit visit) const noexcept {
    if (path_.empty()) return true;
    unique_fd fd = open_in(path_, "cgroup.procs", O_RDONLY, std::nothrow);
    if (!fd) return false;
    char buf[4096];
    long pid = 0;
    bool in_number = false;
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] >= '0' && buf[i] <= '9') {
          pid = pid * 10 + (buf[i] - '0');
          in_number = true;
        } else if (in_number) {
          if (!visit(static_cast<pid_t>(pid))) return true;
          pid = 0;
          in_number = false;
        }
      }
    }
    if (in_number) visit(static_cast<pid_t>(pid));
    return true;
  }

  static bool events_populated(int fd) noexcept;

  void write_file(const char* file, std::string_view text) noexcept;

  std::filesystem::path path_;
  unique_fd dir_;
  unique_fd procs_;
  // Kept open: "populated" is read on every settle and every stop round, one
  // pread each rather than open + pread + close.
  unique_fd events_;
  // Once cgroup.kill was written, Linux (seen on 6.18) SIGKILLs every child
  // later created in the cgroup by clone3(CLONE_INTO_CGROUP) at birth — an
  // empty cgroup too, for good — so a killed cgroup is removed, not reused.
  bool killed_ = false;
};

/// The host cgroup an executor's cgroup is created under: `configured` when
/// given, else the host's own v2 cgroup. Checks that it is a directory on a
/// cgroup2 filesystem; throws infrastructure_error naming what to enable
/// otherwise (every message starts "cgroup containment: ").
BASHEXEC_DECL std::filesystem::path locate_cgroup_parent(const std::optional<std::filesystem::path>& configured);

/// A cgroup directly under `parent` (named `name`, or
/// `bashexec-<pid>-<random>`) that proves containment works there: we may
/// create cgroups (and open their cgroup.procs), and the kernel has
/// cgroup.kill (5.14+; the root cgroup itself has none, so the parent cannot
/// tell). Throws infrastructure_error naming what to enable otherwise.
BASHEXEC_DECL cgroup create_checked_cgroup(const std::filesystem::path& parent, const std::string& name = {});

/// locate_cgroup_parent, then a throwaway create_checked_cgroup under it:
/// the parent an executor would use here, or infrastructure_error saying why
/// there is none.
BASHEXEC_DECL std::filesystem::path resolve_cgroup_parent(const std::optional<std::filesystem::path>& configured);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/cgroup.ipp"
#endif

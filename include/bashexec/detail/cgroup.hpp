// detail/cgroup: cgroup v2 containment (docs/contract.md "Beyond": no orphans, ever).
//
// A process group is easy to leave (setsid, setpgid); a cgroup is not — an
// unprivileged command cannot move itself out of it. Under cgroup
// containment every spawn runs in a cgroup of its own below the executor's
// cgroup (detail/executor_cgroup.hpp); the child joins it before exec
// (fork_exec writes "0" to its cgroup.procs, see
// launch_plan::cgroup_procs_fd), so everything the command starts —
// double-forked, setsid'd or not — is in it. Kills add `cgroup.kill`
// (kernel 5.14+) to the group signal, and "settled" waits for
// `cgroup.events` to say "populated 0" (zombies do not count there either).
//
// Zombies: a process leaves its cgroup when it exits, not when it is reaped,
// so an init that never reaps orphans cannot keep a cgroup populated.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/detail/process_group.hpp"
#include "bashexec/detail/cgroup_mount.hpp"
#include "bashexec/detail/unique_fd.hpp"
#include "bashexec/errors.hpp"

namespace bashexec::detail {

/// `bashexec-<pid>-<random>`: the name of a cgroup this process creates
/// directly under a host's cgroup.
inline std::string unique_cgroup_name() {
  std::uint64_t random = 0;
  // getrandom(2) of 8 bytes from an initialised pool never blocks or comes
  // up short; the clock is a fallback for a seccomp profile that refuses it.
  if (::getrandom(&random, sizeof random, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof random))
    random = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return fmt::format("bashexec-{}-{:016x}", ::getpid(), random);
}

/// One cgroup directory: created empty, removed with the object (after
/// killing and briefly waiting out whatever is still in it).
class cgroup {
 public:
  /// Creates `bashexec-<pid>-<random>` under `parent` and opens its
  /// cgroup.procs for writing (close-on-exec), ready for the child to join.
  static cgroup create(const std::filesystem::path& parent) {
    for (int attempt = 0;; ++attempt) {
      auto path = parent / unique_cgroup_name();
      if (::mkdir(path.c_str(), 0755) == 0) return adopt(std::move(path));
      if (errno != EEXIST || attempt == 8) throw_syscall(fmt::format("mkdir {}", path.string()));
    }
  }

  /// Creates exactly `path` (throws on EEXIST too) and opens its cgroup.procs.
  static cgroup create_at(std::filesystem::path path) {
    if (::mkdir(path.c_str(), 0755) != 0) throw_syscall(fmt::format("mkdir {}", path.string()));
    return adopt(std::move(path));
  }

  cgroup(cgroup&& other) noexcept
      : path_(std::move(other.path_)), procs_(std::move(other.procs_)), events_(std::move(other.events_)) {
    other.path_.clear();
  }
  cgroup& operator=(cgroup&&) = delete;
  cgroup(const cgroup&) = delete;
  ~cgroup() {
    if (path_.empty()) return;
    procs_.reset();
    if (populated()) {
      kill();
      wait_empty(std::chrono::milliseconds(2000));
    }
    remove();
  }

  const std::filesystem::path& path() const noexcept { return path_; }
  /// cgroup.procs, open for writing: the child writes "0" to it to join.
  int procs_fd() const noexcept { return procs_.get(); }

  /// Once the child joined (or the spawn failed) the descriptor is not needed.
  void close_procs_fd() noexcept { procs_.reset(); }

  /// Opens cgroup.procs again for the next child (a reused cgroup); false
  /// when that fails (the directory was removed behind our back).
  bool reopen_procs_fd() noexcept {
    if (procs_) return true;
    procs_ = open_in(path_, "cgroup.procs", O_WRONLY, std::nothrow);
    return static_cast<bool>(procs_);
  }

  /// SIGKILLs every process in it, including ones forked meanwhile.
  void kill() noexcept { write_file("cgroup.kill", "1"); }

  /// Sends `signo` to every process listed in cgroup.procs (the polite
  /// SIGTERM before cgroup.kill; there is no cgroup.signal).
  void signal_members(int signo) noexcept {
    for_each_member([signo](pid_t pid) {
      ::kill(pid, signo);
      return true;
    });
  }

  /// Its members by their /proc facts (running or exiting, see
  /// process_group.hpp); the scan stops at the first running one. When
  /// cgroup.procs cannot be read, a populated cgroup counts as running.
  member_census census() const noexcept {
    member_census result;
    if (path_.empty()) return result;
    const bool read = for_each_member([&result](pid_t pid) {
      count_process(pid, result);
      return !result.running;
    });
    if (!read && populated()) result.running = true;
    return result;
  }

  /// True while a process (not a zombie) is in it; true when unreadable
  /// too, so a caller's wait stays bounded by its own give-up time.
  bool populated() const noexcept {
    if (path_.empty()) return false;
    return !events_ || events_populated(events_.get());
  }

  /// Waits at most `limit` for "populated 0" (cgroup.events notifies
  /// POLLPRI on change; short polls guard against a missed notification).
  bool wait_empty(std::chrono::milliseconds limit) const noexcept {
    if (!events_) return false;
    const auto until = std::chrono::steady_clock::now() + limit;
    while (events_populated(events_.get())) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{events_.get(), POLLPRI, 0};
      ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 10)));
    }
    return true;
  }

  /// Fit to hold the next spawn: nothing lives in it and it is not frozen
  /// (a root command could write its own cgroup.freeze; the next command
  /// must not start frozen). Sub-cgroups a command made are harmless: kills
  /// and "populated" cover the whole subtree, and removal takes them too.
  bool reusable() const noexcept {
    if (path_.empty() || !events_) return false;
    char buf[256];
    ssize_t n = ::pread(events_.get(), buf, sizeof buf - 1, 0);
    if (n <= 0) return false;
    buf[n] = '\0';
    const char* populated = std::strstr(buf, "populated ");
    const char* frozen = std::strstr(buf, "frozen ");
    return populated && populated[sizeof "populated " - 1] == '0' &&
           (!frozen || frozen[sizeof "frozen " - 1] == '0');
  }

  /// rmdir, sub-cgroups first (a command may have made some); true once the
  /// directory is gone (EBUSY while populated).
  bool remove() noexcept {
    if (path_.empty()) return true;
    if (!remove_tree(path_.c_str(), 0)) return false;
    procs_.reset();
    events_.reset();
    path_.clear();
    return true;
  }

  /// rmdir of `dir` after its sub-directories (cgroupfs has no other kind of
  /// entry one may remove); bounded depth, so a deep hostile tree costs no
  /// more than a refusal.
  static bool remove_tree(const char* dir, int depth) noexcept {
    if (::rmdir(dir) == 0 || errno == ENOENT) return true;
    if ((errno != EBUSY && errno != ENOTEMPTY) || depth >= 16) return false;
    if (DIR* d = ::opendir(dir)) {
      while (dirent* entry = ::readdir(d)) {
        if (entry->d_type != DT_DIR || std::strcmp(entry->d_name, ".") == 0 || std::strcmp(entry->d_name, "..") == 0)
          continue;
        char sub[4096];
        if (std::snprintf(sub, sizeof sub, "%s/%s", dir, entry->d_name) < static_cast<int>(sizeof sub))
          remove_tree(sub, depth + 1);
      }
      ::closedir(d);
    }
    return ::rmdir(dir) == 0 || errno == ENOENT;
  }

  /// Whether cgroup.kill can be written here (Linux 5.14+; a non-root
  /// cgroup has it, the root cgroup does not).
  bool has_kill() const noexcept { return ::access((path_ / "cgroup.kill").c_str(), W_OK) == 0; }

 private:
  explicit cgroup(std::filesystem::path path) : path_(std::move(path)) {}

  static cgroup adopt(std::filesystem::path path) {
    cgroup made(std::move(path));
    made.procs_ = open_in(made.path_, "cgroup.procs", O_WRONLY);  // throws: `made` removes the directory
    made.events_ = open_in(made.path_, "cgroup.events", O_RDONLY);
    return made;
  }

  static unique_fd open_in(const std::filesystem::path& dir, const char* file, int flags) {
    const auto path = dir / file;
    unique_fd fd(::open(path.c_str(), flags | O_CLOEXEC));
    if (!fd) throw_syscall(fmt::format("open {}", path.string()));  // the owner's destructor removes `dir`
    return fd;
  }
  static unique_fd open_in(const std::filesystem::path& dir, const char* file, int flags, std::nothrow_t) noexcept {
    char path[4096];
    std::snprintf(path, sizeof path, "%s/%s", dir.c_str(), file);
    return unique_fd(::open(path, flags | O_CLOEXEC));
  }

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

  static bool events_populated(int fd) noexcept {
    char buf[256];
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return true;
    buf[n] = '\0';
    const char* field = std::strstr(buf, "populated ");
    return !field || field[sizeof "populated " - 1] != '0';
  }

  void write_file(const char* file, std::string_view text) noexcept {
    if (path_.empty()) return;
    unique_fd fd = open_in(path_, file, O_WRONLY, std::nothrow);
    if (fd) [[maybe_unused]] auto n = ::write(fd.get(), text.data(), text.size());
  }

  std::filesystem::path path_;
  unique_fd procs_;
  // Kept open: "populated" is read on every settle and every stop round, one
  // pread each rather than open + pread + close.
  unique_fd events_;
};

/// The host cgroup an executor's cgroup is created under: `configured` when
/// given, else the host's own v2 cgroup. Checks that it is a directory on a
/// cgroup2 filesystem; throws infrastructure_error naming what to enable
/// otherwise (every message starts "cgroup containment: ").
inline std::filesystem::path locate_cgroup_parent(const std::optional<std::filesystem::path>& configured) {
  std::filesystem::path parent;
  if (configured) {
    parent = *configured;
  } else {
    auto mount = find_cgroup2_mount();
    if (!mount)
      throw infrastructure_error(
          "cgroup containment: no cgroup2 filesystem is mounted (mount one, e.g. `mount -t cgroup2 none "
          "/sys/fs/cgroup/unified`, or boot with systemd.unified_cgroup_hierarchy=1)");
    auto own = current_cgroup2_path();
    if (!own)
      throw infrastructure_error("cgroup containment: /proc/self/cgroup has no cgroup v2 entry (\"0::<path>\")");
    std::string relative = *own;
    const std::string& root = mount->root;
    if (root != "/") {
      if (relative.compare(0, root.size(), root) != 0 ||
          (relative.size() > root.size() && relative[root.size()] != '/'))
        throw infrastructure_error(fmt::format(
            "cgroup containment: this process's cgroup {} is not visible under the cgroup2 mount {} (root {}); "
            "set cgroup_parent",
            *own, mount->point.string(), root));
      relative.erase(0, root.size());
    }
    parent = mount->point / std::filesystem::path(relative).relative_path();
  }

  struct statfs fs {};
  if (::statfs(parent.c_str(), &fs) != 0)
    throw infrastructure_error(
        fmt::format("cgroup containment: cgroup parent {}: {}", parent.string(), std::strerror(errno)));
  if (static_cast<long>(fs.f_type) != cgroup2_magic)
    throw infrastructure_error(
        fmt::format("cgroup containment: cgroup parent {} is not on a cgroup2 filesystem", parent.string()));
  return parent;
}

/// A cgroup directly under `parent` (named `name`, or
/// `bashexec-<pid>-<random>`) that proves containment works there: we may
/// create cgroups (and open their cgroup.procs), and the kernel has
/// cgroup.kill (5.14+; the root cgroup itself has none, so the parent cannot
/// tell). Throws infrastructure_error naming what to enable otherwise.
inline cgroup create_checked_cgroup(const std::filesystem::path& parent, const std::string& name = {}) {
  std::optional<cgroup> made;
  try {
    made.emplace(name.empty() ? cgroup::create(parent) : cgroup::create_at(parent / name));
  } catch (const infrastructure_error& e) {
    throw infrastructure_error(fmt::format(
        "cgroup containment: cannot create a cgroup under {}: {} (run as root or delegate that cgroup to this "
        "user, or set cgroup_parent)",
        parent.string(), e.what()));
  }
  if (!made->has_kill())
    throw infrastructure_error(fmt::format(
        "cgroup containment: cgroup.kill is not usable under {}: {} (it needs Linux 5.14 or later)",
        parent.string(), std::strerror(errno)));
  return std::move(*made);
}

/// locate_cgroup_parent, then a throwaway create_checked_cgroup under it:
/// the parent an executor would use here, or infrastructure_error saying why
/// there is none.
inline std::filesystem::path resolve_cgroup_parent(const std::optional<std::filesystem::path>& configured) {
  std::filesystem::path parent = locate_cgroup_parent(configured);
  create_checked_cgroup(parent);  // removed at once
  return parent;
}

}  // namespace bashexec::detail

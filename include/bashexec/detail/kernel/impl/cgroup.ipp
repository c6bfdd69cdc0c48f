// The bodies of detail/kernel/cgroup.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/cgroup.hpp"

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

#include "bashexec/detail/kernel/cgroup_mount.hpp"
#include "bashexec/detail/kernel/process_group.hpp"
#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/errors.hpp"

namespace bashexec::detail {

BASHEXEC_DECL std::string unique_cgroup_name() {
  std::uint64_t random = 0;
  // getrandom(2) of 8 bytes from an initialised pool never blocks or comes
  // up short; the clock is a fallback for a seccomp profile that refuses it.
  if (::getrandom(&random, sizeof random, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof random))
    random = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return fmt::format("bashexec-{}-{:016x}", ::getpid(), random);
}

BASHEXEC_DECL cgroup cgroup::create(const std::filesystem::path& parent) {
  for (int attempt = 0;; ++attempt) {
    auto path = parent / unique_cgroup_name();
    if (::mkdir(path.c_str(), 0755) == 0) return adopt(std::move(path));
    if (errno != EEXIST || attempt == 8) throw_syscall(fmt::format("mkdir {}", path.string()));
  }
}

BASHEXEC_DECL cgroup cgroup::create_at(std::filesystem::path path) {
  if (::mkdir(path.c_str(), 0755) != 0) throw_syscall(fmt::format("mkdir {}", path.string()));
  return adopt(std::move(path));
}

BASHEXEC_DECL cgroup::~cgroup() {
  if (path_.empty()) return;
  procs_.reset();
  // Removed with its parent already (a prespawned pool's cgroup outlived by
  // its executor's): nothing is left to kill or wait for.
  if (struct stat st {}; ::stat(path_.c_str(), &st) != 0 && errno == ENOENT) return;
  if (populated()) {
    kill();
    wait_empty(std::chrono::milliseconds(2000));
  }
  remove();
}

BASHEXEC_DECL bool cgroup::reopen_procs_fd() noexcept {
  if (procs_) return true;
  procs_ = open_in(path_, "cgroup.procs", O_WRONLY, std::nothrow);
  return static_cast<bool>(procs_);
}

BASHEXEC_DECL void cgroup::signal_members(int signo) noexcept {
  for_each_member([signo](pid_t pid) {
    ::kill(pid, signo);
    return true;
  });
}

BASHEXEC_DECL member_census cgroup::census() const noexcept {
  member_census result;
  if (path_.empty()) return result;
  const bool read = for_each_member([&result](pid_t pid) {
    count_process(pid, result);
    return !result.running;
  });
  if (!read && populated()) result.running = true;
  return result;
}

BASHEXEC_DECL bool cgroup::populated() const noexcept {
  if (path_.empty()) return false;
  return !events_ || events_populated(events_.get());
}

BASHEXEC_DECL bool cgroup::wait_empty(std::chrono::milliseconds limit) const noexcept {
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

BASHEXEC_DECL bool cgroup::reusable() const noexcept {
  if (path_.empty() || !events_ || killed_) return false;
  char buf[256];
  ssize_t n = ::pread(events_.get(), buf, sizeof buf - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* populated = std::strstr(buf, "populated ");
  const char* frozen = std::strstr(buf, "frozen ");
  return populated && populated[sizeof "populated " - 1] == '0' &&
         (!frozen || frozen[sizeof "frozen " - 1] == '0');
}

BASHEXEC_DECL bool cgroup::remove() noexcept {
  if (path_.empty()) return true;
  if (!remove_tree(path_.c_str(), 0)) return false;
  dir_.reset();
  procs_.reset();
  events_.reset();
  path_.clear();
  return true;
}

BASHEXEC_DECL bool cgroup::remove_tree(const char* dir, int depth) noexcept {
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

BASHEXEC_DECL bool cgroup::has_kill() const noexcept { return ::access((path_ / "cgroup.kill").c_str(), W_OK) == 0; }

BASHEXEC_DECL cgroup cgroup::adopt(std::filesystem::path path) {
  cgroup made(std::move(path));
  made.dir_ = open_in(made.path_, ".", O_RDONLY | O_DIRECTORY);  // throws: `made` removes the directory
  made.procs_ = open_in(made.path_, "cgroup.procs", O_WRONLY);
  made.events_ = open_in(made.path_, "cgroup.events", O_RDONLY);
  return made;
}

BASHEXEC_DECL unique_fd cgroup::open_in(const std::filesystem::path& dir, const char* file, int flags) {
  const auto path = dir / file;
  unique_fd fd(::open(path.c_str(), flags | O_CLOEXEC));
  if (!fd) throw_syscall(fmt::format("open {}", path.string()));  // the owner's destructor removes `dir`
  return fd;
}

BASHEXEC_DECL unique_fd cgroup::open_in(const std::filesystem::path& dir, const char* file, int flags,
                                        std::nothrow_t) noexcept {
  char path[4096];
  std::snprintf(path, sizeof path, "%s/%s", dir.c_str(), file);
  return unique_fd(::open(path, flags | O_CLOEXEC));
}

BASHEXEC_DECL bool cgroup::events_populated(int fd) noexcept {
  char buf[256];
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return true;
  buf[n] = '\0';
  const char* field = std::strstr(buf, "populated ");
  return !field || field[sizeof "populated " - 1] != '0';
}

BASHEXEC_DECL void cgroup::write_file(const char* file, std::string_view text) noexcept {
  if (path_.empty()) return;
  unique_fd fd = open_in(path_, file, O_WRONLY, std::nothrow);
  if (fd) [[maybe_unused]] auto n = ::write(fd.get(), text.data(), text.size());
}

BASHEXEC_DECL std::filesystem::path locate_cgroup_parent(const std::optional<std::filesystem::path>& configured) {
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

BASHEXEC_DECL cgroup create_checked_cgroup(const std::filesystem::path& parent, const std::string& name) {
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

BASHEXEC_DECL std::filesystem::path resolve_cgroup_parent(const std::optional<std::filesystem::path>& configured) {
  std::filesystem::path parent = locate_cgroup_parent(configured);
  create_checked_cgroup(parent);  // removed at once
  return parent;
}

}  // namespace bashexec::detail

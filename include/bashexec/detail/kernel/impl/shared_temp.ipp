// The bodies of detail/kernel/shared_temp.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/shared_temp.hpp"

#include <cerrno>
#include <charconv>
#include <optional>

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>

namespace bashexec::detail {

namespace shared_temp_impl {

/// A deeper tree is none of ours: a spill or session directory is flat.
constexpr int max_depth = 16;

/// The names in the open directory `fd` but `.` and `..`; the descriptor is
/// duplicated, so `fd` stays open and its offset untouched.
inline std::vector<std::string> names_in(int fd) {
  std::vector<std::string> names;
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return names;
  DIR* dir = ::fdopendir(copy);
  if (dir == nullptr) {
    ::close(copy);
    return names;
  }
  ::rewinddir(dir);
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(dir);
  return names;
}

inline void remove_tree(int dirfd, const std::string& name, int depth) {
  if (::unlinkat(dirfd, name.c_str(), 0) == 0 || errno != EISDIR || depth > max_depth) return;
  const unique_fd dir(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) return;
  for (const auto& child : names_in(dir.get())) remove_tree(dir.get(), child, depth + 1);
  ::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR);
}

inline std::uint64_t tree_bytes(int dirfd, const std::string& name, int depth) {
  struct stat info {};
  if (::fstatat(dirfd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) return 0;
  if (S_ISREG(info.st_mode)) return static_cast<std::uint64_t>(info.st_size);
  if (!S_ISDIR(info.st_mode) || depth > max_depth) return 0;
  const unique_fd dir(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) return 0;
  std::uint64_t total = 0;
  for (const auto& child : names_in(dir.get())) total += tree_bytes(dir.get(), child, depth + 1);
  return total;
}

/// The inode of this process's pid namespace; 0 when it cannot be read.
inline std::uint64_t pid_namespace() noexcept {
  struct stat info {};
  return ::stat("/proc/self/ns/pid", &info) == 0 ? static_cast<std::uint64_t>(info.st_ino) : 0;
}

/// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot);
/// empty with errno set when it cannot be read.
inline std::optional<std::uint64_t> start_time(long pid) {
  const unique_fd fd(::open(fmt::format("/proc/{}/stat", pid).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  char buffer[1024];
  const ssize_t n = ::read(fd.get(), buffer, sizeof buffer - 1);
  if (n <= 0) return errno = EIO, std::nullopt;
  const std::string_view text(buffer, static_cast<std::size_t>(n));
  const auto close = text.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string_view::npos) return errno = EIO, std::nullopt;
  std::string_view rest = text.substr(close + 1);
  for (int field = 2; field < 22; ++field) {
    const auto space = rest.find(' ');
    if (space == std::string_view::npos) return errno = EIO, std::nullopt;
    rest.remove_prefix(space + 1);
  }
  std::uint64_t value = 0;
  if (std::from_chars(rest.data(), rest.data() + rest.size(), value).ec != std::errc{}) return errno = EIO, std::nullopt;
  return value;
}

inline bool read_number(std::string_view& text, std::uint64_t& value, char end) {
  const auto [next, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{}) return false;
  text.remove_prefix(static_cast<std::size_t>(next - text.data()));
  if (end == '\0') return text.empty();
  if (text.empty() || text.front() != end) return false;
  text.remove_prefix(1);
  return true;
}

}  // namespace shared_temp_impl

BASHEXEC_DECL std::string random_name(std::string_view prefix) {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_syscall("getrandom");
    }
    got += static_cast<std::size_t>(n);
  }
  std::string name(prefix);
  for (unsigned char b : bytes) name += fmt::format("{:02x}", b);
  return name;
}

BASHEXEC_DECL unique_fd open_directory(const std::filesystem::path& path) noexcept {
  return unique_fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

BASHEXEC_DECL std::string shared_parent_problem(int fd) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) return syscall_message("fstat");
  if (info.st_uid != ::geteuid() && info.st_uid != 0)
    return fmt::format("owned by uid {}, neither this user ({}) nor root", info.st_uid, ::geteuid());
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (info.st_mode & S_ISVTX) == 0)
    return fmt::format("writable by others (mode {:04o}) without the sticky bit", info.st_mode & 07777);
  return {};
}

BASHEXEC_DECL bool private_to_user(int fd) noexcept {
  struct stat info {};
  return ::fstat(fd, &info) == 0 && info.st_uid == ::geteuid() && (info.st_mode & 077) == 0;
}

BASHEXEC_DECL unique_fd open_private_directory(int parent_fd, const std::string& name, std::string& why) {
  if (::mkdirat(parent_fd, name.c_str(), 0700) != 0 && errno != EEXIST) {
    why = syscall_message("mkdir");
    return {};
  }
  unique_fd fd(::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    why = errno == ELOOP || errno == ENOTDIR ? "a symbolic link or a file, not a directory of this user"
                                            : syscall_message("open");
    return {};
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    why = syscall_message("fstat");
    return {};
  }
  if (info.st_uid != ::geteuid()) {
    why = fmt::format("owned by uid {}, not by this user ({})", info.st_uid, ::geteuid());
    return {};
  }
  if ((info.st_mode & 077) != 0) {
    why = fmt::format("mode {:04o}: others may use it (0700 expected)", info.st_mode & 07777);
    return {};
  }
  return fd;
}

BASHEXEC_DECL std::pair<unique_fd, std::string> make_stamped_directory(int parent_fd, std::string_view prefix) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string name = fmt::format("{}{}-{}", prefix, owner_stamp(), random_name(""));
    if (::mkdirat(parent_fd, name.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;
      throw_syscall(fmt::format("mkdir {}", name));
    }
    unique_fd fd(::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat info {};
    if (!fd || ::fstat(fd.get(), &info) != 0 || info.st_uid != ::geteuid())
      throw infrastructure_error(fmt::format("the new directory {} was replaced before it could be opened", name));
    ::fchmod(fd.get(), 0700);  // exact mode whatever the umask
    return {std::move(fd), std::move(name)};
  }
  throw infrastructure_error(fmt::format("{}: could not create a unique name", prefix));
}

BASHEXEC_DECL void remove_tree_at(int dirfd, const std::string& name) noexcept {
  try {
    shared_temp_impl::remove_tree(dirfd, name, 0);
  } catch (...) {  // out of memory: leave the rest
  }
}

BASHEXEC_DECL std::uint64_t tree_bytes_at(int dirfd, const std::string& name) noexcept {
  try {
    return shared_temp_impl::tree_bytes(dirfd, name, 0);
  } catch (...) {
    return 0;
  }
}

BASHEXEC_DECL std::string owner_stamp() {
  const long pid = ::getpid();
  return fmt::format("{}.{}.{}", shared_temp_impl::pid_namespace(), pid,
                     shared_temp_impl::start_time(pid).value_or(0));
}

BASHEXEC_DECL bool owner_gone(std::string_view stamp) {
  std::uint64_t ns = 0, pid = 0, start = 0;
  if (!shared_temp_impl::read_number(stamp, ns, '.') || !shared_temp_impl::read_number(stamp, pid, '.') ||
      !shared_temp_impl::read_number(stamp, start, '\0'))
    return false;
  if (ns == 0 || ns != shared_temp_impl::pid_namespace() || pid == 0) return false;
  const auto started = shared_temp_impl::start_time(static_cast<long>(pid));
  if (!started) return errno == ENOENT || errno == ESRCH;
  return *started != start;
}

BASHEXEC_DECL std::vector<stamped_entry> stamped_entries(int dirfd, std::string_view prefix) {
  std::vector<stamped_entry> found;
  for (auto& name : shared_temp_impl::names_in(dirfd)) {
    if (!name.starts_with(prefix)) continue;
    const auto dash = name.find('-', prefix.size());
    if (dash == std::string::npos) continue;
    struct stat info {};
    if (::fstatat(dirfd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(info.st_mode) ||
        info.st_uid != ::geteuid())
      continue;
    std::string stamp = name.substr(prefix.size(), dash - prefix.size());
    found.push_back({std::move(name), std::move(stamp), info.st_mtim});
  }
  return found;
}

BASHEXEC_DECL void sweep_dead_owners(int dirfd, std::string_view prefix) noexcept {
  try {
    for (const auto& entry : stamped_entries(dirfd, prefix))
      if (owner_gone(entry.stamp)) remove_tree_at(dirfd, entry.name);
  } catch (...) {  // best effort: a sweep never stops the caller
  }
}

}  // namespace bashexec::detail

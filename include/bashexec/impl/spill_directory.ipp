// The bodies of spill_directory.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/spill_directory.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>

namespace bashexec::detail {

BASHEXEC_DECL std::vector<std::filesystem::path> default_spill_parents() {
  std::vector<std::filesystem::path> candidates;
  auto private_dir = [](const char* path) {
    struct stat info {};
    return ::lstat(path, &info) == 0 && S_ISDIR(info.st_mode) && info.st_uid == ::geteuid() &&
           (info.st_mode & 077) == 0;
  };
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime && runtime[0] == '/' && private_dir(runtime)) {
    std::filesystem::path dir = std::filesystem::path(runtime) / "bashexec";
    ::mkdir(dir.c_str(), 0700);  // EEXIST is fine; what is there is checked next
    if (private_dir(dir.c_str())) candidates.push_back(std::move(dir));
  }
  candidates.emplace_back("/var/tmp");
  candidates.emplace_back("/dev/shm");
  return candidates;
}

}  // namespace bashexec::detail

namespace bashexec {

BASHEXEC_DECL spill_directory::~spill_directory() {
  if (!keep_ && dir_fd_) detail::remove_tree_at(parent_fd_.get(), path_.filename().string());
}

BASHEXEC_DECL std::pair<unique_fd, std::filesystem::path> spill_directory::create_file(std::string_view stream) {
  std::lock_guard lock(mutex_);
  ensure_directory();
  for (int attempt = 0; attempt < 8; ++attempt) {
    const auto name = fmt::format("{}-{}", detail::random_name("spill-"), stream);
    int fd = ::openat(dir_fd_.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::fchmod(fd, 0600);  // exact mode whatever the umask
      return {unique_fd(fd), path_ / name};
    }
    if (errno != EEXIST) detail::throw_syscall(fmt::format("open spill file {}", (path_ / name).string()));
  }
  throw infrastructure_error("spill file: could not create a unique name");
}

BASHEXEC_DECL bool spill_directory::charge(std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  total_ += bytes;
  while (total_ > budget_ && !settled_.empty()) {
    ::unlinkat(dir_fd_.get(), settled_.front().path.filename().c_str(), 0);
    total_ -= settled_.front().bytes;
    settled_.pop_front();
  }
  if (total_ <= budget_) return true;
  total_ -= bytes;
  return false;
}

BASHEXEC_DECL void spill_directory::release(std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  total_ -= std::min(total_, bytes);
}

BASHEXEC_DECL void spill_directory::remove_file(const std::filesystem::path& file) noexcept {
  std::lock_guard lock(mutex_);
  if (dir_fd_) ::unlinkat(dir_fd_.get(), file.filename().c_str(), 0);
}

BASHEXEC_DECL void spill_directory::settled(const std::filesystem::path& file, std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  settled_.push_back({file, bytes});
}

BASHEXEC_DECL void spill_directory::forget(const std::filesystem::path& file) {
  std::lock_guard lock(mutex_);
  auto it = std::find_if(settled_.begin(), settled_.end(), [&](const entry& e) { return e.path == file; });
  if (it == settled_.end()) return;  // removed earlier to make room
  ::unlinkat(dir_fd_.get(), it->path.filename().c_str(), 0);
  total_ -= std::min(total_, it->bytes);
  settled_.erase(it);
}

BASHEXEC_DECL std::filesystem::path spill_directory::path() const {
  std::lock_guard lock(mutex_);
  return path_;
}

BASHEXEC_DECL std::filesystem::path spill_directory::ensure() {
  std::lock_guard lock(mutex_);
  ensure_directory();
  return path_;
}

BASHEXEC_DECL std::filesystem::path spill_directory::parent() const {
  return parent_.empty() ? detail::default_spill_parents().front() : parent_;
}

BASHEXEC_DECL void spill_directory::ensure_directory() {
  if (!path_.empty()) return;
  const auto base = parent();
  unique_fd parent_fd = detail::open_directory(base);
  if (!parent_fd) detail::throw_syscall(fmt::format("open spill parent {}", base.string()));
  if (auto problem = detail::shared_parent_problem(parent_fd.get()); !problem.empty())
    throw infrastructure_error(fmt::format("spill parent {}: {}", base.string(), problem));
  detail::sweep_dead_owners(parent_fd.get(), detail::spill_dir_prefix);
  auto [dir_fd, name] = detail::make_stamped_directory(parent_fd.get(), keep_ ? detail::kept_spill_dir_prefix : detail::spill_dir_prefix);
  parent_fd_ = std::move(parent_fd);
  dir_fd_ = std::move(dir_fd);
  path_ = base / name;
}

}  // namespace bashexec

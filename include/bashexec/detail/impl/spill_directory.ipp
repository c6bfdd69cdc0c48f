// The bodies of detail/spill_directory.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/spill_directory.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <system_error>

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>

namespace bashexec::detail {

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

BASHEXEC_DECL spill_directory::~spill_directory() {
  if (!keep_ && !path_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
}

BASHEXEC_DECL std::pair<unique_fd, std::filesystem::path> spill_directory::create_file(std::string_view stream) {
  std::lock_guard lock(mutex_);
  ensure_directory();
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto path = path_ / fmt::format("{}-{}", random_name("spill-"), stream);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::fchmod(fd, 0600);  // exact mode whatever the umask
      return {unique_fd(fd), std::move(path)};
    }
    if (errno != EEXIST) throw_syscall(fmt::format("open spill file {}", path.string()));
  }
  throw infrastructure_error("spill file: could not create a unique name");
}

BASHEXEC_DECL bool spill_directory::charge(std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  total_ += bytes;
  while (total_ > budget_ && !settled_.empty()) {
    std::error_code ignored;
    std::filesystem::remove(settled_.front().path, ignored);
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

BASHEXEC_DECL void spill_directory::settled(const std::filesystem::path& file, std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  settled_.push_back({file, bytes});
}

BASHEXEC_DECL void spill_directory::forget(const std::filesystem::path& file) {
  std::lock_guard lock(mutex_);
  auto it = std::find_if(settled_.begin(), settled_.end(), [&](const entry& e) { return e.path == file; });
  if (it == settled_.end()) return;  // removed earlier to make room
  std::error_code ignored;
  std::filesystem::remove(it->path, ignored);
  total_ -= std::min(total_, it->bytes);
  settled_.erase(it);
}

BASHEXEC_DECL std::filesystem::path spill_directory::path() const {
  std::lock_guard lock(mutex_);
  return path_;
}

BASHEXEC_DECL void spill_directory::ensure_directory() {
  if (!path_.empty()) return;
  auto base = parent_.empty() ? default_spill_parents().front() : parent_;
  // mkdtemp randomises exactly the trailing six X's (more would stay
  // literal X's), so the unpredictable part is our own getrandom name and
  // mkdtemp only adds its suffix and the atomic, exclusive 0700 mkdir.
  std::string templ = (base / random_name("bashexec-").substr(0, 21)).string() + "-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) throw_syscall(fmt::format("mkdtemp {}", templ));
  path_ = templ;  // mkdtemp creates it 0700
}

}  // namespace bashexec::detail

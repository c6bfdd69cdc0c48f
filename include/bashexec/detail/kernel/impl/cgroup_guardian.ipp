// The bodies of detail/kernel/cgroup_guardian.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/cgroup_guardian.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/detail/kernel/posix_spawn_setup.hpp"
#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/errors.hpp"

namespace bashexec::detail {

BASHEXEC_DECL cgroup_guardian cgroup_guardian::start(const std::filesystem::path& cgroup_dir,
                                                     const std::filesystem::path& sh) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) throw_syscall("pipe2");
  unique_fd read_end(ends[0]);
  cgroup_guardian guardian;
  guardian.write_end_ = unique_fd(ends[1]);
  if (read_end.get() <= 2) {
    // A host that closed its stdio: dup2 onto the same number would keep
    // the close-on-exec flag and leave the watcher without its pipe.
    read_end = unique_fd(::fcntl(read_end.get(), F_DUPFD_CLOEXEC, 3));
    if (!read_end) throw_syscall("fcntl(F_DUPFD_CLOEXEC)");
  }

  posix_spawn_setup setup;
  ::posix_spawn_file_actions_adddup2(setup.actions(), read_end.get(), 0);
  ::posix_spawn_file_actions_addopen(setup.actions(), 1, "/dev/null", O_WRONLY, 0);
  ::posix_spawn_file_actions_addopen(setup.actions(), 2, "/dev/null", O_WRONLY, 0);
  ::posix_spawn_file_actions_addclosefrom_np(setup.actions(), 3);
  ::posix_spawn_file_actions_addchdir_np(setup.actions(), "/");

  const std::string sh_path = sh.string(), dir = cgroup_dir.string();
  const char* argv[] = {sh_path.c_str(), "-c", guardian_script, "bashexec-guardian", dir.c_str(), nullptr};
  const char* envp[] = {"PATH=/usr/bin:/bin", nullptr};
  const pid_t pid = setup.spawn(sh_path.c_str(), const_cast<char* const*>(argv), const_cast<char* const*>(envp),
                                fmt::format("cgroup containment: spawn the guardian {}", sh_path));
  guardian.pid_ = pid;
  return guardian;
}

BASHEXEC_DECL cgroup_guardian& cgroup_guardian::operator=(cgroup_guardian&& other) noexcept {
  if (this != &other) {
    stop();
    write_end_ = std::move(other.write_end_);
    pid_ = std::exchange(other.pid_, -1);
  }
  return *this;
}

BASHEXEC_DECL void cgroup_guardian::stop() noexcept {
  write_end_.reset();
  if (pid_ <= 0) return;
  int status = 0;
  // ECHILD: a host that ignores SIGCHLD, or reaps with waitpid(-1), took it.
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

}  // namespace bashexec::detail

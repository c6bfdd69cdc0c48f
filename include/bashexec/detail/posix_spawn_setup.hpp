// detail/posix_spawn_setup: glibc posix_spawn's file actions and attributes,
// set up the way every child of ours starts — a new session, every signal
// disposition at its default, an empty signal mask, the vfork path — and
// destroyed with the object. posix_spawner and the cgroup guardian both
// spawn through it; each adds its own file actions.
#pragma once

#include <cstring>
#include <string_view>

#include <csignal>
#include <spawn.h>

#include <fmt/core.h>

#include "bashexec/detail/unique_fd.hpp"
#include "bashexec/errors.hpp"

namespace bashexec::detail {

class posix_spawn_setup {
 public:
  posix_spawn_setup() {
    if (int rc = ::posix_spawn_file_actions_init(&actions_)) throw_syscall("posix_spawn_file_actions_init", rc);
    if (int rc = ::posix_spawnattr_init(&attr_)) {
      ::posix_spawn_file_actions_destroy(&actions_);
      throw_syscall("posix_spawnattr_init", rc);
    }
    sigset_t all, none;
    // Every bit, not sigfillset: glibc's sigfillset leaves out its internal
    // signals (32, 33), and posix_spawn then hands them to the child ignored.
    std::memset(&all, 0xff, sizeof all);
    ::sigemptyset(&none);
    ::posix_spawnattr_setsigdefault(&attr_, &all);
    ::posix_spawnattr_setsigmask(&attr_, &none);
    ::posix_spawnattr_setflags(&attr_, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSID |
                                           POSIX_SPAWN_USEVFORK);
  }
  ~posix_spawn_setup() {
    ::posix_spawn_file_actions_destroy(&actions_);
    ::posix_spawnattr_destroy(&attr_);
  }
  posix_spawn_setup(const posix_spawn_setup&) = delete;
  posix_spawn_setup& operator=(const posix_spawn_setup&) = delete;

  posix_spawn_file_actions_t* actions() noexcept { return &actions_; }

  /// Spawns `path` (no PATH search); throws infrastructure_error
  /// "`what`: <strerror>" when posix_spawn fails.
  pid_t spawn(const char* path, char* const* argv, char* const* envp, std::string_view what) {
    pid_t pid = -1;
    if (int rc = ::posix_spawn(&pid, path, &actions_, &attr_, argv, envp))
      throw infrastructure_error(fmt::format("{}: {}", what, std::strerror(rc)));
    return pid;
  }

 private:
  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attr_;
};

}  // namespace bashexec::detail

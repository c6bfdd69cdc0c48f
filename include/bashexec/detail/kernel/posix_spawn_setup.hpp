// detail/kernel/posix_spawn_setup: glibc posix_spawn's file actions and attributes,
// set up the way every child of ours starts — a new session, every signal
// disposition at its default, an empty signal mask, the vfork path — and
// destroyed with the object. posix_spawner and the cgroup guardian both
// spawn through it; each adds its own file actions.
#pragma once

#include <string_view>

#include <spawn.h>
#include <sys/types.h>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

class posix_spawn_setup {
 public:
  posix_spawn_setup();
  ~posix_spawn_setup();
  posix_spawn_setup(const posix_spawn_setup&) = delete;
  posix_spawn_setup& operator=(const posix_spawn_setup&) = delete;

  posix_spawn_file_actions_t* actions() noexcept { return &actions_; }

  /// Spawns `path` (no PATH search); throws infrastructure_error
  /// "`what`: <strerror>" when posix_spawn fails.
  pid_t spawn(const char* path, char* const* argv, char* const* envp, std::string_view what);

 private:
  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attr_;
};

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/posix_spawn_setup.ipp"
#endif

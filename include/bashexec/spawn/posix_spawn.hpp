// spawn/posix_spawn: `posix_spawner`, the fast spawn policy (vfork-based glibc posix_spawn).
// It has no pre-exec hook, so confinements that apply themselves in the
// child (Landlock) and resource limits need spawn/fork_exec.hpp instead.
#pragma once

#include <csignal>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <spawn.h>

#include <fmt/format.h>

#include "bashexec/detail/c_strings.hpp"
#include "bashexec/detail/pidfd.hpp"
#include "bashexec/spawn.hpp"

namespace bashexec {

struct posix_spawner {
  static constexpr bool supports_pre_exec = false;
  static constexpr std::string_view name = "posix_spawn";

  static spawned_process spawn(const launch_plan& plan) {
    // No hook means no race-free place to apply them (a prlimit after the
    // spawn comes too late: the command may already have forked).
    if (!plan.limits.empty())
      throw std::invalid_argument("posix_spawner cannot apply launch_plan.limits; use fork_exec");
    auto argv = detail::c_string_array(plan.argv);
    auto envp = detail::c_string_array(plan.env);

    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    check(::posix_spawn_file_actions_init(&actions), "posix_spawn_file_actions_init");
    check(::posix_spawnattr_init(&attr), "posix_spawnattr_init");
    struct cleanup {
      posix_spawn_file_actions_t* a;
      posix_spawnattr_t* b;
      ~cleanup() {
        ::posix_spawn_file_actions_destroy(a);
        ::posix_spawnattr_destroy(b);
      }
    } guard{&actions, &attr};

    ::posix_spawn_file_actions_adddup2(&actions, plan.stdin_fd, 0);
    ::posix_spawn_file_actions_adddup2(&actions, plan.stdout_fd, 1);
    ::posix_spawn_file_actions_adddup2(&actions, plan.stderr_fd, 2);
    int next = 3;
    for (int fd : plan.inherited_fds) ::posix_spawn_file_actions_adddup2(&actions, fd, next++);
    // Closes every descriptor the host holds, inheritable or not.
    ::posix_spawn_file_actions_addclosefrom_np(&actions, next);
    if (!plan.workdir.empty()) ::posix_spawn_file_actions_addchdir_np(&actions, plan.workdir.c_str());

    sigset_t all, none;
    // Every bit, not sigfillset: glibc's sigfillset leaves out its internal
    // signals (32, 33), and posix_spawn then hands them to the child ignored.
    std::memset(&all, 0xff, sizeof all);
    ::sigemptyset(&none);
    ::posix_spawnattr_setsigdefault(&attr, &all);
    ::posix_spawnattr_setsigmask(&attr, &none);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK |
                                          POSIX_SPAWN_SETSID | POSIX_SPAWN_USEVFORK);

    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
    if (rc != 0)
      throw infrastructure_error(fmt::format("spawn {} in {}: {}", plan.argv.at(0), plan.workdir.string(),
                                             std::strerror(rc)));
    spawned_process child{pid, {}};
    try {
      child.pidfd = detail::pidfd_open(pid);
    } catch (...) {
      ::kill(pid, SIGKILL);
      detail::reap_blocking(pid);
      throw;
    }
    return child;
  }

 private:
  static void check(int rc, const char* call) {
    if (rc != 0) detail::throw_syscall(call, rc);
  }
};

}  // namespace bashexec

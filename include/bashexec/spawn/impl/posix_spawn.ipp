// The bodies of spawn/posix_spawn.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/spawn/posix_spawn.hpp"

#include <algorithm>
#include <csignal>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/detail/kernel/pidfd.hpp"
#include "bashexec/detail/kernel/posix_spawn_setup.hpp"
#include "bashexec/detail/text/c_strings.hpp"

namespace bashexec {

BASHEXEC_DECL process_handle posix_spawner::spawn(const launch_plan& plan) const {
  if (plan.argv.empty()) throw std::invalid_argument("launch_plan.argv must not be empty");
  // Hooks, limits and a cgroup need a step in the child between fork and
  // exec, which posix_spawn has not got (a prlimit or cgroup move after the
  // spawn comes too late: the command may already have forked).
  refuse_unsupported<posix_spawner>(plan);
  auto argv = detail::c_string_array(plan.argv);
  auto envp = detail::c_string_array(plan.env);

  detail::posix_spawn_setup setup;
  posix_spawn_file_actions_t* actions = setup.actions();
  // Sources in target order: fds 0, 1, 2, then the inherited ones as 3, 4, …
  // (a stream left at -1 is /dev/null, as under every spawn policy).
  std::vector<int> sources{plan.stdin_fd, plan.stdout_fd, plan.stderr_fd};
  sources.insert(sources.end(), plan.inherited_fds.begin(), plan.inherited_fds.end());
  const int next = static_cast<int>(sources.size());
  // A source sitting on a target number (inherited {4, 3}) would be
  // clobbered by an earlier dup2: then every source first moves above the
  // target range, to numbers closefrom removes again.
  int top = next;
  for (int fd : sources) top = std::max(top, fd + 1);
  const bool overlap = std::any_of(sources.begin(), sources.end(), [next](int fd) { return fd >= 0 && fd < next; });
  if (overlap)
    for (int target = 0; target < next; ++target)
      if (const int source = sources[static_cast<std::size_t>(target)]; source >= 0)
        ::posix_spawn_file_actions_adddup2(actions, source, top + target);
  // The terminal by its path: opened (without O_NOCTTY) by the new session
  // leader, it becomes the controlling terminal (launch.hpp).
  std::string terminal_path;
  if (plan.controlling_terminal) {
    char path[128];
    if (int error = ::ttyname_r(plan.stdin_fd, path, sizeof path); error != 0)
      detail::throw_syscall("ttyname_r (the command's terminal)", error);
    terminal_path = path;
  }
  for (int target = 0; target < next; ++target) {
    const int source = sources[static_cast<std::size_t>(target)];
    if (target == 0 && !terminal_path.empty())
      ::posix_spawn_file_actions_addopen(actions, 0, terminal_path.c_str(), O_RDWR, 0);
    else if (source < 0)
      ::posix_spawn_file_actions_addopen(actions, target, "/dev/null", O_RDWR, 0);
    else
      ::posix_spawn_file_actions_adddup2(actions, overlap ? top + target : source, target);
  }
  // Closes every descriptor the host holds, inheritable or not.
  ::posix_spawn_file_actions_addclosefrom_np(actions, next);
  if (!plan.workdir.empty()) ::posix_spawn_file_actions_addchdir_np(actions, plan.workdir.c_str());

  const pid_t pid = setup.spawn(argv[0], argv.data(), envp.data(),
                                fmt::format("spawn {} in {}", plan.argv.front(), plan.workdir.string()));
  try {
    return process_handle(pid, detail::pidfd_open(pid));
  } catch (...) {
    ::kill(pid, SIGKILL);
    detail::reap_blocking(pid);
    throw;
  }
}

}  // namespace bashexec

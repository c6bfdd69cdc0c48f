// The bodies of detail/kernel/posix_spawn_setup.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/posix_spawn_setup.hpp"

#include <cstring>
#include <string_view>

#include <csignal>
#include <spawn.h>

#include <fmt/core.h>

#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/errors.hpp"

namespace bashexec::detail {

BASHEXEC_DECL posix_spawn_setup::posix_spawn_setup() {
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

BASHEXEC_DECL posix_spawn_setup::~posix_spawn_setup() {
  ::posix_spawn_file_actions_destroy(&actions_);
  ::posix_spawnattr_destroy(&attr_);
}

BASHEXEC_DECL pid_t posix_spawn_setup::spawn(const char* path, char* const* argv, char* const* envp,
                                             std::string_view what) {
  pid_t pid = -1;
  if (int rc = ::posix_spawn(&pid, path, &actions_, &attr_, argv, envp))
    throw infrastructure_error(fmt::format("{}: {}", what, std::strerror(rc)));
  return pid;
}

}  // namespace bashexec::detail

// spawn/posix_spawn: `posix_spawner`, the fast spawn policy (vfork-based glibc posix_spawn).
// Its one capability (spawn.hpp) is a controlling terminal: POSIX_SPAWN_SETSID
// runs before the file actions, and a session leader without a terminal that
// opens one by its path (no O_NOCTTY) takes it. It has no pre-exec hooks, no
// resource limits, no cgroup to join, so confinements that apply themselves
// in the child (Landlock), limits and cgroup containment need
// spawn/fork_exec.hpp. A plan that needs any of them is refused
// (std::invalid_argument), never run.
#pragma once

#include <string_view>

#include "bashexec/detail/linkage.hpp"
#include "bashexec/spawn.hpp"

namespace bashexec {

struct posix_spawner {
  static constexpr std::string_view name = "posix_spawn";
  static constexpr auto capabilities =
      boost::hana::make_set(boost::hana::type_c<spawn_capability::controlling_terminal>);

  /// Stateless: const and safe to call from any number of threads.
  process_handle spawn(const launch_plan& plan) const;
};

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/spawn/impl/posix_spawn.ipp"
#endif

// src.hpp: the bodies of bashexec's non-template functions, for the separately
// compiled mode (see detail/linkage.hpp). Include it in exactly one
// translation unit, built with BASHEXEC_SEPARATE_COMPILATION defined; the
// CMake target `bashexec::compiled` does both. A test checks that every
// `impl/*.ipp` under include/bashexec is listed here.
#pragma once

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#error "<bashexec/src.hpp> is for the separately compiled mode: define BASHEXEC_SEPARATE_COMPILATION"
#endif

#include "bashexec/bashexec.hpp"

// clang-format off
// -- the implementation files, sorted --
#include "bashexec/confinement/detail/impl/bwrap_profile.ipp"
#include "bashexec/confinement/detail/impl/bwrap_style.ipp"
#include "bashexec/confinement/detail/impl/git_config.ipp"
#include "bashexec/confinement/detail/impl/protected_paths.ipp"
#include "bashexec/confinement/impl/bwrap.ipp"
#include "bashexec/confinement/impl/landlock.ipp"
#include "bashexec/confinement/impl/runner_command.ipp"
#include "bashexec/detail/engine/impl/environment.ipp"
#include "bashexec/detail/engine/impl/executor_cgroup.ipp"
#include "bashexec/detail/engine/impl/launch_builder.ipp"
#include "bashexec/detail/engine/impl/reactor.ipp"
#include "bashexec/detail/engine/impl/resolve.ipp"
#include "bashexec/detail/engine/impl/shell_state_capture.ipp"
#include "bashexec/detail/engine/impl/resource_limits.ipp"
#include "bashexec/detail/engine/impl/spawn_thread.ipp"
#include "bashexec/detail/engine/impl/spill_placement.ipp"
#include "bashexec/detail/engine/impl/task_registry.ipp"
#include "bashexec/detail/engine/impl/verdict.ipp"
#include "bashexec/detail/kernel/impl/capabilities.ipp"
#include "bashexec/detail/kernel/impl/egress_namespace.ipp"
#include "bashexec/detail/kernel/impl/egress_namespace_pool.ipp"
#include "bashexec/detail/kernel/impl/cgroup.ipp"
#include "bashexec/detail/kernel/impl/cgroup_guardian.ipp"
#include "bashexec/detail/kernel/impl/cgroup_mount.ipp"
#include "bashexec/detail/kernel/impl/clone_into_cgroup.ipp"
#include "bashexec/detail/kernel/impl/landlock.ipp"
#include "bashexec/detail/kernel/impl/no_sigpipe.ipp"
#include "bashexec/detail/kernel/impl/input_wait_probe.ipp"
#include "bashexec/detail/kernel/impl/pidfd.ipp"
#include "bashexec/detail/kernel/impl/posix_spawn_setup.ipp"
#include "bashexec/detail/kernel/impl/process_group.ipp"
#include "bashexec/detail/kernel/impl/pseudo_terminal.ipp"
#include "bashexec/detail/kernel/impl/read_text_file.ipp"
#include "bashexec/detail/kernel/impl/seccomp_filter.ipp"
#include "bashexec/detail/kernel/impl/shared_temp.ipp"
#include "bashexec/detail/kernel/impl/status_pipe.ipp"
#include "bashexec/detail/kernel/impl/unique_fd.ipp"
#include "bashexec/detail/kernel/impl/user_namespace.ipp"
#include "bashexec/detail/kernel/impl/vm_child.ipp"
#include "bashexec/detail/text/impl/c_strings.ipp"
#include "bashexec/detail/text/impl/text_formatter.ipp"
#include "bashexec/detail/text/impl/text_match.ipp"
#include "bashexec/detail/trust/impl/find_program.ipp"
#include "bashexec/detail/trust/impl/writable_roots.ipp"
#include "bashexec/impl/config.ipp"
#include "bashexec/impl/confinement.ipp"
#include "bashexec/impl/host_hardening.ipp"
#include "bashexec/impl/launch.ipp"
#include "bashexec/impl/process_handle.ipp"
#include "bashexec/impl/signal_name.ipp"
#include "bashexec/impl/spill_directory.ipp"
#include "bashexec/output/detail/impl/spill_file.ipp"
#include "bashexec/output/impl/head_tail.ipp"
#include "bashexec/output/impl/tail_spill.ipp"
#include "bashexec/spawn/detail/impl/fork_exec_child.ipp"
#include "bashexec/spawn/detail/impl/prespawn_child.ipp"
#include "bashexec/spawn/detail/impl/warm_process.ipp"
#include "bashexec/spawn/impl/fork_exec.ipp"
#include "bashexec/spawn/impl/posix_spawn.ipp"
#include "bashexec/spawn/impl/prespawned.ipp"
// -- end --
// clang-format on

// The shipped executors' members, compiled once. In the compiled mode the
// headers do not define them, so a user's translation unit refers to these
// (the standard's explicit-instantiation rule, [temp.pre]/10).
#include "bashexec/impl/basic_executor.hpp"

namespace bashexec {
template class basic_executor<policies<>>;
template class basic_executor<policies<spawn_with<posix_spawner>>>;  // posix_spawn_executor
template class basic_executor<sandbox_policies>;
}  // namespace bashexec

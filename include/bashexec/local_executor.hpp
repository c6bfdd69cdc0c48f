// local_executor: the unconfined executor — `bash -c` per call, contained
// (a cgroup of its own where cgroup v2 is writable, else its own process
// group), bounded output, credential-scrubbed environment.
#pragma once

#include "bashexec/basic_executor.hpp"
#include "bashexec/executor.hpp"

namespace bashexec {

/// fork_exec (children born in their cgroup), no confinement, tail_spill
/// output, tracked owners.
using local_executor = basic_executor<policies<>>;  // compiled into bashexec::compiled (src.hpp)

/// glibc's posix_spawn and process-group containment only: a `setsid`
/// daemon outlives its run. What local_executor was before issue 25 item 5.
using posix_spawn_executor = basic_executor<policies<spawn_with<posix_spawner>>>;

static_assert(executor<local_executor> && executor<posix_spawn_executor>);

}  // namespace bashexec

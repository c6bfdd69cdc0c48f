// sandbox_executor: the confining executor — every spawn confined to its
// file-effect mode by bubblewrap, or by native Landlock when bwrap is not
// usable (probed once), fail-closed. Default mode: read-only.
#pragma once

#include "bashexec/basic_executor.hpp"
#include "bashexec/confinement/bwrap.hpp"
#include "bashexec/confinement/chain.hpp"
#include "bashexec/confinement/landlock.hpp"
#include "bashexec/executor.hpp"
#include "bashexec/spawn/fork_exec.hpp"

namespace bashexec {

/// fork_exec (Landlock needs its pre-exec hook), chain<bwrap, landlock>,
/// tail_spill output, tracked owners.
using sandbox_policies = policies<spawn_with<fork_exec>, confine_with<chain<bwrap, landlock>>>;
using sandbox_executor = basic_executor<sandbox_policies>;  // compiled into bashexec::compiled (src.hpp)

static_assert(executor<sandbox_executor>);

}  // namespace bashexec

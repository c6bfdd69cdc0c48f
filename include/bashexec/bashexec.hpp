// bashexec.hpp: the umbrella header — vocabulary, every shipped policy, and
// the local and sandboxing executors. The model-facing tool layer (which
// adds nlohmann-json) is separate: <bashexec/tools/bash_tools.hpp>.
#pragma once

#include "bashexec/basic_executor.hpp"
#include "bashexec/config.hpp"
#include "bashexec/confinement/bwrap.hpp"
#include "bashexec/confinement/chain.hpp"
#include "bashexec/confinement/landlock.hpp"
#include "bashexec/confinement/runner_command.hpp"
#include "bashexec/confinement/unconfined.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/ids.hpp"
#include "bashexec/local_executor.hpp"
#include "bashexec/output/head_tail.hpp"
#include "bashexec/output/tail_spill.hpp"
#include "bashexec/output/unbounded.hpp"
#include "bashexec/ownership/no_owners.hpp"
#include "bashexec/ownership/tracked_owners.hpp"
#include "bashexec/policies.hpp"
#include "bashexec/request.hpp"
#include "bashexec/result.hpp"
#include "bashexec/sandbox_executor.hpp"
#include "bashexec/sandbox_mode.hpp"
#include "bashexec/signal_name.hpp"
#include "bashexec/spawn/fork_exec.hpp"
#include "bashexec/spawn/posix_spawn.hpp"
#include "bashexec/subscription.hpp"

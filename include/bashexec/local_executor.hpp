// local_executor: the unconfined executor — `bash -c` per call in its own
// process group, bounded output, credential-scrubbed environment.
#pragma once

#include "bashexec/basic_executor.hpp"

namespace bashexec {

/// posix_spawn, no confinement, tail_spill output, tracked owners.
using local_executor = basic_executor<policies<>>;  // compiled into bashexec::compiled (src.hpp)

}  // namespace bashexec

// detail/kernel/status_pipe: the side channel a runner reports through (bwrap's
// --json-status-fd, runner_command's "not found" marker) — a close-on-exec
// pipe read without blocking once the run has settled, since a runner that
// died early may never have written (or closed) its end.
#pragma once

#include <string>

#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// Everything currently readable from a non-blocking descriptor.
BASHEXEC_DECL std::string drain_nonblocking(int fd);

/// A close-on-exec pipe whose read end never blocks.
BASHEXEC_DECL pipe_pair make_status_pipe();

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/status_pipe.ipp"
#endif

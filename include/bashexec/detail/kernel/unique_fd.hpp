// detail/kernel/unique_fd: the checked system-call helpers every other detail
// header uses, and pipes; the descriptor owner itself is public vocabulary
// (bashexec/unique_fd.hpp).
#pragma once

#include <cerrno>
#include <string>
#include <string_view>
#include <utility>

#include <unistd.h>

#include "bashexec/detail/linkage.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/unique_fd.hpp"

namespace bashexec::detail {

/// "call: strerror(errno)" — the shape of every system-call error message.
BASHEXEC_DECL std::string syscall_message(std::string_view call, int error = errno);

[[noreturn]] BASHEXEC_DECL void throw_syscall(std::string_view call, int error = errno);

using bashexec::unique_fd;  // public vocabulary (unique_fd.hpp); its name here from before

/// Both ends of a pipe, close-on-exec.
struct pipe_pair {
  unique_fd read;
  unique_fd write;
};

BASHEXEC_DECL pipe_pair make_pipe(int extra_flags = 0);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/unique_fd.ipp"
#endif

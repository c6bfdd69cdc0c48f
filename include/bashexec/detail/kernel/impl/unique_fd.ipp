// The bodies of detail/kernel/unique_fd.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/unique_fd.hpp"

#include <cstring>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/errors.hpp"

namespace bashexec::detail {

BASHEXEC_DECL std::string syscall_message(std::string_view call, int error) {
  return fmt::format("{}: {}", call, std::strerror(error));
}

BASHEXEC_DECL void throw_syscall(std::string_view call, int error) {
  throw infrastructure_error(syscall_message(call, error));
}

BASHEXEC_DECL pipe_pair make_pipe(int extra_flags) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | extra_flags) != 0) throw_syscall("pipe2");
  return {unique_fd(fds[0]), unique_fd(fds[1])};
}

}  // namespace bashexec::detail

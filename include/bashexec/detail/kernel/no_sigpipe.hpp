// detail/kernel/no_sigpipe: write to a pipe whose reader may be gone without ever
// letting SIGPIPE reach the host (contract 8). The signal is blocked for this
// thread around the write and a SIGPIPE it raised is consumed.
#pragma once

#include <cstddef>

#include <sys/types.h>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

BASHEXEC_DECL ssize_t write_without_sigpipe(int fd, const char* data, std::size_t size) noexcept;

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/no_sigpipe.ipp"
#endif

// signal_name: "SIGTERM" for 15 — the spelling results and tool text use.
#pragma once

#include <string>

#include "bashexec/detail/linkage.hpp"

namespace bashexec {

/// The conventional name of a signal number (`SIGTERM`), or `SIG<n>`.
BASHEXEC_DECL std::string signal_name(int signo);

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/impl/signal_name.ipp"
#endif

// The bodies of signal_name.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/signal_name.hpp"

#include <csignal>
#include <string>

#include <fmt/core.h>

namespace bashexec {

BASHEXEC_DECL std::string signal_name(int signo) {
  if (const char* abbrev = ::sigabbrev_np(signo)) return fmt::format("SIG{}", abbrev);
  return fmt::format("SIG{}", signo);
}

}  // namespace bashexec

// signal_name: "SIGTERM" for 15 — the spelling results and tool text use.
#pragma once

#include <csignal>
#include <string>

#include <fmt/core.h>

namespace bashexec {

/// The conventional name of a signal number (`SIGTERM`), or `SIG<n>`.
inline std::string signal_name(int signo) {
  if (const char* abbrev = ::sigabbrev_np(signo)) return fmt::format("SIG{}", abbrev);
  return fmt::format("SIG{}", signo);
}

}  // namespace bashexec

// exit_facts: how a reaped child ended — its exit code, or the signal that
// killed it. Public vocabulary: what process_handle::try_reap reports.
#pragma once

#include <optional>

namespace bashexec {

/// How a reaped child ended: exactly one of the two is set.
struct exit_facts {
  std::optional<int> exit_code;
  std::optional<int> signal;
};

}  // namespace bashexec

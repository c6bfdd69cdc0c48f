// laws/report: what a laws check (laws/output.hpp, laws/spawn.hpp,
// laws/confinement.hpp, laws/ownership.hpp) returns — the violated laws in
// words, or why the laws could not be checked on this machine — so a
// policy's author can run the laws the shipped policies pass from any test
// framework, or none. Three answers, never confused:
//   - the laws hold: nothing was violated;
//   - unavailable: this machine lacks what the policy needs (no bwrap, a
//     kernel without Landlock, user namespaces refused), nothing was checked
//     — a test prints the reason and skips;
//   - broken: a law was violated — a policy whose own runner cannot start
//     (an unknown option, a wrong argv) on a machine that can confine is
//     broken, not unavailable — a test prints every violation and fails.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace bashexec::laws {

/// The answer of a laws check (see the top of this header).
enum class verdict { laws_hold, unavailable, broken };

struct report {
  /// Set when the machine lacks what the policy needs: nothing was checked,
  /// and `violations` is empty. A test prints it and skips.
  std::optional<std::string> unavailable;
  /// One sentence per broken law, with what was observed.
  std::vector<std::string> violations;
  /// Laws that do not apply to this policy here, and why (a backend that
  /// says `partial` does not promise them): for the reader, not a failure.
  std::vector<std::string> not_checked;

  bool passed() const noexcept { return !unavailable && violations.empty(); }
  laws::verdict verdict() const noexcept {
    if (!violations.empty()) return laws::verdict::broken;
    return unavailable ? laws::verdict::unavailable : laws::verdict::laws_hold;
  }
};

}  // namespace bashexec::laws

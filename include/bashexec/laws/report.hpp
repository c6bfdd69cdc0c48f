// laws/report: what a laws check (laws/output.hpp, laws/confinement.hpp)
// returns — the violated laws in words, or why the laws could not be checked
// on this machine — so a policy's author can run the laws the shipped
// policies pass from any test framework, or none.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace bashexec::laws {

struct report {
  /// Set when the policy cannot work on this machine at all (no bwrap, no
  /// Landlock): nothing was checked. A test prints it and skips.
  std::optional<std::string> unavailable;
  /// One sentence per broken law, with what was observed.
  std::vector<std::string> violations;

  bool passed() const noexcept { return !unavailable && violations.empty(); }
};

}  // namespace bashexec::laws

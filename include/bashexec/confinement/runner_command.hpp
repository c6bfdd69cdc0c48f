// confinement/runner_command: an operator-supplied, bwrap-compatible runner
// (docs/contract.md item 13, 14, 16), configured by `runner_command::config`
// (`argv`, `failure_signatures`). argv becomes
//   config.argv…, <the bwrap profile of confinement/detail/bwrap_profile.hpp>, "--", argv…
// (applied by confinement/detail/bwrap_style.hpp, which `bwrap` shares)
// (protected paths included: each existing one is `--ro-bind`ed read-only;
// a confined `sandbox.network` adds `--unshare-net`, which the runner must
// therefore understand — see bwrap.hpp for what it promises).
// The runner has no status channel, so its failures are recognised by
// signatures (contract 16): a configured `failure_signatures`
// entry occurring ANYWHERE in the runner's combined output (stderr or
// stdout, ignoring case) after a non-zero exit. A runner may print
// progress before it fails, or report on stdout; a prefix rule would miss
// both and report the runner's failure as the command's. The price: a
// command that itself prints a signature and fails is reported as "the
// command did not run", so choose signatures no command prints (a runner
// name with its own punctuation, "myrunner: setup failed"). A blank
// signature is refused at construction. The shell's "cannot start it"
// shapes (exit 126/127: not found, permission denied) are not signatures:
// they count only on the first non-empty stderr line, and only naming the
// runner, since `cat /nope` failing is the command's own failure.
//
// A runner binary that does not exist must settle as a runner failure, not
// make the spawn throw (a background start has to report `runner_failed`).
// argv[0] is resolved once, at construction, the way every program the host
// runs is (detail/trust/find_program.hpp: a bare name in the fixed system search
// path, never $PATH; trusted only when nobody but root or the running user
// can replace it). When it was not found or is not trusted, or lies under a
// root a confined command may write, the plan runs the shell with a script
// that prints why and exits 127 — it never execs the runner by name — and
// `status` carries a pre-written marker so `runner_failure` knows
// structurally.
#pragma once

#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bashexec/config.hpp"
#include "bashexec/confinement.hpp"
#include "bashexec/confinement/detail/bwrap_style.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/detail/trust/find_program.hpp"
#include "bashexec/launch.hpp"

namespace bashexec {

class runner_command : public detail::bwrap_style {
 public:
  static constexpr std::string_view name = "runner_command";
  /// A bwrap-compatible runner may speak either backend's dialect.
  static constexpr std::array<std::string_view, 2> denial_dialects{"read-only file system", "permission denied"};
  /// What a shell prints when it cannot start a program (exit 127 / 126).
  static constexpr std::array<std::string_view, 5> launch_failure_shapes{
      "no such file or directory", "command not found", "not found", "permission denied", "cannot execute"};
  static constexpr std::string_view remedy =
      "check runner_command.argv: its program must exist, be executable and accept bwrap's arguments";

  /// The operator's runner. Both empty (the default) leaves runner_command
  /// unconfigured: building it throws, which a `chain` records as "not
  /// configured" and skips.
  struct config {
    /// The bwrap-compatible runner's argv; the profile and the command follow.
    std::vector<std::string> argv;
    /// Stderr/stdout texts that mean "the runner failed" (contract 16).
    std::vector<std::string> failure_signatures;

    /// Throws std::invalid_argument when only one of the two is given, or a
    /// signature is blank (signatures match anywhere in a failed run's
    /// output, contract 16: a blank one would make every failure the runner's).
    void validate() const;
  };

  /// Throws std::invalid_argument when `own.argv` or `own.failure_signatures`
  /// is empty, or a signature is blank.
  explicit runner_command(const sandbox_config& shared, const config& own);

  const std::vector<std::string>& runner_argv() const noexcept { return argv_; }
  const std::vector<std::string>& failure_signatures() const noexcept { return signatures_; }

  confined_launch prepare(sandbox_mode mode, const std::filesystem::path& root, launch_plan& plan) const;

  /// After a non-zero exit: the runner's first stderr line when the runner
  /// failed (marker, configured signature anywhere in `err` or `out`, or a
  /// launch-failure shape), else empty.
  std::optional<std::string> runner_failure(confined_launch& launch, std::string_view err,
                                            std::string_view out = {}) const;

  bool is_denial(std::string_view err) const noexcept;

 private:
  std::vector<std::string> argv_;
  std::vector<std::string> signatures_;
  detail::program_lookup program_;
};

static_assert(confining_policy<runner_command>);

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/confinement/impl/runner_command.ipp"
#endif

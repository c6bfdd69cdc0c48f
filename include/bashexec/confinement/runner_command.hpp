// confinement/runner_command: an operator-supplied, bwrap-compatible runner
// (docs/contract.md item 13, 14, 16), configured by `runner_command::config`
// (`argv`, `failure_signatures`). argv becomes
//   config.argv…, <the bwrap profile of detail/bwrap_profile.hpp>, "--", argv…
// (applied by detail/bwrap_style.hpp, which `bwrap` shares)
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
// So when argv[0] does not resolve to an executable at prepare time,
// the plan execs the runner through the shell (`shell -c 'exec "$@"' …`): the
// shell then fails with 127 and a "not found" line, and `status` carries a
// pre-written marker so `runner_failure` knows structurally. If the runner
// appears in between, the shell simply execs it and nothing changes.
#pragma once

#include <array>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/config.hpp"
#include "bashexec/confinement.hpp"
#include "bashexec/detail/bwrap_style.hpp"
#include "bashexec/detail/find_program.hpp"
#include "bashexec/detail/status_pipe.hpp"
#include "bashexec/detail/text_match.hpp"
#include "bashexec/detail/unique_fd.hpp"
#include "bashexec/errors.hpp"
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
    void validate() const {
      if (argv.empty() != failure_signatures.empty())
        throw std::invalid_argument(
            "runner_command.argv and runner_command.failure_signatures must be given together");
      for (const auto& signature : failure_signatures)
        if (signature.find_first_not_of(" \t\r\n\f\v") == std::string::npos)
          throw std::invalid_argument(
              "runner_command.failure_signatures must not hold a blank signature (it would match every failure)");
    }
  };

  /// Throws std::invalid_argument when `own.argv` or `own.failure_signatures`
  /// is empty, or a signature is blank.
  explicit runner_command(const sandbox_config& shared, const config& own)
      : bwrap_style(shared), argv_(own.argv), signatures_(own.failure_signatures) {
    if (argv_.empty() || argv_.front().empty())
      throw std::invalid_argument("runner_command.argv must name the runner program");
    if (signatures_.empty())
      throw std::invalid_argument(
          "runner_command.failure_signatures must not be empty (how else is a runner failure told from a "
          "failing command?)");
    own.validate();
    program_ = detail::find_program(argv_.front());
  }

  const std::vector<std::string>& runner_argv() const noexcept { return argv_; }
  const std::vector<std::string>& failure_signatures() const noexcept { return signatures_; }

  confined_launch prepare(sandbox_mode mode, const std::filesystem::path& root, launch_plan& plan) const {
    confined_launch launch = confined_launch_for(name, mode);
    if (plan.argv.empty()) throw std::invalid_argument("runner_command: the launch plan has no argv");

    std::vector<std::string> argv;
    if (program_) {
      argv.push_back(program_->string());
    } else {
      // Let the shell fail to exec it (see the header comment) and leave a
      // marker saying so in the status channel.
      argv = {plan.argv.front(), "-c", "exec \"$@\"", "bashexec-runner", argv_.front()};
      detail::pipe_pair marker = detail::make_status_pipe();
      const std::string text = fmt::format("runner {} not found or not executable", argv_.front());
      if (::write(marker.write.get(), text.data(), text.size()) < 0) detail::throw_syscall("write");
      launch.status = std::move(marker.read);
    }
    argv.insert(argv.end(), argv_.begin() + 1, argv_.end());
    wrap(plan, mode, root, std::move(argv));
    return launch;
  }

  /// After a non-zero exit: the runner's first stderr line when the runner
  /// failed (marker, configured signature anywhere in `err` or `out`, or a
  /// launch-failure shape), else empty.
  std::optional<std::string> runner_failure(confined_launch& launch, std::string_view err,
                                            std::string_view out = {}) const {
    if (launch.status) {
      std::string marker = detail::drain_nonblocking(launch.status.get());
      if (!marker.empty()) {
        std::string line = detail::first_line(err);
        return line.empty() ? marker : line;
      }
    }
    if (auto reason = detail::match_runner_signature(err, out, signatures_)) return reason;
    // The shell's launch-failure shapes count only on the first line and
    // only naming the runner: `cat /nope` failing must stay the command's own
    // failure.
    const std::string line = detail::first_line(err);
    if (line.empty()) return std::nullopt;
    const std::string& program = argv_.front();
    const std::string base = std::filesystem::path(program).filename().string();
    if ((line.find(program) != std::string::npos || (!base.empty() && line.find(base) != std::string::npos)) &&
        detail::icontains_any(line, launch_failure_shapes))
      return line;
    return std::nullopt;
  }

  bool is_denial(std::string_view err) const noexcept { return detail::icontains_any(err, denial_dialects); }

 private:
  std::vector<std::string> argv_;
  std::vector<std::string> signatures_;
  std::optional<std::filesystem::path> program_;
};

static_assert(confining_policy<runner_command>);

}  // namespace bashexec

// The bodies of confinement/runner_command.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/confinement/runner_command.hpp"

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
#include "bashexec/confinement/detail/bwrap_style.hpp"
#include "bashexec/detail/kernel/status_pipe.hpp"
#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/text/text_match.hpp"
#include "bashexec/detail/trust/find_program.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/launch.hpp"

namespace bashexec {

BASHEXEC_DECL void runner_command::config::validate() const {
  if (argv.empty() != failure_signatures.empty())
    throw std::invalid_argument(
        "runner_command.argv and runner_command.failure_signatures must be given together");
  for (const auto& signature : failure_signatures)
    if (signature.find_first_not_of(" \t\r\n\f\v") == std::string::npos)
      throw std::invalid_argument(
          "runner_command.failure_signatures must not hold a blank signature (it would match every failure)");
}

BASHEXEC_DECL runner_command::runner_command(const sandbox_config& shared, const config& own)
    : bwrap_style(shared), argv_(own.argv), signatures_(own.failure_signatures) {
  if (argv_.empty() || argv_.front().empty())
    throw std::invalid_argument("runner_command.argv must name the runner program");
  if (signatures_.empty())
    throw std::invalid_argument(
        "runner_command.failure_signatures must not be empty (how else is a runner failure told from a "
        "failing command?)");
  own.validate();
  program_ = detail::lookup_trusted_program(argv_.front());
}

BASHEXEC_DECL confined_launch runner_command::prepare(sandbox_mode mode, const std::filesystem::path& root,
                                                      launch_plan& plan) const {
  confined_launch launch = confined_launch_for(name, mode);
  if (plan.argv.empty()) throw std::invalid_argument("runner_command: the launch plan has no argv");

  const std::string refusal = detail::program_refusal(program_, root);
  std::vector<std::string> argv;
  if (refusal.empty()) {
    argv.push_back(program_.path->string());
  } else {
    // Fail through the shell (see the header comment) and leave a marker
    // saying why in the status channel. Nothing is executed by name.
    const std::string text = fmt::format("runner {} refused: {}", argv_.front(), refusal);
    argv = {plan.argv.front(), "-c", "printf '%s\\n' \"$1\" >&2; exit 127", "bashexec-runner", text};
    detail::pipe_pair marker = detail::make_status_pipe();
    if (::write(marker.write.get(), text.data(), text.size()) < 0) detail::throw_syscall("write");
    launch.status = std::move(marker.read);
  }
  argv.insert(argv.end(), argv_.begin() + 1, argv_.end());
  wrap(plan, mode, root, std::move(argv));
  return launch;
}

BASHEXEC_DECL std::optional<std::string> runner_command::runner_failure(confined_launch& launch, std::string_view err,
                                                                      std::string_view out) const {
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

BASHEXEC_DECL bool runner_command::is_denial(std::string_view err) const noexcept {
  return detail::icontains_any(err, denial_dialects);
}

}  // namespace bashexec

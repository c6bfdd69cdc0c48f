// The bodies of confinement/bwrap.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/confinement/bwrap.hpp"

#include <array>
#include <charconv>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
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

BASHEXEC_DECL bwrap::bwrap(const sandbox_config& shared, const config& own)
    : bwrap_style(shared),
      program_(detail::lookup_trusted_program(own.program)),
      setsid_(detail::lookup_trusted_program(own.setsid)) {
  own.validate();
  if (::geteuid() == 0) setpriv_ = detail::lookup_trusted_program(own.setpriv);
}

BASHEXEC_DECL confined_launch bwrap::prepare(sandbox_mode mode, const std::filesystem::path& root,
                                             launch_plan& plan) const {
  confined_launch launch = confined_launch_for(name, mode);
  require_trusted(program_, name, mode, root, "the bubblewrap program", remedy);
  if (setpriv_)
    require_trusted(*setpriv_, name, mode, root, "the setpriv program (bwrap as root needs it)",
                    "install util-linux or set bwrap::config::setpriv to its path");

  if (plan.controlling_terminal) {
    // The terminal is taken inside, by the command's own session (the
    // header comment): bwrap itself never owns it.
    require_trusted(setsid_, name, mode, root, "the setsid program (a command on a terminal needs it)",
                    "install util-linux or set bwrap::config::setsid to its path");
    plan.argv.insert(plan.argv.begin(), {setsid_.path->string(), "--ctty"});
    plan.controlling_terminal = false;
  }

  detail::pipe_pair status = detail::make_status_pipe();
  const std::size_t status_fd = 3 + plan.inherited_fds.size();
  plan.inherited_fds.push_back(status.write.get());

  std::vector<std::string> setpriv;  // root: empty the bounding set too (see the header comment)
  if (setpriv_)
    setpriv = {"--cap-add", "CAP_SETPCAP", "--", setpriv_->path->string(), "--bounding-set=-all", "--inh-caps=-all",
               "--ambient-caps=-all"};
  wrap(plan, mode, root, {program_.path->string(), "--json-status-fd", std::to_string(status_fd)},
       std::move(setpriv));

  launch.status = std::move(status.read);
  launch.keep_alive = std::make_shared<detail::unique_fd>(std::move(status.write));
  return launch;
}

BASHEXEC_DECL std::optional<std::string> bwrap::runner_failure(confined_launch& launch, std::string_view err,
                                                             std::string_view out) const {
  if (!launch.status) {
    // No channel (a launch this policy did not prepare): signatures only.
    if (detail::match_runner_signature(err, out, runner_failure_signatures)) return reason(err, out);
    return std::nullopt;
  }
  const std::string status = detail::drain_nonblocking(launch.status.get());
  if (status.find("\"exit-code\"") != std::string::npos) return std::nullopt;  // the command ran
  if (status.find("\"child-pid\"") == std::string::npos) return reason(err, out);  // never got that far
  // A child was cloned but no exit code came: bwrap >= 0.4 means the setup
  // or the exec failed. Older bwraps never report exit codes, so insist on
  // bwrap's own message shape too.
  if (detail::match_runner_signature(err, out, runner_failure_signatures)) return reason(err, out);
  return std::nullopt;
}

BASHEXEC_DECL std::optional<int> bwrap::reported_exit_code(confined_launch& launch) const {
  if (!launch.status) return std::nullopt;
  // bwrap writes `{ "exit-code": N }` on a line of its own.
  const std::string status = detail::drain_nonblocking(launch.status.get());
  constexpr std::string_view key = "\"exit-code\"";
  std::size_t at = status.find(key);
  if (at == std::string::npos) return std::nullopt;
  at = status.find_first_not_of(": \t", at + key.size());
  int code = 0;
  const char* begin = at == std::string::npos ? status.data() + status.size() : status.data() + at;
  const auto [end, error] = std::from_chars(begin, status.data() + status.size(), code);
  if (error != std::errc{} || end == begin) return std::nullopt;
  return code;
}

BASHEXEC_DECL bool bwrap::is_denial(std::string_view err) const noexcept {
  return detail::icontains_any(err, denial_dialects);
}

BASHEXEC_DECL std::string bwrap::reason(std::string_view err, std::string_view out) {
  if (auto matched = detail::match_runner_signature(err, out, runner_failure_signatures)) return *matched;
  std::string line = detail::first_line(err);
  return line.empty() ? std::string("bwrap exited before starting the command") : line;
}

}  // namespace bashexec

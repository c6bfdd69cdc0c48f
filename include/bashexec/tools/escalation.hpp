// tools/escalation: the sandbox mode a tool call runs under (docs/contract.md
// item 18): the escalation grant if there is one, else the session's
// override, else the executor's default. Reads the `sandbox_permissions` +
// `justification` pair, refuses a request that is not strictly wider, and
// puts the question to the approver, each refusal with its own text.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/sandbox_mode.hpp"
#include "bashexec/session/session_log.hpp"
#include "bashexec/tools/approval.hpp"
#include "bashexec/tools/approval_text.hpp"
#include "bashexec/tools/arguments.hpp"

namespace bashexec {

/// A call's request to run under a wider mode, and the model's reason.
struct escalation {
  sandbox_mode mode;
  std::string justification;
};

/// The mode a call of a session runs under without escalation: the
/// session's override (from `log`, may be null), else `executor_default`;
/// empty when the executor never confines (`executor_default` empty).
inline std::optional<sandbox_mode> effective_mode(std::optional<sandbox_mode> executor_default,
                                                  const session_log* log) {
  if (!executor_default) return std::nullopt;
  if (log)
    if (auto override_mode = effective_sandbox_mode(*log)) return override_mode;
  return executor_default;
}

/// `sandbox_permissions` + `justification`, validated as a pair; empty when
/// neither is given. `advertised`: the executor confines, so the schema
/// offers the pair. Throws tool_args::argument_error.
inline std::optional<escalation> read_escalation(const nlohmann::json& args, bool advertised) {
  using tool_args::argument_error;
  const auto* permissions = tool_args::find(args, "sandbox_permissions");
  const auto* justification = tool_args::find(args, "justification");
  if (!permissions && !justification) return std::nullopt;
  if (!advertised) {
    throw argument_error{fmt::format(
        "field \"{}\" is not supported: this executor does not sandbox commands, so there is nothing to widen",
        permissions ? "sandbox_permissions" : "justification")};
  }
  std::optional<sandbox_mode> mode;
  if (permissions) {
    if (permissions->is_string()) mode = parse_sandbox_mode(permissions->get_ref<const std::string&>());
    if (!mode || *mode == sandbox_mode::read_only)
      throw argument_error{"field \"sandbox_permissions\" must be \"workspace-write\" or \"danger-full-access\""};
  }
  std::string reason;
  if (justification) {
    if (!justification->is_string()) throw argument_error{"field \"justification\" must be a string"};
    reason = justification->get<std::string>();
    tool_args::reject_blank(reason, "justification");
  }
  if (!permissions)
    throw argument_error{"field \"justification\" is only accepted together with \"sandbox_permissions\""};
  if (!justification)
    throw argument_error{"field \"sandbox_permissions\" requires \"justification\" (why the wider mode is needed)"};
  return escalation{*mode, std::move(reason)};
}

/// The refusal of a request that is not strictly wider than `current`
/// (nobody is asked); empty when it is wider.
inline std::optional<std::string> not_wider_refusal(const escalation& wider, sandbox_mode current) {
  if (is_wider(wider.mode, current)) return std::nullopt;
  return fmt::format(
      "sandbox_permissions \"{}\" is not wider than the current sandbox mode \"{}\", so there is nothing to "
      "approve; the command did not run. Run it without sandbox_permissions and justification.",
      wider.mode, current);
}

/// Asks `approve` (empty: nobody can approve) whether `request` may run;
/// empty when it may, otherwise the refusal the model is shown. A request
/// too long to show in full (`approval_text`) is refused before anyone is
/// asked. An approver that throws counts as `unavailable`.
inline std::optional<std::string> ask_approval(const approval_callback& approve, const approval_request& request) {
  if (!approve)
    return fmt::format(
        "running this command under \"{}\" needs a person's approval, but nobody can approve requests in this "
        "session; the command did not run",
        request.requested_mode);
  if (!approval_text(request)) return approval_too_long_refusal(request);
  approval_outcome outcome = approval_outcome::unavailable;
  try {
    outcome = approve(request);
  } catch (...) {
    outcome = approval_outcome::unavailable;
  }
  switch (outcome) {
    case approval_outcome::allowed_once: return std::nullopt;
    case approval_outcome::rejected:
      return fmt::format(
          "the request to run this command under \"{}\" was rejected; the command did not run. Do not try to get "
          "around the sandbox; continue within the current mode or ask the user how to proceed.",
          request.requested_mode);
    case approval_outcome::cancelled:
      return std::string("the approval request was cancelled before anyone answered; the command did not run");
    case approval_outcome::unavailable: break;
  }
  return std::string("approval is unavailable right now; the command did not run");
}

}  // namespace bashexec

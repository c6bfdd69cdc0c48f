// tools/escalation: the sandbox mode a tool call runs under (docs/contract.md
// item 18): the escalation grant if there is one, else the session's
// override, else the executor's default. Reads the `sandbox_permissions` +
// `justification` pair, refuses a request that is not strictly wider, and
// puts the question to the approver, each refusal with its own text.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/detail/text/domain_name.hpp"
#include "bashexec/sandbox_mode.hpp"
#include "bashexec/session/session_log.hpp"
#include "bashexec/tools/approval.hpp"
#include "bashexec/tools/approval_text.hpp"
#include "bashexec/tools/arguments.hpp"

namespace bashexec {

/// A call's request to run under a wider mode and/or to reach more names
/// (under `sandbox.network = allowlist`), and the model's reason.
struct escalation {
  /// `sandbox_permissions`; empty when only the network is asked for.
  std::optional<sandbox_mode> mode;
  std::string justification;
  /// `network_permissions`, canonical (`pypi.org`, `*.npmjs.org`); empty
  /// when only the mode is asked for.
  std::vector<std::string> domains{};
};

/// The most names one call may ask for.
inline constexpr std::size_t max_network_permissions = 16;

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
/// `network_advertised`: the executor's network is an allowlist, so the
/// schema offers `network_permissions` too.
inline std::optional<escalation> read_escalation(const nlohmann::json& args, bool advertised,
                                                 bool network_advertised = false) {
  using tool_args::argument_error;
  const auto* permissions = tool_args::find(args, "sandbox_permissions");
  const auto* justification = tool_args::find(args, "justification");
  const auto* network = tool_args::find(args, "network_permissions");
  if (network && !network_advertised)
    throw argument_error{
        "field \"network_permissions\" is not supported: this executor's network is not an allowlist, so there "
        "are no names to grant"};
  std::vector<std::string> domains;
  if (network) {
    if (!network->is_array() || network->empty() || network->size() > max_network_permissions)
      throw argument_error{fmt::format(
          "field \"network_permissions\" must be an array of 1 to {} domain names (\"pypi.org\", \"*.npmjs.org\")",
          max_network_permissions)};
    for (const auto& entry : *network) {
      std::optional<network::domain_pattern> pattern;
      if (entry.is_string()) pattern = network::domain_pattern::parse(entry.get_ref<const std::string&>());
      if (!pattern)
        throw argument_error{"field \"network_permissions\" must hold domain names or *.wildcards, like "
                             "\"pypi.org\" or \"*.npmjs.org\""};
      domains.push_back(pattern->wildcard ? "*." + pattern->name : pattern->name);
    }
    if (!justification)
      throw argument_error{
          "field \"network_permissions\" requires \"justification\" (why the command needs those names)"};
  }
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
  if (!permissions && domains.empty())
    throw argument_error{network_advertised ? "field \"justification\" is only accepted together with "
                                              "\"sandbox_permissions\" or \"network_permissions\""
                                            : "field \"justification\" is only accepted together with "
                                              "\"sandbox_permissions\""};
  if (!justification)
    throw argument_error{"field \"sandbox_permissions\" requires \"justification\" (why the wider mode is needed)"};
  return escalation{mode, std::move(reason), std::move(domains)};
}

/// The refusal of a request that is not strictly wider than `current`
/// (nobody is asked); empty when it is wider.
inline std::optional<std::string> not_wider_refusal(const escalation& wider, sandbox_mode current) {
  if (!wider.mode || is_wider(*wider.mode, current)) return std::nullopt;
  return fmt::format(
      "sandbox_permissions \"{}\" is not wider than the current sandbox mode \"{}\", so there is nothing to "
      "approve; the command did not run. Run it without sandbox_permissions and justification.",
      *wider.mode, current);
}

/// What an approval decided: the refusal the model is shown (empty when the
/// call may run), and whether the names asked for are the session's now.
struct approval_decision {
  std::optional<std::string> refusal;
  bool for_session = false;
};

/// Asks `approve` (empty: nobody can approve) whether `request` may run. A
/// request too long to show in full (`approval_text`) is refused before
/// anyone is asked. An approver that throws counts as `unavailable`.
inline approval_decision decide_approval(const approval_callback& approve, const approval_request& request) {
  if (!approve)
    return {fmt::format(
        "running this command {} needs a person's approval, but nobody can approve requests in this "
        "session; the command did not run",
        requested_widening(request))};
  if (!approval_text(request)) return {approval_too_long_refusal(request)};
  approval_outcome outcome = approval_outcome::unavailable;
  try {
    outcome = approve(request);
  } catch (...) {
    outcome = approval_outcome::unavailable;
  }
  switch (outcome) {
    case approval_outcome::allowed_once: return {};
    case approval_outcome::allowed_for_session: return {std::nullopt, !request.requested_domains.empty()};
    case approval_outcome::rejected:
      return {fmt::format(
          "the request to run this command {} was rejected; the command did not run. Do not try to get "
          "around the sandbox; continue within the current mode or ask the user how to proceed.",
          requested_widening(request))};
    case approval_outcome::cancelled:
      return {std::string("the approval request was cancelled before anyone answered; the command did not run")};
    case approval_outcome::unavailable: break;
  }
  return {std::string("approval is unavailable right now; the command did not run")};
}

/// `decide_approval`'s refusal alone: empty when the call may run.
inline std::optional<std::string> ask_approval(const approval_callback& approve, const approval_request& request) {
  return decide_approval(approve, request).refusal;
}

}  // namespace bashexec

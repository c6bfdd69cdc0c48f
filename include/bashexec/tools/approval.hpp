// tools/approval: the question the tool layer asks a person (or a policy)
// before running one call under a wider sandbox mode, and the four answers
// (docs/contract.md item 18).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "bashexec/detail/text/enum_names.hpp"
#include "bashexec/ids.hpp"
#include "bashexec/sandbox_mode.hpp"

namespace bashexec {

enum class approval_outcome {
  /// Run this one call under the requested mode; the next call is back to normal.
  allowed_once,
  /// The person said no.
  rejected,
  /// The question was withdrawn (the turn was interrupted, the dialog closed).
  cancelled,
  /// Nobody can answer now (headless run, approval service down).
  unavailable,
  /// As allowed_once, and the network names asked for are the session's from
  /// now on (a `network-grant` event in its log, durable). For a request that
  /// asks for no names it is allowed_once: a session's mode changes only
  /// through its log's `sandbox-mode` event (set_mode), never by an answer.
  allowed_for_session,
};

template <>
struct detail::enum_names<approval_outcome> {
  static constexpr enum_table<approval_outcome, 5> table{{{approval_outcome::allowed_once, "allowed-once"},
      {approval_outcome::rejected, "rejected"}, {approval_outcome::cancelled, "cancelled"},
      {approval_outcome::unavailable, "unavailable"}, {approval_outcome::allowed_for_session, "allowed-for-session"}}};
};

/// Parses the spelling `to_string` produces; anything else is empty.
constexpr std::optional<approval_outcome> parse_approval_outcome(std::string_view text) noexcept {
  return detail::value_named(detail::enum_names<approval_outcome>::table, text);
}

/// One escalation request, as the model made it.
struct approval_request {
  /// The session asking; `nullopt` for a caller without one.
  std::optional<owner_token> session;
  std::string command;
  /// The model's own one-line description of the command.
  std::string description;
  /// The mode the call would run under without approval.
  sandbox_mode current_mode = sandbox_mode::read_only;
  /// Strictly wider than `current_mode`; equal to it when the request asks
  /// for network access only (`requested_domains`).
  sandbox_mode requested_mode = sandbox_mode::workspace_write;
  std::string justification;
  /// Under `sandbox.network = allowlist`: names this one call would reach
  /// besides the allowed domains (exact, or `*.` wildcards; validated and
  /// lower-cased). Empty when no network access is asked for.
  std::vector<std::string> requested_domains{};
  /// With carried shell state (tools/carried_state.hpp), what the call
  /// would start with besides the command: its directory when carried
  /// (absolute), the carried variables and unset names, and the startup
  /// variables it starts without because they were set under a narrower mode.
  std::string carried_cwd{};
  std::map<std::string, std::string> carried_env{};
  std::vector<std::string> carried_unset{};
  std::vector<std::string> withheld_env{};

  /// Whether the mode is widened (else only the network is asked for).
  bool widens_mode() const noexcept { return requested_mode != current_mode; }
};

/// What `request` asks for, as the refusals name it: `under "workspace-write"`,
/// `with network access to pypi.org, *.npmjs.org`, or both joined by "and".
inline std::string requested_widening(const approval_request& request) {
  std::string what;
  if (request.widens_mode() || request.requested_domains.empty())
    what = fmt::format("under \"{}\"", request.requested_mode);
  if (!request.requested_domains.empty()) {
    if (!what.empty()) what += " and ";
    what += "with network access to ";
    for (std::size_t i = 0; i < request.requested_domains.size(); ++i)
      what += (i ? ", " : "") + request.requested_domains[i];
  }
  return what;
}

/// Asked once per escalation request; may block (a person is answering).
/// A callback that throws counts as `unavailable`.
using approval_callback = std::function<approval_outcome(const approval_request&)>;

}  // namespace bashexec

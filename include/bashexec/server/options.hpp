// server/options: how a tool server (json_lines_server, mcp_server) serves:
// who answers escalation questions, how many calls run at once, where the
// sessions' logs live, the sessions' working directory, what sessions carry
// from call to call, the request bounds
// and how long a response may wait for a client that does not read.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>

#include "bashexec/server/request_parse.hpp"
#include "bashexec/tools/carried_state.hpp"

namespace bashexec::server {

/// Who answers escalation questions: nobody (`never`: each is refused as
/// unavailable), a policy that allows every one (`always`), or a person
/// asked through the protocol (`ask`: `approval` lines under
/// json_lines_server, elicitation under mcp_server).
enum class approval_policy { never, always, ask };

struct server_options {
  approval_policy approve = approval_policy::never;
  /// Tool calls running at once; reading pauses while all are taken.
  std::size_t max_in_flight = 32;
  /// Where the sessions' logs (their mode overrides) live, one file per
  /// session; empty: in memory only, forgotten with the server. Keep it out
  /// of every writable root of a confined command.
  std::filesystem::path session_dir{};
  /// The sessions' working directory (a relative `workdir` resolves against
  /// it); empty: the executor's.
  std::filesystem::path workdir{};
  /// What each session carries from call to call (tools/carried_state.hpp);
  /// by default nothing, every call a fresh shell.
  state_carry carry{};
  /// The bounds of one request line.
  request_limits limits{};
  /// How long one response line may wait for the output descriptor to take
  /// any byte of it. Past that the client counts as gone (it stopped
  /// reading): that line and every later one are dropped, and the server
  /// shuts down as after `stop()` — calls in flight aborted — rather than
  /// wait for a reader forever (line_io.hpp).
  std::chrono::milliseconds write_timeout{std::chrono::seconds(30)};
};

}  // namespace bashexec::server

// server/call_runner: how a tool server runs one tool call through its
// `bash_tools`: the call's session, workdir, log and progress, and the
// approval policy (`ask` goes to the server's asker). Shared by
// json_lines_server and mcp_server.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "bashexec/executor.hpp"
#include "bashexec/run_progress.hpp"
#include "bashexec/server/options.hpp"
#include "bashexec/session/session_log.hpp"
#include "bashexec/tools/approval.hpp"
#include "bashexec/tools/bash_tools.hpp"

namespace bashexec::server {

/// A tool call read from a request line, to run now or on a worker thread.
struct tool_call {
  nlohmann::json id;
  std::string tool;
  nlohmann::json args;
  std::optional<std::string> session;  // empty: no session, ownerless tasks
  std::shared_ptr<session_log> log;
  /// Set by a caller that reports progress (the MCP server).
  std::shared_ptr<run_progress> progress{};
};

/// Puts an escalation question to whoever answers them; `stop` is the
/// call's own stop token (a cancelled call withdraws its question).
using asker = std::function<approval_outcome(const approval_request&, std::stop_token)>;

/// Runs tool calls through one `bash_tools` the way every protocol of the
/// servers does: the session, workdir, log and progress of the call, and the
/// approval policy (`ask` goes to the asker).
template <tool_executor Executor>
class call_runner {
 public:
  call_runner(bash_tools<Executor>& tools, approval_policy policy, std::filesystem::path workdir, asker ask)
      : tools_(tools), policy_(policy), workdir_(std::move(workdir)), ask_(std::move(ask)) {}

  bash_tools<Executor>& tools() noexcept { return tools_; }

  /// Runs `call`; `stop` aborts a foreground command. Throws only what
  /// building the context throws (out of memory); `bash_tools::call` never does.
  tool_result call(const tool_call& call, std::stop_token stop) const {
    call_context context;
    if (call.session) context.session = owner_token(*call.session);
    context.cwd = workdir_;
    context.log = call.log.get();
    context.grant_log = call.log.get();
    context.stop = stop;
    context.progress = call.progress;
    if (policy_ == approval_policy::always)
      context.approve = [](const approval_request&) { return approval_outcome::allowed_once; };
    else if (policy_ == approval_policy::ask && ask_)
      context.approve = [this, stop](const approval_request& request) { return ask_(request, stop); };
    return tools_.call(call.tool, call.args, context);
  }

 private:
  bash_tools<Executor>& tools_;
  approval_policy policy_;
  std::filesystem::path workdir_;
  asker ask_;
};

}  // namespace bashexec::server

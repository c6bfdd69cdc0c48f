// server/http_sessions: what one session of `bashexec mcp --http` is — an
// `mcp_server` of its own on one end of a socket pair, the HTTP transport
// (server/mcp_http_server.hpp) holding the other. Every HTTP session is thus
// served by the very MCP layer the stdio transport runs (lifecycle, tools,
// tasks, elicitation, progress, limits): the transport only moves lines.
//
// Kept apart from the transport so that the executor-typed part (this) and
// the Asio/Beast part (the transport, not a template) compile in different
// units: a program instantiates `mcp_sessions` for its executor type where
// it already compiles `mcp_server`, and the HTTP server once elsewhere.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "bashexec/executor.hpp"
#include "bashexec/ids.hpp"
#include "bashexec/server/mcp_server.hpp"

namespace bashexec::server {

/// One HTTP session's MCP server, reading and writing newline-delimited
/// JSON-RPC on one descriptor.
class http_session_backend {
 public:
  virtual ~http_session_backend() = default;
  /// Serves until end of input or `stop`, then kills the background commands
  /// the session started (an ended session leaves nothing running).
  virtual void serve() = 0;
  /// From any thread: as mcp_server::stop.
  virtual void stop() noexcept = 0;
};

/// Makes the server of a new session: `fd` is its end of the socket pair
/// (not owned; left open), `session` its owner token and session name.
using http_session_factory = std::function<std::unique_ptr<http_session_backend>(int fd, const std::string& session)>;

/// The factory of sessions served by `mcp_server<Executor>` over `executor`
/// (which must outlive every session), each with `options` but its own
/// session name. The sessions' mode overrides live in memory: a session id
/// is random and dies with the server, so there is nothing to replay.
template <executor Executor>
http_session_factory mcp_sessions(Executor& executor, mcp_server_options options) {
  options.session_dir.clear();
  return [&executor, options = std::move(options)](int fd, const std::string& session) {
    struct backend final : http_session_backend {
      backend(Executor& shared, mcp_server_options served, int fd)
          : executor(shared), owner(served.session), server(shared, std::move(served), fd, fd) {}
      void serve() override {
        server.serve();
        // Its tasks were stopped with it; its background commands go too.
        try {
          for (const auto& task : executor.list())
            if (task.status == task_status::running && task.owner == owner) executor.kill(task.id);
        } catch (...) {
          // The executor's disposal kills whatever is left.
        }
      }
      void stop() noexcept override { server.stop(); }
      Executor& executor;
      owner_token owner;
      mcp_server<Executor> server;
    };
    mcp_server_options served = options;
    served.session = session;
    return std::make_unique<backend>(executor, std::move(served), fd);
  };
}

}  // namespace bashexec::server

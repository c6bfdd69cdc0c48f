// The `bashexec mcp --http` transport as the program runs it: the
// Streamable HTTP server (server/mcp_http_server.hpp) over the sessions
// main.cpp makes for its executor, stopped by the first SIGINT, SIGTERM or
// SIGHUP. Defined in mcp_http.cpp, a unit of its own, as the egress gateway
// is: Asio and Beast build beside main.cpp rather than inside it.
#pragma once

#include <memory>

#include <bashexec/server/executor_api.hpp>
#include <bashexec/server/http_sessions.hpp>

#include "options.hpp"
#include "signals.hpp"

namespace bashexec::cli {

/// Serves until a signal; then every session is stopped and its commands
/// killed before it returns. `api`, when given, is served at /exec/v1
/// (--executor-api). Throws std::invalid_argument (bad options, an
/// unreadable token file) or infrastructure_error (cannot listen).
void serve_mcp_http(server::http_session_factory sessions, std::shared_ptr<server::executor_api_backend> api,
                    const mcp_options& options, signal_watch& signals);

}  // namespace bashexec::cli

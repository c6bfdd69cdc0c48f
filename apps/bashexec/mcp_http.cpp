// `bashexec mcp --http`: the HTTP server around the program's sessions
// (mcp_http.hpp).
#include "mcp_http.hpp"

#include <cerrno>
#include <string>
#include <utility>

#include <unistd.h>

#include <fmt/format.h>

#include <bashexec/server/http_guard.hpp>
#include <bashexec/server/mcp_http_server.hpp>

namespace bashexec::cli {

void serve_mcp_http(server::http_session_factory sessions, std::shared_ptr<server::executor_api_backend> api,
                    const mcp_options& options, signal_watch& signals) {
  server::mcp_http_options http;
  http.address = options.http_address.value_or("127.0.0.1");
  http.port = options.http_port;
  if (options.token_file) http.token = server::http::read_token_file(*options.token_file);
  http.allowed_hosts = options.allow_hosts;
  http.allowed_origins = options.allow_origins;
  http.max_sessions = options.max_sessions;
  http.idle_timeout = options.session_idle_timeout;
  http.request_timeout = options.request_timeout;
  http.write_timeout = options.write_timeout;
  http.executor_api = std::move(api);
  const bool executor_api = http.executor_api != nullptr;
  const std::string executor_path = http.executor_path;
  const std::string mcp_path = http.path;
  server::mcp_http_server server(std::move(sessions), std::move(http));
  // The one line a harness waits for (port 0 picks the port).
  std::string ready = fmt::format("bashexec: MCP over HTTP at {}\n", server.url());
  if (executor_api)
    ready += fmt::format("bashexec: executor protocol at {}{}\n",
                         server.url().substr(0, server.url().size() - mcp_path.size()), executor_path);
  [[maybe_unused]] const auto written = ::write(STDERR_FILENO, ready.data(), ready.size());
  const auto on_signal = signals.on_signal([&server] { server.stop(); });
  server.serve();
}

}  // namespace bashexec::cli

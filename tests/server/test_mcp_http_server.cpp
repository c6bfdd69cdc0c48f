// mcp_http_server embedded in a C++ host (docs/embedding-server.md, "The MCP
// server over HTTP"): its options refused with the field named, a session
// served over a real loopback socket, stop() ending every session and
// killing its background commands, and sessions that share one executor but
// hear only of their own tasks. The CLI's HTTP behaviour is
// tests/mcp/mcp_http_test.py and the SDK's tests/mcp/mcp_sdk_test.mjs --http.
#include <chrono>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <bashexec/bashexec.hpp>
#include <bashexec/server/http_sessions.hpp>
#include <bashexec/server/mcp_http_server.hpp>

using namespace bashexec;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

/// One HTTP/1.1 connection to 127.0.0.1:port, read with a deadline.
class connection {
 public:
  explicit connection(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd_.get() >= 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(port);
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_.get(), reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
  }

  void send(const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::send(fd_.get(), text.data() + done, text.size() - done, MSG_NOSIGNAL);
      REQUIRE(n > 0);
      done += static_cast<std::size_t>(n);
    }
  }

  /// Reads until `until` appears in what was read, the peer closes, or the
  /// deadline; returns everything read so far.
  const std::string& read_until(const std::string& until, std::chrono::milliseconds patience = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (received_.find(until) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buffer[4096];
      const ssize_t n = ::recv(fd_.get(), buffer, sizeof buffer, 0);
      if (n <= 0) break;
      received_.append(buffer, static_cast<std::size_t>(n));
    }
    return received_;
  }

 private:
  detail::unique_fd fd_;
  std::string received_;
};

std::string post(std::uint16_t port, const json& message, const std::optional<std::string>& session) {
  const std::string body = message.dump();
  std::string request = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                        "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n";
  if (session) request += "Mcp-Session-Id: " + *session + "\r\nMCP-Protocol-Version: 2025-11-25\r\n";
  request += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  connection c(port);
  c.send(request);
  return c.read_until("\r\n0\r\n\r\n");  // the end of a chunked SSE answer (or the close)
}

/// The JSON of the first `data:` event in `answer` that has `"id"`.
json response_in(const std::string& answer) {
  std::size_t at = 0;
  while ((at = answer.find("data: ", at)) != std::string::npos) {
    const std::size_t end = answer.find('\n', at);
    const json message = json::parse(answer.substr(at + 6, end - at - 6), nullptr, false);
    if (message.is_object() && message.contains("id")) return message;
    at = end;
  }
  return json();
}

std::string session_of(const std::string& answer) {
  const auto at = answer.find("Mcp-Session-Id: ");
  REQUIRE(at != std::string::npos);
  return answer.substr(at + 16, 32);
}

std::string open_session(std::uint16_t port) {
  const std::string answer = post(
      port,
      {{"jsonrpc", "2.0"}, {"id", 0}, {"method", "initialize"},
       {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()},
                   {"clientInfo", {{"name", "test"}, {"version", "1"}}}}}},
      std::nullopt);
  REQUIRE(answer.starts_with("HTTP/1.1 200"));
  const std::string session = session_of(answer);
  const std::string ready = post(port, {{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, session);
  REQUIRE(ready.starts_with("HTTP/1.1 202"));
  return session;
}

json bash_call(int id, const std::string& command, bool background) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"},
          {"params", {{"name", "bash"},
                      {"arguments", {{"command", command}, {"description", "test"}, {"run_in_background", background}}}}}};
}

/// A server on any free loopback port, served on a thread of its own.
struct running_server {
  explicit running_server(local_executor& executor)
      : server(server::mcp_sessions(executor, {}), server::mcp_http_options{}),
        serving([this] { server.serve(); }) {}
  ~running_server() {
    server.stop();
    if (serving.joinable()) serving.join();
  }
  server::mcp_http_server server;
  std::thread serving;
};

}  // namespace

TEST_CASE("mcp_http_server refuses options that cannot serve, naming the field", "[http][server]") {
  local_executor executor;
  const auto sessions = server::mcp_sessions(executor, {});
  const auto refused = [&](server::mcp_http_options options, const std::string& field) {
    try {
      server::mcp_http_server server(sessions, std::move(options));
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).starts_with(field + ":"));
    }
  };
  server::mcp_http_options open;
  open.address = "0.0.0.0";
  refused(open, "token");  // any host that reaches it could run commands
  server::mcp_http_options named;
  named.address = "localhost";
  refused(named, "address");
  server::mcp_http_options relative;
  relative.path = "mcp";
  refused(relative, "path");
  CHECK_THROWS_AS(server::mcp_http_server(server::http_session_factory{}, {}), std::invalid_argument);
}

TEST_CASE("mcp_http_server serves a session over a socket, and stop ends it and kills its background commands",
          "[http][server]") {
  local_executor executor;
  std::optional<running_server> running(std::in_place, executor);
  const std::uint16_t port = running->server.port();
  CHECK(running->server.url() == "http://127.0.0.1:" + std::to_string(port) + "/mcp");
  const std::string session = open_session(port);

  const json echoed = response_in(post(port, bash_call(1, "echo over-http", false), session));
  REQUIRE(echoed.contains("result"));
  CHECK(echoed["result"]["content"][0]["text"].get<std::string>().find("over-http") != std::string::npos);

  const json started = response_in(post(port, bash_call(2, "sleep 60", true), session));
  REQUIRE(started["result"]["structuredContent"]["task_id"].is_string());
  const task_id id(started["result"]["structuredContent"]["task_id"].get<std::string>());
  CHECK(executor.get(id).status == task_status::running);

  running.reset();  // stop(), and serve() returned: every session ended
  const auto settled = executor.wait_for(id, 20s);
  REQUIRE(settled);
  CHECK(settled->status == task_status::killed);
}

TEST_CASE("sessions share one executor, and each hears of its own tasks only", "[http][server]") {
  local_executor executor;
  running_server running(executor);
  const std::uint16_t port = running.server.port();
  const std::string mine = open_session(port);
  const std::string theirs = open_session(port);
  const auto listen = [port](const std::string& session) {
    auto stream = std::make_unique<connection>(port);
    stream->send("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                 "\r\nAccept: text/event-stream\r\nMcp-Session-Id: " + session +
                 "\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n");
    REQUIRE(stream->read_until("retry: ").starts_with("HTTP/1.1 200"));
    return stream;
  };
  auto my_stream = listen(mine);
  auto their_stream = listen(theirs);

  const json started = response_in(post(port, bash_call(1, "echo secret-of-theirs", true), theirs));
  REQUIRE(started["result"]["structuredContent"]["task_id"].is_string());
  const task_id id(started["result"]["structuredContent"]["task_id"].get<std::string>());
  CHECK(their_stream->read_until("notifications/message").find("notifications/message") != std::string::npos);
  // Announced to both at the same moment, had it been: by now it would be here.
  CHECK(my_stream->read_until("notifications/message", 500ms).find("notifications/message") == std::string::npos);

  // The owner fence between them: their task is not mine to read.
  const json read = response_in(post(
      port,
      {{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/call"},
       {"params", {{"name", "bash_output"}, {"arguments", {{"task_id", id.value()}}}}}},
      mine));
  CHECK(read["result"]["isError"] == true);
}

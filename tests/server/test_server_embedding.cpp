// The tool servers embedded in a C++ host (docs/embedding-server.md): a
// json_lines_server and an mcp_server over an executor the host owns, fed
// request lines through a pipe, their responses read from another — the
// same objects `bashexec serve` and `bashexec mcp` run.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "executor_test_support.hpp"

#include <bashexec/bashexec.hpp>
#include <bashexec/server/json_lines_server.hpp>
#include <bashexec/server/mcp_server.hpp>

using namespace bashexec;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

/// The host's side of a server: a pipe it writes requests into and a pipe
/// it reads responses from, each line parsed as JSON.
class host_pipes {
 public:
  host_pipes() {
    int in[2];
    int out[2];
    REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    server_in_ = detail::unique_fd(in[0]);
    requests_ = detail::unique_fd(in[1]);
    responses_ = detail::unique_fd(out[0]);
    server_out_ = detail::unique_fd(out[1]);
    reader_.emplace(responses_.get(), gave_up_, std::size_t{1} << 20);
  }

  int server_in() const { return server_in_.get(); }
  int server_out() const { return server_out_.get(); }

  void send(const json& request) {
    const std::string line = request.dump() + "\n";
    REQUIRE(::write(requests_.get(), line.data(), line.size()) == static_cast<ssize_t>(line.size()));
  }

  /// End of input: the server stops reading and returns from `serve`.
  void close_requests() { requests_.reset(); }

  /// The first line the server wrote that `wanted` accepts; the others are
  /// kept for later calls (a background task's notice may come before the
  /// response that started it). Fails the test once the host has waited 30 s
  /// in all.
  template <class Pred>
  json next(Pred wanted) {
    for (auto kept = unclaimed_.begin(); kept != unclaimed_.end(); ++kept)
      if (wanted(*kept)) {
        json found = std::move(*kept);
        unclaimed_.erase(kept);
        return found;
      }
    std::string line;
    for (;;) {
      const auto status = reader_->next(line);
      REQUIRE(status == server::line_reader::status::ok);
      json parsed = json::parse(line);
      if (wanted(parsed)) return parsed;
      unclaimed_.push_back(std::move(parsed));
    }
  }

 private:
  detail::unique_fd server_in_, requests_, responses_, server_out_;
  server::closing_flag gave_up_;
  std::optional<server::line_reader> reader_;  // once `responses_` is open
  std::deque<json> unclaimed_;
  // Declared last, so stopped first: ends a read that would wait forever.
  std::jthread watchdog_{[this](std::stop_token stop) {
    std::mutex mutex;
    std::condition_variable_any never;
    std::unique_lock lock(mutex);
    if (!never.wait_for(lock, stop, 30s, [] { return false; }) && !stop.stop_requested()) gave_up_.set();
  }};
};

}  // namespace

TEST_CASE("a C++ host embeds the JSON-lines server over its own executor and descriptors", "[server][embedding]") {
  test_support::temp_dir work;
  executor_config config;
  config.cwd = work.path();
  local_executor executor(config);  // the host's: it outlives the server
  host_pipes pipes;

  server::server_options options;
  options.workdir = work.path();  // session_dir left empty: the sessions' logs stay in memory
  server::json_lines_server server(executor, options, pipes.server_in(), pipes.server_out());
  std::thread serving([&] { server.serve(); });

  pipes.send({{"id", 1}, {"op", "tools"}});
  const json tools = pipes.next([](const json& j) { return j.contains("id") && j["id"] == 1; });
  CHECK(tools["tools"].size() == 3);

  pipes.send({{"id", 2}, {"tool", "bash"}, {"session", "s1"}, {"args", {{"command", "echo hello; pwd"}, {"description", "greet"}}}});
  const json ran = pipes.next([](const json& j) { return j.contains("id") && j["id"] == 2; });
  CHECK(ran["text"] == "hello\n" + work.path().string() + "\n");
  CHECK(ran["is_error"] == false);

  pipes.send({{"id", 3},
              {"tool", "bash"},
              {"session", "s1"},
              {"args", {{"command", "echo later"}, {"description", "bg"}, {"run_in_background", true}}}});
  CHECK(pipes.next([](const json& j) { return j.contains("id") && j["id"] == 3; })["text"] ==
        "started background task bash-1");
  const json notice = pipes.next([](const json& j) { return j.contains("notice"); });
  CHECK(notice["session"] == "s1");
  pipes.send({{"id", 4}, {"tool", "bash_output"}, {"session", "s2"}, {"args", {{"task_id", "bash-1"}}}});
  CHECK(pipes.next([](const json& j) { return j.contains("id") && j["id"] == 4; })["text"] ==
        "task bash-1 belongs to another session");

  pipes.close_requests();
  serving.join();
  CHECK_FALSE(server.output_lost());
}

TEST_CASE("a C++ host embeds the MCP server over its own executor and descriptors", "[server][embedding][mcp]") {
  test_support::temp_dir work;
  executor_config config;
  config.cwd = work.path();
  local_executor executor(config);
  host_pipes pipes;

  server::mcp_server_options options;
  options.workdir = work.path();
  options.session = "host";
  server::mcp_server server(executor, options, pipes.server_in(), pipes.server_out());
  std::thread serving([&] { server.serve(); });

  pipes.send({{"jsonrpc", "2.0"},
              {"id", 1},
              {"method", "initialize"},
              {"params", {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()}}}});
  CHECK(pipes.next([](const json& j) { return j.contains("id"); })["result"]["protocolVersion"] == "2025-06-18");
  pipes.send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  const json arguments = {{"command", "echo hi; exit 3"}, {"description", "d"}};
  pipes.send({{"jsonrpc", "2.0"},
              {"id", 2},
              {"method", "tools/call"},
              {"params", {{"name", "bash"}, {"arguments", arguments}}}});
  const json called = pipes.next([](const json& j) { return j.contains("id") && j["id"] == 2; });
  CHECK(called["result"]["content"][0]["text"] == "hi\n[exit code: 3]");
  CHECK(called["result"]["isError"] == false);
  CHECK(called["result"]["structuredContent"]["exit_code"] == 3);

  pipes.close_requests();
  serving.join();
  CHECK_FALSE(server.output_lost());
}

TEST_CASE("at end of input the JSON-lines server answers the calls in flight before serve returns (issue 25)",
          "[server][embedding][eof]") {
  local_executor executor;
  host_pipes pipes;
  server::json_lines_server server(executor, server::server_options{}, pipes.server_in(), pipes.server_out());
  std::thread serving([&] { server.serve(); });
  pipes.send({{"id", 1}, {"tool", "bash"}, {"args", {{"command", "sleep 0.5; echo late"}, {"description", "d"}}}});
  pipes.send({{"id", 2}, {"op", "tools"}});
  pipes.next([](const json& j) { return j.contains("id") && j["id"] == 2; });  // the call was read
  pipes.close_requests();
  const json late = pipes.next([](const json& j) { return j.contains("id") && j["id"] == 1; });
  CHECK(late["text"] == "late\n");  // before: "[aborted]"
  CHECK(late["is_error"] == false);
  serving.join();
  CHECK_FALSE(server.output_lost());
}

namespace {

/// Two slots, and half a second for a response to find a reader.
template <class Options>
Options impatient(Options options) {
  options.max_in_flight = 2;
  options.write_timeout = 500ms;
  return options;
}

/// Ends the host's requests and never reads a response: whether `server`'s
/// `serve` returns on its own within 15 s (else it is stopped, so the test
/// ends either way) and counts its output as lost.
template <class Server>
bool returns_when_the_host_stops_reading(Server& server, host_pipes& pipes) {
  std::atomic<bool> returned{false};
  std::thread serving([&] {
    server.serve();
    returned = true;
  });
  pipes.close_requests();
  const bool on_its_own = test_support::eventually([&] { return returned.load(); }, 15s);
  if (!on_its_own) server.stop();  // the old deadlock, ended: closing writers give up after 2 s
  serving.join();
  return on_its_own && server.output_lost();
}

}  // namespace

TEST_CASE("a host that stops reading cannot hold a server: past write_timeout its answers are dropped and serve returns",
          "[server][embedding][eof]") {
  local_executor executor;
  host_pipes pipes;  // its response end is never read here
  // Answers of 360 KB (60000 NULs as \u0000) against a 64 KiB pipe, more
  // calls than slots: the writers block and the reader waits for a slot.
  const json command = {{"command", "head -c 60000 /dev/zero"}, {"description", "d"}};
  SECTION("a write_timeout that is not positive is refused naming the field") {
    server::server_options options;
    options.write_timeout = 0ms;
    CHECK_THROWS_WITH(server::json_lines_server(executor, options, pipes.server_in(), pipes.server_out()),
                      Catch::Contains("write_timeout"));
  }
  SECTION("json_lines_server") {
    server::json_lines_server server(executor, impatient(server::server_options{}), pipes.server_in(),
                                     pipes.server_out());
    for (int id = 0; id < 6; ++id) pipes.send({{"id", id}, {"tool", "bash"}, {"args", command}});
    CHECK(returns_when_the_host_stops_reading(server, pipes));
  }
  SECTION("mcp_server") {
    server::mcp_server server(executor, impatient(server::mcp_server_options{}), pipes.server_in(),
                              pipes.server_out());
    pipes.send({{"jsonrpc", "2.0"}, {"id", "init"}, {"method", "initialize"},
                {"params", {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()}}}});
    pipes.send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    for (int id = 0; id < 6; ++id)
      pipes.send({{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"},
                  {"params", {{"name", "bash"}, {"arguments", command}}}});
    CHECK(returns_when_the_host_stops_reading(server, pipes));
  }
}

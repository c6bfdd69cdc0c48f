// server/json_lines_server: the tools as a JSON-lines server on two
// descriptors (`bashexec serve`; docs/tool-protocol.md), embeddable by a C++
// host (docs/embedding-server.md). The reading thread reads one bounded line
// at a time and hands it to request_handler; tool calls run on worker
// threads, at most `max_in_flight` at once (reading pauses while all slots
// are taken), so a long foreground `bash` never blocks a `bash_output` on
// the next line. Every output line is written whole under one mutex. End of
// input ends the reading and waits for the calls in flight to answer (each
// bounded by its own timeout); `stop()`, or a client that stopped reading
// (`write_timeout`), ends the reading and aborts the calls in flight.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <unistd.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/executor.hpp"
#include "bashexec/server/call_runner.hpp"
#include "bashexec/server/line_transport.hpp"
#include "bashexec/server/options.hpp"
#include "bashexec/server/request_handler.hpp"
#include "bashexec/server/session_logs.hpp"
#include "bashexec/tools/bash_tools.hpp"

namespace bashexec::server {

template <executor Executor>
class json_lines_server : public line_transport {
 public:
  /// Serves `executor`'s tools on `in_fd` / `out_fd` (not owned; left
  /// open). Construct it, then call `serve` (it blocks); `stop` from any
  /// other thread ends it. The executor must outlive this object.
  json_lines_server(Executor& executor, server_options options = {}, int in_fd = STDIN_FILENO,
                    int out_fd = STDOUT_FILENO)
      : line_transport(in_fd, out_fd, options.max_in_flight, json_lines_fallback_line, options.write_timeout),
        approvals_([this](const nlohmann::json& line) { out_.emit(line); }, options.max_in_flight),
        logs_(std::move(options.session_dir)),
        tools_(executor,
               [this](const std::optional<owner_token>& owner, const std::string& notice) {
                 out_.emit({{"notice", notice}, {"session", session_json(owner)}});
               },
               options.carry),
        handler_(tools_, logs_, approvals_, options.approve, std::move(options.workdir), options.limits,
                 [this](const approval_request& request, std::stop_token) {
                   return pool_.without_slot([&] { return approvals_.ask(request); });
                 }) {}

  ~json_lines_server() { finish(); }

  /// Serves until end of input or `stop()`. Then, as the protocol promises,
  /// no more lines are read and pending approvals are cancelled (nobody is
  /// left to answer them). At end of input the calls in flight run on, each
  /// to its end or its own timeout, and are answered (`serve < requests`
  /// loses nothing); after `stop()`, or once stdout stopped taking answers
  /// (`write_timeout`), they are stopped the way an abort stops them. It
  /// returns once every call has answered or stdout is gone. Killing the
  /// background tasks is the executor's disposal, after this object is gone.
  void serve() {
    const std::size_t max_line_bytes = handler_.limits().max_line_bytes;
    const bool input_ended = read_lines(
        max_line_bytes,
        [&](const std::string& line) {
          out_.emit(response(recover_id(line),
                             fmt::format("request line longer than {} bytes; ignored", max_line_bytes), true));
        },
        [this](const std::string& line) { return handle_line(line); });
    if (input_ended) {
      approvals_.close();
      pool_.wait_idle();  // or `stop()`, or stdout gone
    }
    finish();
  }

  /// Stops reading and aborts the calls in flight; `serve` then returns.
  /// Safe from any thread (a signal-watching thread, say).
  void stop() noexcept {
    stop_transport();
    approvals_.close();
  }

 private:
  /// One non-blank request line; false when the server stops reading.
  bool handle_line(const std::string& line) {
    auto dispatched = handler_.dispatch(line);
    if (auto* now = std::get_if<nlohmann::json>(&dispatched)) {
      out_.emit(*now);
      return true;
    }
    auto& call = std::get<tool_call>(dispatched);
    if (!pool_.acquire()) {
      out_.emit(response(call.id, "the server is shutting down; the call did not run", true));
      return false;
    }
    std::shared_ptr<tool_call> shared_call;
    try {
      shared_call = std::make_shared<tool_call>(std::move(call));
    } catch (...) {
      pool_.release();
      out_.emit(response(nullptr, "internal error: out of memory; the call did not run", true));
      return true;
    }
    pool_.launch([this, shared_call] { out_.emit(handler_.run(*shared_call, pool_.stop_token())); },
                 [this, shared_call](std::string_view reason) { out_.emit(response(shared_call->id, reason, true)); });
    return true;
  }

  void finish() {
    stop();
    pool_.join();
  }

  approval_desk approvals_;
  session_logs logs_;
  // Unsubscribes from the executor before the members above go away.
  bash_tools<Executor> tools_;
  request_handler<Executor> handler_;
};

/// Serves `executor`'s tools as JSON lines from `in_fd` to `out_fd` until
/// end of input; returns false when some response could not be written.
template <executor Executor>
bool serve_json_lines(Executor& executor, server_options options = {}, int in_fd = STDIN_FILENO,
                      int out_fd = STDOUT_FILENO) {
  json_lines_server<Executor> server(executor, std::move(options), in_fd, out_fd);
  server.serve();
  return !server.output_lost();
}

}  // namespace bashexec::server

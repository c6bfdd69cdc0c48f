// tools/result_json: run results, task snapshots and sandbox facts as JSON
// objects (nlohmann-json), for harnesses and the CLI's `--json` output.
// Text fields are made valid UTF-8 first, so dumping never throws.
#pragma once

#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "bashexec/result.hpp"
#include "bashexec/signal_name.hpp"
#include "bashexec/tools/utf8.hpp"

namespace bashexec {

namespace detail {

template <class T>
nlohmann::json or_null(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

inline nlohmann::json path_or_null(const std::optional<std::filesystem::path>& path) {
  return path ? nlohmann::json(to_valid_utf8(path->string())) : nlohmann::json(nullptr);
}

inline nlohmann::json signal_json(const std::optional<int>& signo) {
  return signo ? nlohmann::json(signal_name(*signo)) : nlohmann::json(nullptr);
}

}  // namespace detail

/// A truncated stream's text is a tail that may start inside a character:
/// it gets the same repair as the result text (`render_output_body`), so both
/// start at the next character boundary rather than with a U+FFFD.
inline nlohmann::json to_json(const collected_output& stream) {
  return {{"text", to_valid_utf8(stream.text, stream.truncated)},
          {"truncated", stream.truncated},
          {"spill_path", detail::path_or_null(stream.spill_path)}};
}

inline nlohmann::json to_json(const sandbox_info& info) {
  return {{"mode", std::string(to_string(info.mode))},
          {"denied", info.denied},
          {"enforcement", info.level ? nlohmann::json(std::string(to_string(*info.level))) : nlohmann::json(nullptr)},
          {"runner_failed", info.runner_failed},
          {"backend", info.backend.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::string(info.backend))}};
}

/// The network report of an allowlist run: every attempt, in order.
inline nlohmann::json to_json(const network_report& report) {
  nlohmann::json attempts = nlohmann::json::array();
  for (const network_attempt& attempt : report.attempts)
    attempts.push_back({{"host", to_valid_utf8(attempt.host)},
                        {"port", attempt.port},
                        {"method", to_valid_utf8(attempt.method)},
                        {"decision", std::string(to_string(attempt.decision))},
                        {"reason", attempt.reason == network_block_reason::none
                                       ? nlohmann::json(nullptr)
                                       : nlohmann::json(std::string(to_string(attempt.reason)))},
                        {"address", attempt.address.empty() ? nlohmann::json(nullptr) : nlohmann::json(attempt.address)},
                        {"bytes_up", attempt.bytes_up},
                        {"bytes_down", attempt.bytes_down}});
  return {{"attempts", std::move(attempts)}, {"attempts_dropped", report.attempts_dropped}};
}

inline nlohmann::json network_json(const std::optional<network_report>& report) {
  return report ? to_json(*report) : nlohmann::json(nullptr);
}

inline nlohmann::json to_json(const run_result& result) {
  return {{"exit_code", detail::or_null(result.exit_code)},
          {"signal", detail::or_null(result.signal)},
          {"signal_name", detail::signal_json(result.signal)},
          {"timed_out", result.timed_out},
          {"aborted", result.aborted},
          {"leftovers_killed", result.leftovers_killed},
          {"timeout_ms", result.timeout.count()},
          {"stdout", to_json(result.out)},
          {"stderr", to_json(result.err)},
          {"sandbox", result.sandbox ? to_json(*result.sandbox) : nlohmann::json(nullptr)},
          {"network", network_json(result.network)}};
}

inline nlohmann::json to_json(const task_snapshot& task) {
  return {{"id", task.id.value()},
          {"command", to_valid_utf8(task.command)},
          {"status", std::string(to_string(task.status))},
          {"exit_code", detail::or_null(task.exit_code)},
          {"signal", detail::or_null(task.signal)},
          {"signal_name", detail::signal_json(task.signal)},
          {"sandbox", task.sandbox ? to_json(*task.sandbox) : nlohmann::json(nullptr)},
          {"network", network_json(task.network)}};
}

/// The facts of a foreground `bash` call a client can act on without parsing
/// the result text (the MCP server's `structuredContent`): exit code, signal,
/// timeout, abort, sandbox denial and the mode the command ran under.
inline nlohmann::json tool_facts(const run_result& result) {
  return {{"exit_code", detail::or_null(result.exit_code)},
          {"signal", detail::signal_json(result.signal)},
          {"timed_out", result.timed_out},
          {"aborted", result.aborted},
          {"denied", result.sandbox && result.sandbox->denied},
          {"mode", result.sandbox ? nlohmann::json(std::string(to_string(result.sandbox->mode)))
                                  : nlohmann::json(nullptr)},
          {"stdout_truncated", result.out.truncated},
          {"stderr_truncated", result.err.truncated}};
}

/// The facts of a background task: id, status, exit code, signal, denial.
inline nlohmann::json tool_facts(const task_snapshot& task) {
  return {{"task_id", to_valid_utf8(task.id.value())},
          {"status", std::string(to_string(task.status))},
          {"exit_code", detail::or_null(task.exit_code)},
          {"signal", detail::signal_json(task.signal)},
          {"denied", task.sandbox && task.sandbox->denied}};
}

}  // namespace bashexec

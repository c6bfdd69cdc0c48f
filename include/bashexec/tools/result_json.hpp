// tools/result_json: run results, task snapshots and sandbox facts as JSON
// objects (nlohmann-json), for harnesses and the CLI's `--json` output.
// Text fields are made valid UTF-8 first, so dumping never throws.
#pragma once

#include <chrono>
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

/// An input wait (terminal.hpp): the prompt, the blocked process and call,
/// raw mode, and since when (milliseconds since the Unix epoch).
inline nlohmann::json to_json(const input_wait& wait) {
  return {{"prompt", to_valid_utf8(wait.prompt)},
          {"pid", wait.pid},
          {"call", wait.call},
          {"raw", wait.raw},
          {"since_ms", std::chrono::duration_cast<std::chrono::milliseconds>(wait.since.time_since_epoch()).count()}};
}

namespace detail {
inline nlohmann::json input_wait_json(const std::optional<input_wait>& wait) {
  return wait ? to_json(*wait) : nlohmann::json(nullptr);
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
          {"network", network_json(result.network)},
          {"terminal", result.terminal},
          {"continued_as", result.continued_as ? nlohmann::json(result.continued_as->value()) : nlohmann::json(nullptr)},
          {"input_wait", detail::input_wait_json(result.input_wait)}};
}

inline nlohmann::json to_json(const task_snapshot& task) {
  return {{"id", task.id.value()},
          {"command", to_valid_utf8(task.command)},
          {"status", std::string(to_string(task.status))},
          {"exit_code", detail::or_null(task.exit_code)},
          {"signal", detail::or_null(task.signal)},
          {"signal_name", detail::signal_json(task.signal)},
          {"sandbox", task.sandbox ? to_json(*task.sandbox) : nlohmann::json(nullptr)},
          {"network", network_json(task.network)},
          {"terminal", task.terminal},
          {"input_open", task.input_open},
          {"input_wait", detail::input_wait_json(task.input_wait)}};
}

/// The facts of a tool call a client can act on without parsing the result
/// text (the MCP server's `structuredContent`, declared by
/// `tool_facts_schema()`): one flat object for all three tools, every key
/// always present, null (or false) where it does not apply. The values mean
/// what `run --json` means by them (to_json above): `signal` is the number
/// and `signal_name` its name; `mode`, `enforcement`, `backend`, `denied`
/// and `runner_failed` are the sandbox's; the spill paths name the
/// full-stream files. Foreground `bash` fills the exit facts; a background
/// start, `bash_output` and `bash_kill` fill `task_id` and `status` (and
/// what the task knows so far), `bash_output` its `lossy`, `bash_kill` its
/// `killed`.
inline nlohmann::json tool_facts() {
  return {{"exit_code", nullptr},       {"signal", nullptr},         {"signal_name", nullptr},
          {"timed_out", false},         {"aborted", false},          {"leftovers_killed", false},
          {"mode", nullptr},            {"enforcement", nullptr},    {"backend", nullptr},
          {"denied", false},            {"runner_failed", false},    {"stdout_truncated", false},
          {"stderr_truncated", false},  {"stdout_spill_path", nullptr}, {"stderr_spill_path", nullptr},
          {"network", nullptr},         {"task_id", nullptr},        {"status", nullptr},
          {"lossy", nullptr},           {"killed", nullptr},         {"terminal", false},
          {"input_wait", nullptr},      {"input_written", nullptr}};
}

namespace detail {

inline void add_exit_facts(nlohmann::json& facts, const std::optional<int>& exit_code, const std::optional<int>& signal,
                           const std::optional<sandbox_info>& sandbox, const std::optional<network_report>& network) {
  facts["exit_code"] = or_null(exit_code);
  facts["signal"] = or_null(signal);
  facts["signal_name"] = signal_json(signal);
  if (sandbox) {
    const nlohmann::json info = to_json(*sandbox);
    for (const char* key : {"mode", "enforcement", "backend", "denied", "runner_failed"}) facts[key] = info[key];
  }
  facts["network"] = network_json(network);
}

}  // namespace detail

/// A foreground `bash` call's facts.
inline nlohmann::json tool_facts(const run_result& result) {
  nlohmann::json facts = tool_facts();
  detail::add_exit_facts(facts, result.exit_code, result.signal, result.sandbox, result.network);
  facts["timed_out"] = result.timed_out;
  facts["aborted"] = result.aborted;
  facts["leftovers_killed"] = result.leftovers_killed;
  facts["stdout_truncated"] = result.out.truncated;
  facts["stderr_truncated"] = result.err.truncated;
  facts["stdout_spill_path"] = detail::path_or_null(result.out.spill_path);
  facts["stderr_spill_path"] = detail::path_or_null(result.err.spill_path);
  facts["terminal"] = result.terminal;
  if (result.continued_as) {
    facts["task_id"] = to_valid_utf8(result.continued_as->value());
    facts["status"] = "running";
    facts["input_wait"] = detail::input_wait_json(result.input_wait);
  }
  return facts;
}

/// A background task's facts as its snapshot has them.
inline nlohmann::json tool_facts(const task_snapshot& task) {
  nlohmann::json facts = tool_facts();
  detail::add_exit_facts(facts, task.exit_code, task.signal, task.sandbox, task.network);
  facts["task_id"] = to_valid_utf8(task.id.value());
  facts["status"] = std::string(to_string(task.status));
  facts["terminal"] = task.terminal;
  facts["input_wait"] = detail::input_wait_json(task.input_wait);
  return facts;
}

/// A `bash_output` read's facts: the task's, its spill paths and `lossy`.
inline nlohmann::json tool_facts(const task_read& read) {
  nlohmann::json facts = tool_facts(read.task);
  facts["lossy"] = read.lossy;
  facts["stdout_spill_path"] = detail::path_or_null(read.stdout_spill_path);
  facts["stderr_spill_path"] = detail::path_or_null(read.stderr_spill_path);
  return facts;
}

/// The JSON Schema (2020-12 subset every MCP client validates) of
/// `tool_facts`: the MCP server's `outputSchema` for each tool.
inline nlohmann::json tool_facts_schema() {
  const auto nullable = [](const char* type, const char* description) {
    return nlohmann::json{{"type", {type, "null"}}, {"description", description}};
  };
  const auto flag = [](const char* description) {
    return nlohmann::json{{"type", "boolean"}, {"description", description}};
  };
  nlohmann::json properties = {
      {"exit_code", nullable("integer", "the shell's exit code; null when it was killed by a signal or has not ended")},
      {"signal", nullable("integer", "the signal number that ended the shell")},
      {"signal_name", nullable("string", "that signal's name, e.g. SIGKILL")},
      {"timed_out", flag("the call's timeout stopped the command")},
      {"aborted", flag("the call was cancelled and the command stopped")},
      {"leftovers_killed", flag("processes the shell left behind were killed after it exited")},
      {"mode", nullable("string", "the sandbox mode the command ran under")},
      {"enforcement", nullable("string", "how much of the mode the backend enforced")},
      {"backend", nullable("string", "the confinement backend: bwrap, landlock or runner_command")},
      {"denied", flag("the sandbox denied a file access the command tried")},
      {"runner_failed", flag("the sandbox runner itself failed")},
      {"stdout_truncated", flag("stdout was cut to the output cap; the whole stream is in stdout_spill_path")},
      {"stderr_truncated", flag("stderr was cut to the output cap; the whole stream is in stderr_spill_path")},
      {"stdout_spill_path", nullable("string", "the file holding the full stdout")},
      {"stderr_spill_path", nullable("string", "the file holding the full stderr")},
      {"network", nullable("object", "under network allowlist: every connection attempt, in order")},
      {"task_id", nullable("string", "the background task's id")},
      {"status", nullable("string", "the background task's status: running, completed, killed, forgotten")},
      {"lossy", nullable("boolean", "bash_output: output was lost between reads")},
      {"killed", nullable("boolean", "bash_kill: this call killed the task")},
      {"terminal", flag("the command runs on a terminal of its own (stderr merged into stdout)")},
      {"input_wait", nullable("object", "the task waits for input: its prompt, the blocked process (pid) and call, "
                                        "raw (a key, not a line), since_ms")},
      {"input_written", nullable("integer", "bash_input: how many bytes of the input the task took")}};
  nlohmann::json required = nlohmann::json::array();
  for (const auto& [key, value] : properties.items()) required.push_back(key);
  return {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)}};
}

}  // namespace bashexec

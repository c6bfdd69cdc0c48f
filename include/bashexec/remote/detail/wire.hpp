// remote/detail/wire: the executor protocol's JSON codec (docs/remote.md,
// "The wire"), shared by the server (server/executor_api.hpp) and the client
// (remote_executor.hpp) so both directions are written once.
//
// Every byte string the executor does not interpret — a command, stdin,
// environment entries, output, paths, owner tokens — travels base64-encoded:
// JSON text must be valid UTF-8, and a command's bytes must arrive exactly,
// invalid UTF-8 and NULs included (MCP text content repairs them for a
// model, which is why this protocol exists beside MCP). Base64 is Beast's
// (boost/beast/core/detail/base64.hpp, in Debian's libboost 1.74): no
// encoder is written here.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/core/detail/base64.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/containment.hpp"
#include "bashexec/ids.hpp"
#include "bashexec/network_policy.hpp"
#include "bashexec/request.hpp"
#include "bashexec/result.hpp"
#include "bashexec/sandbox_mode.hpp"
#include "bashexec/shell_state.hpp"

namespace bashexec::remote::wire {

/// The protocol's version, checked at `open`: a client and a server of
/// different versions refuse each other with a message saying so.
inline constexpr int protocol_version = 1;

/// A malformed message of the peer's: the field it concerns is named.
class protocol_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline std::string encode_bytes(std::string_view bytes) {
  namespace b64 = boost::beast::detail::base64;
  std::string out(b64::encoded_size(bytes.size()), '\0');
  out.resize(b64::encode(out.data(), bytes.data(), bytes.size()));
  return out;
}

inline std::string decode_bytes(std::string_view text, std::string_view field) {
  namespace b64 = boost::beast::detail::base64;
  std::string out(b64::decoded_size(text.size()), '\0');
  const auto [written, read] = b64::decode(out.data(), text.data(), text.size());
  // Beast stops at the padding: what follows must be that and nothing else.
  const std::string_view padding = text.substr(read);
  if (text.size() % 4 != 0 || padding.size() > 2 || padding.find_first_not_of('=') != std::string_view::npos)
    throw protocol_error(std::string(field) + ": not base64");
  out.resize(written);
  return out;
}

// ---- reading a message ------------------------------------------------------

inline const nlohmann::json& member(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) throw protocol_error(std::string(key) + ": the enclosing value is not an object");
  const auto it = object.find(key);
  if (it == object.end()) throw protocol_error(std::string(key) + ": missing");
  return *it;
}

inline bool has(const nlohmann::json& object, std::string_view key) {
  const auto it = object.find(key);
  return it != object.end() && !it->is_null();
}

inline std::string text_of(const nlohmann::json& object, std::string_view key) {
  const auto& value = member(object, key);
  if (!value.is_string()) throw protocol_error(std::string(key) + ": not a string");
  return value.get<std::string>();
}

inline std::string bytes_of(const nlohmann::json& object, std::string_view key) {
  return decode_bytes(text_of(object, key), key);
}

inline std::optional<std::string> optional_bytes_of(const nlohmann::json& object, std::string_view key) {
  if (!has(object, key)) return std::nullopt;
  return bytes_of(object, key);
}

inline bool flag_of(const nlohmann::json& object, std::string_view key) {
  const auto& value = member(object, key);
  if (!value.is_boolean()) throw protocol_error(std::string(key) + ": not a boolean");
  return value.get<bool>();
}

template <class Integer>
Integer number_of(const nlohmann::json& object, std::string_view key) {
  const auto& value = member(object, key);
  if (!value.is_number_integer()) throw protocol_error(std::string(key) + ": not an integer");
  return value.get<Integer>();
}

template <class Integer>
std::optional<Integer> optional_number_of(const nlohmann::json& object, std::string_view key) {
  if (!has(object, key)) return std::nullopt;
  return number_of<Integer>(object, key);
}

template <class Enum>
Enum enum_of(const nlohmann::json& object, std::string_view key) {
  const std::string text = text_of(object, key);
  if (auto value = bashexec::detail::value_named(bashexec::detail::enum_names<Enum>::table, text)) return *value;
  throw protocol_error(std::string(key) + ": unknown value \"" + text + "\"");
}

template <class Json>
Json bytes_or_null(const std::optional<std::string>& bytes) {
  return bytes ? Json(encode_bytes(*bytes)) : Json(nullptr);
}

inline nlohmann::json path_or_null(const std::optional<std::filesystem::path>& path) {
  return path ? nlohmann::json(encode_bytes(path->native())) : nlohmann::json(nullptr);
}

inline std::optional<std::filesystem::path> optional_path_of(const nlohmann::json& object, std::string_view key) {
  auto bytes = optional_bytes_of(object, key);
  if (!bytes) return std::nullopt;
  return std::filesystem::path(std::move(*bytes));
}

inline nlohmann::json encoded_names(const std::vector<std::string>& names) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& name : names) list.push_back(encode_bytes(name));
  return list;
}

inline std::vector<std::string> names_of(const nlohmann::json& object, std::string_view key) {
  std::vector<std::string> names;
  if (!has(object, key)) return names;
  const auto& list = member(object, key);
  if (!list.is_array()) throw protocol_error(fmt::format("{}: not an array", key));
  for (const auto& name : list) {
    if (!name.is_string()) throw protocol_error(fmt::format("{}: not a string", key));
    names.push_back(decode_bytes(name.get<std::string>(), key));
  }
  return names;
}

inline nlohmann::json encoded_env(const std::map<std::string, std::string>& env) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [name, value] : env) list.push_back({encode_bytes(name), encode_bytes(value)});
  return list;
}

inline std::map<std::string, std::string> env_of(const nlohmann::json& list, std::string_view key) {
  std::map<std::string, std::string> env;
  if (!list.is_array()) throw protocol_error(fmt::format("{}: not an array", key));
  for (const auto& entry : list) {
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_string())
      throw protocol_error(fmt::format("{}: each entry is [name, value]", key));
    env[decode_bytes(entry[0].get<std::string>(), key)] = decode_bytes(entry[1].get<std::string>(), key);
  }
  return env;
}

// ---- requests ---------------------------------------------------------------

/// A request as the caller gave it: everything but the stop token and the
/// progress counters, which stay on the caller's side.
template <template <class> class Field>
nlohmann::json to_wire(const basic_exec_request<Field>& request) {
  auto optional_ms = [](const auto& value) -> nlohmann::json {
    if constexpr (requires { value.has_value(); })
      return value ? nlohmann::json(value->count()) : nlohmann::json(nullptr);
    else
      return value.count();
  };
  nlohmann::json message{{"command", encode_bytes(request.command)}, {"timeout_ms", optional_ms(request.timeout)}};
  if constexpr (requires { request.workdir.has_value(); }) {
    message["workdir"] = path_or_null(request.workdir);
    message["stdout_max_bytes"] = request.stdout_max_bytes ? nlohmann::json(*request.stdout_max_bytes) : nullptr;
  } else {
    message["workdir"] = encode_bytes(request.workdir.native());
    message["stdout_max_bytes"] = request.stdout_max_bytes;
  }
  message["stdin"] = bytes_or_null<nlohmann::json>(request.stdin_data);
  message["env"] = request.env ? encoded_env(*request.env) : nlohmann::json(nullptr);
  message["owner"] = request.owner ? nlohmann::json(encode_bytes(request.owner->value())) : nullptr;
  message["mode"] = request.mode ? nlohmann::json(std::string(to_string(*request.mode))) : nullptr;
  nlohmann::json grants = nlohmann::json::array();
  for (const auto& grant : request.network_grants) grants.push_back(encode_bytes(grant));
  message["network_grants"] = std::move(grants);
  // A carried state (tools/carried_state.hpp): the names it unset, and
  // whether the shell's final state comes back.
  message["env_unset"] = encoded_names(request.env_unset);
  message["capture_state"] = request.capture_state;
  return message;
}

/// The request a message carries. A request that was resolved on the other
/// side comes back with every field set; `resolve` on this side then checks
/// it again like any request.
inline exec_request request_from_wire(const nlohmann::json& message) {
  exec_request request;
  request.command = bytes_of(message, "command");
  if (auto ms = optional_number_of<std::int64_t>(message, "timeout_ms")) request.timeout = std::chrono::milliseconds(*ms);
  request.workdir = optional_path_of(message, "workdir");
  if (has(message, "stdout_max_bytes")) {
    const auto& cap = member(message, "stdout_max_bytes");
    if (!cap.is_number_integer()) throw protocol_error("stdout_max_bytes: not an integer");
    // A negative cap is the caller's error, kept so that resolve names it.
    request.stdout_max_bytes = cap.is_number_unsigned() ? cap.get<std::size_t>() : std::size_t{0};
  }
  request.stdin_data = optional_bytes_of(message, "stdin");
  if (has(message, "env")) request.env = env_of(member(message, "env"), "env");
  if (auto owner = optional_bytes_of(message, "owner")) request.owner = owner_token(std::move(*owner));
  if (has(message, "mode")) request.mode = enum_of<sandbox_mode>(message, "mode");
  if (has(message, "network_grants"))
    for (const auto& grant : member(message, "network_grants")) {
      if (!grant.is_string()) throw protocol_error("network_grants: not a string");
      request.network_grants.push_back(decode_bytes(grant.get<std::string>(), "network_grants"));
    }
  request.env_unset = names_of(message, "env_unset");
  if (has(message, "capture_state")) request.capture_state = flag_of(message, "capture_state");
  return request;
}

/// A resolved request as the server resolved it: the same fields, each set.
inline exec_spec spec_from_wire(const nlohmann::json& message) {
  exec_request request = request_from_wire(message);
  exec_spec spec;
  spec.command = std::move(request.command);
  if (!request.workdir || !request.timeout || !request.stdout_max_bytes)
    throw protocol_error("spec: workdir, timeout_ms and stdout_max_bytes are required in a resolved request");
  spec.workdir = std::move(*request.workdir);
  spec.timeout = *request.timeout;
  spec.stdout_max_bytes = *request.stdout_max_bytes;
  spec.stdin_data = std::move(request.stdin_data);
  spec.env = std::move(request.env);
  spec.owner = std::move(request.owner);
  spec.mode = request.mode;
  spec.network_grants = std::move(request.network_grants);
  spec.env_unset = std::move(request.env_unset);
  spec.capture_state = request.capture_state;
  return spec;
}

// ---- results ----------------------------------------------------------------

/// A backend's name is a static string on the executor's side (a
/// string_view in sandbox_info); a received one is kept once, for the
/// program's life, so the view stays valid. The names are a handful.
inline std::string_view interned_backend(std::string name) {
  static std::mutex mutex;
  static std::set<std::string, std::less<>> names;
  const std::lock_guard lock(mutex);
  return *names.insert(std::move(name)).first;
}

inline nlohmann::json to_wire(const collected_output& stream) {
  return {{"text", encode_bytes(stream.text)},
          {"truncated", stream.truncated},
          {"spill_path", path_or_null(stream.spill_path)}};
}

inline collected_output output_from_wire(const nlohmann::json& message) {
  return {bytes_of(message, "text"), flag_of(message, "truncated"), optional_path_of(message, "spill_path")};
}

inline nlohmann::json to_wire(const std::optional<sandbox_info>& info) {
  if (!info) return nullptr;
  return {{"mode", std::string(to_string(info->mode))},
          {"denied", info->denied},
          {"enforcement", info->level ? nlohmann::json(std::string(to_string(*info->level))) : nullptr},
          {"runner_failed", info->runner_failed},
          {"backend", std::string(info->backend)}};
}

inline std::optional<sandbox_info> sandbox_from_wire(const nlohmann::json& message) {
  if (message.is_null()) return std::nullopt;
  sandbox_info info;
  info.mode = enum_of<sandbox_mode>(message, "mode");
  info.denied = flag_of(message, "denied");
  if (has(message, "enforcement")) info.level = enum_of<enforcement>(message, "enforcement");
  info.runner_failed = flag_of(message, "runner_failed");
  const std::string backend = text_of(message, "backend");
  if (!backend.empty()) info.backend = interned_backend(backend);
  return info;
}

inline nlohmann::json to_wire(const std::optional<network_report>& report) {
  if (!report) return nullptr;
  nlohmann::json attempts = nlohmann::json::array();
  for (const network_attempt& attempt : report->attempts)
    attempts.push_back({{"host", encode_bytes(attempt.host)},
                        {"port", attempt.port},
                        {"method", encode_bytes(attempt.method)},
                        {"decision", std::string(to_string(attempt.decision))},
                        {"reason", std::string(to_string(attempt.reason))},
                        {"address", encode_bytes(attempt.address)},
                        {"bytes_up", attempt.bytes_up},
                        {"bytes_down", attempt.bytes_down}});
  return {{"attempts", std::move(attempts)}, {"attempts_dropped", report->attempts_dropped}};
}

inline std::optional<network_report> network_from_wire(const nlohmann::json& message) {
  if (message.is_null()) return std::nullopt;
  network_report report;
  for (const auto& entry : member(message, "attempts")) {
    network_attempt attempt;
    attempt.host = bytes_of(entry, "host");
    attempt.port = number_of<std::uint16_t>(entry, "port");
    attempt.method = bytes_of(entry, "method");
    attempt.decision = enum_of<network_decision>(entry, "decision");
    attempt.reason = enum_of<network_block_reason>(entry, "reason");
    attempt.address = bytes_of(entry, "address");
    attempt.bytes_up = number_of<std::uint64_t>(entry, "bytes_up");
    attempt.bytes_down = number_of<std::uint64_t>(entry, "bytes_down");
    report.attempts.push_back(std::move(attempt));
  }
  report.attempts_dropped = number_of<std::size_t>(message, "attempts_dropped");
  return report;
}

inline nlohmann::json to_wire(const std::optional<shell_state>& state) {
  if (!state) return nullptr;
  return {{"cwd", encode_bytes(state->cwd.native())}, {"env", encoded_env(state->env)},
          {"unset", encoded_names(state->unset)}};
}

inline std::optional<shell_state> shell_state_from_wire(const nlohmann::json& message) {
  if (message.is_null()) return std::nullopt;
  shell_state state;
  state.cwd = bytes_of(message, "cwd");
  state.env = env_of(member(message, "env"), "final_state.env");
  state.unset = names_of(message, "unset");
  return state;
}

inline nlohmann::json to_wire(const run_result& result) {
  return {{"exit_code", result.exit_code ? nlohmann::json(*result.exit_code) : nullptr},
          {"signal", result.signal ? nlohmann::json(*result.signal) : nullptr},
          {"timed_out", result.timed_out},
          {"aborted", result.aborted},
          {"leftovers_killed", result.leftovers_killed},
          {"timeout_ms", result.timeout.count()},
          {"stdout", to_wire(result.out)},
          {"stderr", to_wire(result.err)},
          {"sandbox", to_wire(result.sandbox)},
          {"containment", std::string(to_string(result.containment))},
          {"network", to_wire(result.network)},
          {"final_state", to_wire(result.final_state)},
          {"state_notice", bytes_or_null<nlohmann::json>(result.state_notice)}};
}

inline run_result run_result_from_wire(const nlohmann::json& message) {
  run_result result;
  result.exit_code = optional_number_of<int>(message, "exit_code");
  result.signal = optional_number_of<int>(message, "signal");
  result.timed_out = flag_of(message, "timed_out");
  result.aborted = flag_of(message, "aborted");
  result.leftovers_killed = flag_of(message, "leftovers_killed");
  result.timeout = std::chrono::milliseconds(number_of<std::int64_t>(message, "timeout_ms"));
  result.out = output_from_wire(member(message, "stdout"));
  result.err = output_from_wire(member(message, "stderr"));
  result.sandbox = sandbox_from_wire(member(message, "sandbox"));
  result.containment = enum_of<containment_mechanism>(message, "containment");
  result.network = network_from_wire(member(message, "network"));
  // A server from before carried state sends neither: nothing was captured.
  if (has(message, "final_state")) result.final_state = shell_state_from_wire(member(message, "final_state"));
  result.state_notice = optional_bytes_of(message, "state_notice");
  return result;
}

/// A snapshot with the id the peer knows it by (the server's own; the
/// client maps it to its own numbering).
inline nlohmann::json to_wire(const task_snapshot& task) {
  return {{"id", task.id.value()},
          {"command", encode_bytes(task.command)},
          {"status", std::string(to_string(task.status))},
          {"exit_code", task.exit_code ? nlohmann::json(*task.exit_code) : nullptr},
          {"signal", task.signal ? nlohmann::json(*task.signal) : nullptr},
          {"sandbox", to_wire(task.sandbox)},
          {"containment", std::string(to_string(task.containment))},
          {"owner", task.owner ? nlohmann::json(encode_bytes(task.owner->value())) : nullptr},
          {"start_error", bytes_or_null<nlohmann::json>(task.start_error)},
          {"network", to_wire(task.network)}};
}

inline task_snapshot snapshot_from_wire(const nlohmann::json& message) {
  task_snapshot task;
  task.id = task_id(text_of(message, "id"));
  task.command = bytes_of(message, "command");
  task.status = enum_of<task_status>(message, "status");
  task.exit_code = optional_number_of<int>(message, "exit_code");
  task.signal = optional_number_of<int>(message, "signal");
  task.sandbox = sandbox_from_wire(member(message, "sandbox"));
  task.containment = enum_of<containment_mechanism>(message, "containment");
  if (auto owner = optional_bytes_of(message, "owner")) task.owner = owner_token(std::move(*owner));
  task.start_error = optional_bytes_of(message, "start_error");
  task.network = network_from_wire(member(message, "network"));
  return task;
}

inline nlohmann::json to_wire(const task_read& read) {
  return {{"task", to_wire(read.task)},
          {"delta", encode_bytes(read.delta)},
          {"lossy", read.lossy},
          {"stdout_spill_path", path_or_null(read.stdout_spill_path)},
          {"stderr_spill_path", path_or_null(read.stderr_spill_path)}};
}

inline task_read read_from_wire(const nlohmann::json& message) {
  task_read read;
  read.task = snapshot_from_wire(member(message, "task"));
  read.delta = bytes_of(message, "delta");
  read.lossy = flag_of(message, "lossy");
  read.stdout_spill_path = optional_path_of(message, "stdout_spill_path");
  read.stderr_spill_path = optional_path_of(message, "stderr_spill_path");
  return read;
}

// ---- errors -----------------------------------------------------------------

/// The error kinds a reply names, each thrown again on the client as the
/// exception the executor threw on the server.
inline constexpr std::string_view invalid_argument_kind = "invalid_argument";
inline constexpr std::string_view infrastructure_kind = "infrastructure_error";
inline constexpr std::string_view sandbox_unavailable_kind = "sandbox_unavailable";
inline constexpr std::string_view unknown_task_kind = "unknown_task";
inline constexpr std::string_view unknown_session_kind = "unknown_session";
inline constexpr std::string_view protocol_kind = "protocol_error";
inline constexpr std::string_view busy_kind = "busy";

}  // namespace bashexec::remote::wire

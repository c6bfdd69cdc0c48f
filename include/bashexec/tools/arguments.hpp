// tools/arguments: reading the model's tool arguments (docs/contract.md
// items 18 and 21). Each reader takes the JSON object the model sent and
// either returns the field or throws `tool_args::argument_error` with the
// text the model is shown, naming the field. An explicit null counts as an
// absent field. Only the fields read here exist: `stdin`, `env` and any key
// the schemas do not name are never read.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/ids.hpp"
#include "bashexec/tools/utf8.hpp"

namespace bashexec::tool_args {

/// A tool argument the model got wrong; the tool call answers `message` as
/// an error result.
struct argument_error {
  std::string message;
};

/// `text` as a JSON string literal, valid UTF-8 whatever it holds.
inline std::string quoted(std::string_view text) { return nlohmann::json(to_valid_utf8(text)).dump(); }

inline void require_object(const nlohmann::json& args) {
  if (!args.is_object()) throw argument_error{"arguments must be a JSON object"};
}

/// The value of `field`, or null when absent (an explicit null is absent).
inline const nlohmann::json* find(const nlohmann::json& args, std::string_view field) {
  const auto it = args.find(field);
  if (it == args.end() || it->is_null()) return nullptr;
  return &*it;
}

inline std::optional<std::string> optional_string(const nlohmann::json& args, std::string_view field) {
  const auto* value = find(args, field);
  if (!value) return std::nullopt;
  if (!value->is_string()) throw argument_error{fmt::format("field \"{}\" must be a string", field)};
  return value->get<std::string>();
}

inline std::string required_string(const nlohmann::json& args, std::string_view field) {
  auto value = optional_string(args, field);
  if (!value) throw argument_error{fmt::format("missing required field \"{}\"", field)};
  return std::move(*value);
}

/// Commands and paths reach execve and chdir, which stop at a NUL byte.
inline void reject_nul(const std::string& text, std::string_view field) {
  if (text.find('\0') != std::string::npos)
    throw argument_error{fmt::format("field \"{}\" must not contain NUL characters", field)};
}

inline void reject_blank(const std::string& text, std::string_view field) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw argument_error{fmt::format("field \"{}\" must not be empty", field)};
}

/// `timeoutMs`: a positive whole number of milliseconds (a float with no
/// fraction counts).
inline std::optional<std::chrono::milliseconds> optional_timeout(const nlohmann::json& args) {
  const auto* value = find(args, "timeoutMs");
  if (!value) return std::nullopt;
  // Anything longer is clamped by the executor anyway; saturating keeps
  // its deadline arithmetic far from overflow.
  constexpr std::int64_t ceiling = std::int64_t{1} << 31;
  const argument_error bad{"field \"timeoutMs\" must be a positive integer (milliseconds)"};
  std::int64_t ms = 0;
  if (value->is_number_unsigned()) {
    const auto v = value->get<std::uint64_t>();
    ms = v > static_cast<std::uint64_t>(ceiling) ? ceiling : static_cast<std::int64_t>(v);
  } else if (value->is_number_integer()) {
    const auto v = value->get<std::int64_t>();
    ms = v > ceiling ? ceiling : v;
  } else if (value->is_number_float()) {
    const auto v = value->get<double>();
    if (!std::isfinite(v) || v != std::floor(v)) throw bad;
    ms = v > static_cast<double>(ceiling) ? ceiling : v < 0 ? -1 : static_cast<std::int64_t>(v);
  } else {
    throw bad;
  }
  if (ms <= 0) throw bad;
  return std::chrono::milliseconds(ms);
}

/// A boolean flag; absent is false.
inline bool optional_bool(const nlohmann::json& args, std::string_view field) {
  const auto* value = find(args, field);
  if (!value) return false;
  if (!value->is_boolean()) throw argument_error{fmt::format("field \"{}\" must be a boolean", field)};
  return value->get<bool>();
}

/// The `bash` tool's own fields (the escalation pair is tools/escalation.hpp's).
struct bash_arguments {
  std::string command;
  std::string description;
  std::optional<std::chrono::milliseconds> timeout;
  std::optional<std::string> workdir;
  bool background = false;
  /// On a terminal of its own (offered only over an executor that takes input).
  bool tty = false;
  /// Start from the session root and the host-derived environment, dropping
  /// the carried shell state (offered only where state is carried).
  bool reset = false;
};

inline bash_arguments read_bash(const nlohmann::json& args) {
  require_object(args);
  bash_arguments out;
  out.command = required_string(args, "command");
  reject_blank(out.command, "command");
  reject_nul(out.command, "command");
  out.description = required_string(args, "description");
  reject_blank(out.description, "description");
  out.timeout = optional_timeout(args);
  out.workdir = optional_string(args, "workdir");
  if (out.workdir) {
    reject_blank(*out.workdir, "workdir");
    reject_nul(*out.workdir, "workdir");
  }
  out.background = optional_bool(args, "run_in_background");
  out.tty = optional_bool(args, "tty");
  out.reset = optional_bool(args, "reset");
  return out;
}

/// The `task_id` of `bash_output` and `bash_kill`.
inline task_id read_task_id(const nlohmann::json& args) {
  require_object(args);
  std::string id = required_string(args, "task_id");
  reject_blank(id, "task_id");
  return task_id(std::move(id));
}

/// The `bash_input` tool's fields.
struct input_arguments {
  task_id id{std::string()};
  std::string input;
  std::chrono::milliseconds wait{10000};
};

inline input_arguments read_input(const nlohmann::json& args) {
  input_arguments out;
  out.id = read_task_id(args);
  out.input = required_string(args, "input");
  if (const auto* wait = find(args, "wait_ms")) {
    const argument_error bad{"field \"wait_ms\" must be an integer from 0 to 600000 (milliseconds)"};
    if (!wait->is_number_integer() && !wait->is_number_unsigned()) throw bad;
    const auto ms = wait->get<std::int64_t>();
    if (ms < 0 || ms > 600000) throw bad;
    out.wait = std::chrono::milliseconds(ms);
  }
  return out;
}

}  // namespace bashexec::tool_args

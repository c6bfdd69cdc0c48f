// session/session_events: the pure half of a session's log — the typed
// events, their JSON form, the replay fold over a log file's bytes and the
// sandbox-mode override, the network grants and the carried shell state
// folded from the events (docs/contract.md items 18 and 29; docs/network.md,
// docs/shell-state.md).
// No I/O here: session/session_log.hpp makes the events durable, and the
// fold's outcome (events, a torn tail to drop, a newline to restore) is what
// it applies to the file.
//
// Replay rules: a final line that does not parse (a write torn by a crash)
// is reported as a torn tail, never an error and never at the cost of an
// earlier event; a complete final line missing only its newline is kept and
// reported so the newline can be restored. Any other bad line — invalid JSON
// before the end, a missing "type", an unknown sandbox mode, nesting deeper
// than `session_log_max_depth` — throws `session_log_error` naming the log
// and the line number.
//
// Nesting is bounded because nlohmann-json copies, compares and dumps a
// value recursively: a line nested some ten thousand levels deep would
// overflow the stack, a crash instead of an error. The depth is measured
// without building the value.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/detail/text/domain_name.hpp"
#include "bashexec/sandbox_mode.hpp"

namespace bashexec {

/// The session's sandbox-mode override was set (the `sandbox-mode` event).
struct sandbox_mode_event {
  sandbox_mode mode = sandbox_mode::read_only;
  friend bool operator==(const sandbox_mode_event&, const sandbox_mode_event&) = default;
};

/// Names the session may reach besides the executor's allowed domains, from
/// an `allowed-for-session` answer to a network escalation (the
/// `network-grant` event). Canonical names or `*.` wildcards.
struct network_grant_event {
  std::vector<std::string> domains;
  friend bool operator==(const network_grant_event&, const network_grant_event&) = default;
};

/// The shell state the session's next call starts from (the `shell-state`
/// event; tools/carried_state.hpp): each event holds the whole state, so the
/// last one wins, and an empty one is the reset (the session root, the
/// host-derived environment). Every string is valid UTF-8. (On disk a log
/// stores what changed from the state before, where that is shorter:
/// `shell_state_line`; replay folds it back into whole states.)
struct shell_state_event {
  /// Absolute; empty: the session root.
  std::string cwd{};
  /// Exported variables that differ from the starting environment.
  std::map<std::string, std::string> env{};
  /// Names of the starting environment the shell no longer exported.
  std::vector<std::string> unset{};
  /// Loader and shell-startup variables of `env` and the sandbox mode of the
  /// call that set each: a wider call starts without them.
  std::map<std::string, sandbox_mode> set_under{};

  bool empty() const noexcept { return cwd.empty() && env.empty() && unset.empty(); }
  friend bool operator==(const shell_state_event&, const shell_state_event&) = default;
};

/// An event of a type bashexec does not interpret, kept verbatim: `body` is
/// the whole JSON object, `type` its "type" field.
struct opaque_event {
  std::string type;
  nlohmann::json body;
  friend bool operator==(const opaque_event&, const opaque_event&) = default;
};

using session_event = std::variant<sandbox_mode_event, network_grant_event, shell_state_event, opaque_event>;

/// A log file that cannot be read, replayed or appended to.
class session_log_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr std::string_view sandbox_mode_event_type = "sandbox-mode";
inline constexpr std::string_view network_grant_event_type = "network-grant";
inline constexpr std::string_view shell_state_event_type = "shell-state";

/// The deepest nesting of arrays and objects an event may have (the event
/// object itself is level 1).
inline constexpr std::size_t session_log_max_depth = 512;

namespace detail {

/// Builds the value of one JSON text as nlohmann's own DOM parser does, and
/// stops the (iterative) parser as soon as the nesting passes `limit`: one
/// pass where a depth probe and then a parse would lex each line twice.
class depth_bounded_dom_parser {
 public:
  using json = nlohmann::json;
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  depth_bounded_dom_parser(json& result, std::size_t limit) : dom_(result, false), limit_(limit) {}
  bool too_deep() const noexcept { return too_deep_; }
  bool failed() const noexcept { return failed_ || too_deep_; }

  bool null() { return dom_.null(); }
  bool boolean(bool value) { return dom_.boolean(value); }
  bool number_integer(number_integer_t value) { return dom_.number_integer(value); }
  bool number_unsigned(number_unsigned_t value) { return dom_.number_unsigned(value); }
  bool number_float(number_float_t value, const string_t& text) { return dom_.number_float(value, text); }
  bool string(string_t& value) { return dom_.string(value); }
  bool binary(binary_t& value) { return dom_.binary(value); }
  bool start_object(std::size_t size) { return enter() && dom_.start_object(size); }
  bool key(string_t& value) { return dom_.key(value); }
  bool end_object() { return leave() && dom_.end_object(); }
  bool start_array(std::size_t size) { return enter() && dom_.start_array(size); }
  bool end_array() { return leave() && dom_.end_array(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    failed_ = true;
    return false;
  }

 private:
  bool enter() {
    if (++depth_ <= limit_) return true;
    too_deep_ = true;
    return false;
  }
  bool leave() {
    --depth_;
    return true;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::size_t limit_;
  std::size_t depth_ = 0;
  bool too_deep_ = false;
  bool failed_ = false;
};

/// True when `value` nests deeper than `limit`; iterative, so any depth is
/// safe to measure.
inline bool json_value_too_deep(const nlohmann::json& value, std::size_t limit) {
  std::vector<std::pair<const nlohmann::json*, std::size_t>> pending{{&value, 1}};
  while (!pending.empty()) {
    const auto [node, depth] = pending.back();
    pending.pop_back();
    if (!node->is_structured()) continue;
    if (depth > limit) return true;
    for (const auto& child : *node) pending.emplace_back(&child, depth + 1);
  }
  return false;
}

/// An environment variable's name as a carried state may hold it: what
/// execve and `export` take (no `=`, no NUL, not empty).
inline bool carried_name_ok(std::string_view name) noexcept {
  return !name.empty() && name.find_first_of(std::string_view("=\0", 2)) == std::string_view::npos;
}

/// A `shell-state` line's state; throws std::invalid_argument naming the
/// field that is wrong. A line with `"changes": true` holds only what
/// changed from `before`, the session's state before it: "cwd" the new
/// directory (null: back to the session root), "env" the variables set or
/// changed, "drop" the names no longer exported, "unset" and "set_under"
/// replaced whole when present; an absent field is as before. Any other
/// line is the whole state.
inline shell_state_event shell_state_from_json(const nlohmann::json& line, const shell_state_event& before = {}) {
  const auto bad = [](std::string_view what) {
    return std::invalid_argument(fmt::format("shell-state event with {}", what));
  };
  const auto name_list = [&](const nlohmann::json& names, std::string_view field) {
    if (!names.is_array()) throw bad(fmt::format("an \"{}\" that is not an array", field));
    std::vector<std::string> list;
    for (const auto& name : names) {
      if (!name.is_string() || !carried_name_ok(name.get_ref<const std::string&>()))
        throw bad(fmt::format("an \"{}\" entry that is not a variable name", field));
      list.push_back(name.get<std::string>());
    }
    return list;
  };
  bool changes = false;
  if (const auto flag = line.find("changes"); flag != line.end()) {
    if (!flag->is_boolean()) throw bad("a \"changes\" that is not true or false");
    changes = flag->get<bool>();
  }
  shell_state_event state = changes ? before : shell_state_event{};
  if (const auto cwd = line.find("cwd"); cwd != line.end()) {
    if (changes && cwd->is_null()) {
      state.cwd.clear();
    } else {
      if (!cwd->is_string() || cwd->get_ref<const std::string&>().empty() ||
          cwd->get_ref<const std::string&>().front() != '/' ||
          cwd->get_ref<const std::string&>().find('\0') != std::string::npos)
        throw bad("a \"cwd\" that is not an absolute path");
      state.cwd = cwd->get<std::string>();
    }
  }
  if (const auto env = line.find("env"); env != line.end()) {
    if (!env->is_object()) throw bad("an \"env\" that is not an object");
    for (const auto& [name, value] : env->items()) {
      if (!carried_name_ok(name) || !value.is_string() ||
          value.get_ref<const std::string&>().find('\0') != std::string::npos)
        throw bad("an \"env\" entry that is not NAME: string");
      state.env.insert_or_assign(name, value.get<std::string>());
    }
  }
  if (const auto drop = line.find("drop"); drop != line.end()) {
    if (!changes) throw bad("a \"drop\" in a whole state (only a line of \"changes\" drops names)");
    for (const auto& name : name_list(*drop, "drop")) {
      state.env.erase(name);
      state.set_under.erase(name);
    }
  }
  if (const auto unset = line.find("unset"); unset != line.end()) state.unset = name_list(*unset, "unset");
  if (const auto modes = line.find("set_under"); modes != line.end()) {
    if (!modes->is_object()) throw bad("a \"set_under\" that is not an object");
    state.set_under.clear();
    for (const auto& [name, mode] : modes->items()) {
      const auto parsed = mode.is_string() ? parse_sandbox_mode(mode.get_ref<const std::string&>()) : std::nullopt;
      if (!parsed) throw bad("a \"set_under\" entry that is not a sandbox mode (read-only, workspace-write, danger-full-access)");
      state.set_under.emplace(name, *parsed);
    }
  }
  for (const auto& entry : state.set_under)
    if (!state.env.contains(entry.first)) throw bad("a \"set_under\" entry for a name \"env\" does not set");
  return state;
}

}  // namespace detail

namespace detail {
inline nlohmann::json set_under_json(const std::map<std::string, sandbox_mode>& set_under) {
  nlohmann::json modes = nlohmann::json::object();
  for (const auto& [name, mode] : set_under) modes[name] = to_string(mode);
  return modes;
}
}  // namespace detail

/// The JSON object one event is stored as.
inline nlohmann::json event_to_json(const session_event& event) {
  if (const auto* mode = std::get_if<sandbox_mode_event>(&event))
    return {{"type", sandbox_mode_event_type}, {"mode", to_string(mode->mode)}};
  if (const auto* grant = std::get_if<network_grant_event>(&event))
    return {{"type", network_grant_event_type}, {"domains", grant->domains}};
  if (const auto* state = std::get_if<shell_state_event>(&event)) {
    nlohmann::json object{{"type", shell_state_event_type}};
    if (!state->cwd.empty()) object["cwd"] = state->cwd;
    if (!state->env.empty()) object["env"] = state->env;
    if (!state->unset.empty()) object["unset"] = state->unset;
    if (!state->set_under.empty()) object["set_under"] = detail::set_under_json(state->set_under);
    return object;
  }
  const auto& opaque = std::get<opaque_event>(event);
  nlohmann::json body = opaque.body.is_object() ? opaque.body : nlohmann::json::object();
  body["type"] = opaque.type;
  return body;
}

/// The line a log stores for the state `next` after `before`: what changed
/// (`"changes": true`, read back by shell_state_from_json against the state
/// before it) when that is shorter than the whole state, as it is for a call
/// that changed a directory or a variable of many; the whole state
/// otherwise, and always for the reset.
inline nlohmann::json shell_state_line(const shell_state_event& before, const shell_state_event& next) {
  nlohmann::json whole = event_to_json(next);
  if (next.empty() || before.empty()) return whole;
  nlohmann::json changes{{"type", shell_state_event_type}, {"changes", true}};
  if (next.cwd != before.cwd) changes["cwd"] = next.cwd.empty() ? nlohmann::json(nullptr) : nlohmann::json(next.cwd);
  for (const auto& [name, value] : next.env)
    if (const auto was = before.env.find(name); was == before.env.end() || was->second != value)
      changes["env"][name] = value;
  for (const auto& entry : before.env)
    if (!next.env.contains(entry.first)) changes["drop"].push_back(entry.first);
  if (next.unset != before.unset) changes["unset"] = next.unset;
  if (next.set_under != before.set_under) changes["set_under"] = detail::set_under_json(next.set_under);
  return changes.dump().size() < whole.dump().size() ? changes : whole;
}

/// Reads one stored event, a `shell-state` line of changes against
/// `state_before` (the session's state before it); throws
/// std::invalid_argument saying what is wrong.
inline session_event event_from_json(const nlohmann::json& line, const shell_state_event& state_before);

/// Reads one stored event; throws std::invalid_argument saying what is wrong.
inline session_event event_from_json(const nlohmann::json& line) { return event_from_json(line, {}); }

inline session_event event_from_json(const nlohmann::json& line, const shell_state_event& state_before) {
  if (!line.is_object()) throw std::invalid_argument("expected a JSON object");
  const auto type = line.find("type");
  if (type == line.end() || !type->is_string()) throw std::invalid_argument("missing the string field \"type\"");
  const auto& name = type->get_ref<const std::string&>();
  if (name == network_grant_event_type) {
    const auto domains = line.find("domains");
    if (domains == line.end() || !domains->is_array() || domains->empty())
      throw std::invalid_argument("network-grant event without the array field \"domains\"");
    network_grant_event grant;
    for (const auto& domain : *domains) {
      if (!domain.is_string() || !network::domain_pattern::parse(domain.get_ref<const std::string&>()))
        throw std::invalid_argument("network-grant event with an entry that is not a domain name or *.wildcard");
      grant.domains.push_back(domain.get<std::string>());
    }
    return grant;
  }
  if (name == shell_state_event_type) return detail::shell_state_from_json(line, state_before);
  if (name != sandbox_mode_event_type) return opaque_event{name, line};
  const auto mode = line.find("mode");
  if (mode == line.end() || !mode->is_string())
    throw std::invalid_argument("sandbox-mode event without the string field \"mode\"");
  const auto& spelling = mode->get_ref<const std::string&>();
  const auto parsed = parse_sandbox_mode(spelling);
  if (!parsed)
    throw std::invalid_argument(
        fmt::format("unknown sandbox mode {} (expected read-only, workspace-write or danger-full-access)",
                    nlohmann::json(spelling).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  return sandbox_mode_event{*parsed};
}

/// The session's sandbox-mode override: the last `sandbox-mode` event wins;
/// empty when there is none. A pure fold.
inline std::optional<sandbox_mode> effective_sandbox_mode(std::span<const session_event> events) {
  std::optional<sandbox_mode> mode;
  for (const auto& event : events)
    if (const auto* set = std::get_if<sandbox_mode_event>(&event)) mode = set->mode;
  return mode;
}

/// The names granted to the session for good, in the order first granted,
/// each once. A pure fold.
inline std::vector<std::string> session_network_grants(std::span<const session_event> events) {
  std::vector<std::string> granted;
  for (const auto& event : events)
    if (const auto* grant = std::get_if<network_grant_event>(&event))
      for (const auto& domain : grant->domains)
        if (std::find(granted.begin(), granted.end(), domain) == granted.end()) granted.push_back(domain);
  return granted;
}

/// The state the session's next call starts from: the last `shell-state`
/// event; empty (the session root, the host-derived environment) when there
/// is none. A pure fold.
inline shell_state_event current_shell_state(std::span<const session_event> events) {
  for (auto it = events.rbegin(); it != events.rend(); ++it)
    if (const auto* state = std::get_if<shell_state_event>(&*it)) return *state;
  return {};
}

/// A final line a crashed writer left half-written: `offset` is where it
/// starts (the file is cut there), `bytes` its length.
struct session_log_torn_tail {
  std::size_t offset = 0;
  std::size_t line_number = 0;
  std::size_t bytes = 0;
};

/// What replaying a log file's bytes found.
struct session_log_replay {
  std::vector<session_event> events;
  std::optional<session_log_torn_tail> torn_tail;
  /// The last line is complete but lacks its newline.
  bool missing_final_newline = false;
};

namespace detail {
inline bool blank_log_line(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}
}  // namespace detail

/// Folds a log file's `content` into its events under the replay rules
/// above; `where` names the log in errors. Pure: the caller applies the
/// torn tail and the missing newline to the file.
inline session_log_replay replay_session_log(std::string_view content, std::string_view where) {
  session_log_replay replay;
  // Where the last non-blank line starts: only that line may be torn.
  std::size_t last_start = std::string_view::npos;
  for (std::size_t start = 0; start < content.size();) {
    auto end = content.find('\n', start);
    if (end == std::string_view::npos) end = content.size();
    if (!detail::blank_log_line(content.substr(start, end - start))) last_start = start;
    start = end + 1;
  }

  std::size_t line_number = 0;
  // Where the shell state so far is in `events` (a line of changes is read
  // against it): an index, since the vector moves as it grows.
  std::optional<std::size_t> state_at;
  for (std::size_t start = 0; start < content.size();) {
    ++line_number;
    auto end = content.find('\n', start);
    const bool terminated = end != std::string_view::npos;
    if (!terminated) end = content.size();
    const std::string_view line = content.substr(start, end - start);
    const std::size_t line_start = start;
    start = end + 1;
    if (detail::blank_log_line(line)) continue;

    nlohmann::json parsed;
    detail::depth_bounded_dom_parser builder(parsed, session_log_max_depth);
    const bool complete = nlohmann::json::sax_parse(line, &builder, nlohmann::json::input_format_t::json, true);
    if (builder.too_deep())
      throw session_log_error(fmt::format("session log {} line {}: nested deeper than {} levels (the log is corrupt)",
                                          where, line_number, session_log_max_depth));
    if (!complete || builder.failed()) {
      if (line_start == last_start) {
        replay.torn_tail = session_log_torn_tail{line_start, line_number, line.size()};
        return replay;
      }
      throw session_log_error(
          fmt::format("session log {} line {}: not valid JSON (the log is corrupt)", where, line_number));
    }
    try {
      const shell_state_event none;
      const auto& before = state_at ? std::get<shell_state_event>(replay.events[*state_at]) : none;
      replay.events.push_back(event_from_json(parsed, before));
      if (std::holds_alternative<shell_state_event>(replay.events.back())) state_at = replay.events.size() - 1;
    } catch (const std::invalid_argument& e) {
      throw session_log_error(fmt::format("session log {} line {}: {}", where, line_number, e.what()));
    }
    if (!terminated) replay.missing_final_newline = true;
  }
  return replay;
}

}  // namespace bashexec

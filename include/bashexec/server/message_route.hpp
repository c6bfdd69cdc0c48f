// server/message_route: what the HTTP transport (server/mcp_http_server.hpp)
// needs to know of a line a session's server wrote, to route it to the
// stream it belongs on: whether it answers requests (and which), whether it
// is a request of the server's own, its method, the progress token of a
// progress notice, and the task it relates to.
//
// `route_of` reads that from a parsed message. `skim_route` reads the same
// from the text in one pass that builds nothing, and is tried first: a
// call's answer is a few kB of output and exec facts, and parsing it whole
// (nlohmann-json's SAX parser still decodes every string and number) was
// 90k of the 200k instructions the transport spent per call (callgrind,
// docs/benchmarks.md). It is written by hand for that reason. It checks the
// structure (brackets, strings, separators, what follows the value) but not
// the scalars, and it declines (nullopt) wherever the keys it would give
// could differ from `route_of`'s: an escape in a key or in a routing
// string, a number that is not a plain integer, a routing field that is
// not a scalar, nesting deeper than it follows. The caller then parses the
// line and asks `route_of`. For every line that parses, an accepted skim
// equals `route_of` of the parse (fuzz/fuzz_message_route.cpp).
#pragma once

#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "bashexec/server/mcp_tasks.hpp"
#include "bashexec/server/rpc_id.hpp"

namespace bashexec::server::mcp {

/// A line's routing facts. Keys are `id_key`s (an id's JSON text); `task`
/// is the task id itself.
struct message_route {
  enum class shape { other, message, batch };
  shape what = shape::other;  // other: not an object or an array (or not JSON)
  /// The responses it carries: a response's id, or each response of a batch.
  std::vector<std::string> answered;
  bool is_request = false;  // a message with a method and an id
  bool is_error = false;    // a message with an `error`
  std::string method;       // a message's method when it is a string
  /// A progress notice's `params.progressToken`.
  std::optional<std::string> progress_token;
  /// `params.taskId`, else `params._meta[related-task].taskId` (strings).
  std::optional<std::string> task;
  friend bool operator==(const message_route&, const message_route&) = default;
};

inline constexpr std::string_view progress_method = "notifications/progress";

/// The facts of a parsed line (`discarded` when it was not JSON).
inline message_route route_of(const nlohmann::json& message) {
  message_route route;
  if (message.is_array()) {
    route.what = message_route::shape::batch;
    for (const auto& element : message)
      if (element.is_object() && element.contains("id") && !element.contains("method"))
        route.answered.push_back(id_key(element["id"]));
    return route;
  }
  if (!message.is_object()) return route;
  route.what = message_route::shape::message;
  const bool has_method = message.contains("method");
  const auto id = message.find("id");
  if (id != message.end() && !has_method) route.answered.push_back(id_key(*id));
  route.is_request = has_method && id != message.end();
  route.is_error = message.contains("error");
  if (const auto method = message.find("method"); method != message.end() && method->is_string())
    route.method = method->get<std::string>();
  const auto params = message.find("params");
  if (params == message.end() || !params->is_object()) return route;
  if (route.method == progress_method)
    if (const auto token = params->find("progressToken"); token != params->end()) route.progress_token = id_key(*token);
  if (const auto task = params->find("taskId"); task != params->end() && task->is_string()) {
    route.task = task->get<std::string>();
    return route;
  }
  const auto meta = params->find("_meta");
  if (meta == params->end() || !meta->is_object()) return route;
  const auto related = meta->find(std::string(related_task_key));
  if (related == meta->end() || !related->is_object()) return route;
  if (const auto task = related->find("taskId"); task != related->end() && task->is_string())
    route.task = task->get<std::string>();
  return route;
}

namespace detail {

/// The one pass of `skim_route`. Each `skim_*` reads one JSON value at
/// `at` (whitespace before it skipped) and leaves `at` just past it; false
/// when the text is not one it can vouch for.
class route_skimmer {
 public:
  explicit route_skimmer(std::string_view text) : text_(text) {}

  std::optional<message_route> run() {
    message_route route;
    skip_space();
    if (at_ == text_.size()) return std::nullopt;
    bool ok = false;
    if (text_[at_] == '[') {
      route.what = message_route::shape::batch;
      ok = skim_array([&] {
        if (peek() != '{') return skim_value(1);
        fields element;
        if (!skim_message(element, 1)) return false;
        add_answered(route, element);
        return true;
      });
    } else if (text_[at_] == '{') {
      route.what = message_route::shape::message;
      fields message;
      ok = skim_message(message, 0);
      if (ok) fill(route, message);
    } else {
      ok = skim_value(0);  // a scalar: routed nowhere
    }
    skip_space();
    if (!ok || at_ != text_.size()) return std::nullopt;
    return route;
  }

 private:
  /// Raw token texts of one message's routing fields (a string's without
  /// its quotes where noted).
  struct fields {
    std::optional<std::string_view> id;  // a key: the token itself
    bool has_method = false;
    bool has_error = false;
    std::optional<std::string_view> method;  // its characters
    bool params_object = false;
    std::optional<std::string_view> progress_token;  // a key: the token itself
    std::optional<std::string_view> task_id;          // its characters (a string)
    std::optional<std::string_view> related_task_id;  // its characters (a string)
  };

  /// A response (an id and no method) answers its id.
  static void add_answered(message_route& route, const fields& message) {
    if (message.id && !message.has_method) route.answered.push_back(std::string(*message.id));
  }

  static void fill(message_route& route, const fields& message) {
    add_answered(route, message);
    route.is_request = message.has_method && message.id;
    route.is_error = message.has_error;
    if (message.method) route.method = std::string(*message.method);
    if (!message.params_object) return;
    if (route.method == progress_method && message.progress_token)
      route.progress_token = std::string(*message.progress_token);
    if (message.task_id)
      route.task = std::string(*message.task_id);
    else if (message.related_task_id)
      route.task = std::string(*message.related_task_id);
  }

  // Deeper than this the line is parsed instead (a session's own messages
  // are a few levels deep; the parse has no such limit to hit).
  static constexpr int max_depth = 64;

  char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }

  void skip_space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r'))
      ++at_;
  }

  /// A string; `content` its characters, `escaped` whether any is escaped.
  bool skim_string(std::string_view& content, bool& escaped) {
    if (peek() != '"') return false;
    const std::size_t start = ++at_;
    escaped = false;
    for (;;) {
      const void* quote = std::memchr(text_.data() + at_, '"', text_.size() - at_);
      if (!quote) return false;
      const std::size_t end = static_cast<const char*>(quote) - text_.data();
      if (std::memchr(text_.data() + at_, '\\', end - at_)) escaped = true;
      std::size_t slashes = 0;
      while (end - slashes > at_ && text_[end - slashes - 1] == '\\') ++slashes;
      at_ = end + 1;
      if (slashes % 2 == 0) {
        content = text_.substr(start, end - start);
        return true;
      }
    }
  }

  /// A scalar token other than a string: a literal or a number's characters.
  bool skim_scalar(std::string_view& token) {
    const std::size_t start = at_;
    // Up to the next separator; what it holds is checked below.
    while (at_ < text_.size() && text_[at_] != ',' && text_[at_] != '}' && text_[at_] != ']' && text_[at_] != ' ' &&
           text_[at_] != '\t' && text_[at_] != '\n' && text_[at_] != '\r' && text_[at_] != '"' &&
           text_[at_] != '{' && text_[at_] != '[' && text_[at_] != ':')
      ++at_;
    token = text_.substr(start, at_ - start);
    if (token == "true" || token == "false" || token == "null") return true;
    return !token.empty() && (token.front() == '-' || (token.front() >= '0' && token.front() <= '9')) &&
           token.find_first_not_of("+-.0123456789eE") == std::string_view::npos;
  }

  /// Any value, its content ignored.
  bool skim_value(int depth) {
    skip_space();
    const char c = peek();
    if (c == '{') return skim_object(depth + 1, [&](std::string_view, bool) { return skim_value(depth + 1); });
    if (c == '[') return skim_array([&] { return skim_value(depth + 1); }, depth + 1);
    if (c == '"') {
      std::string_view content;
      bool escaped = false;
      return skim_string(content, escaped);
    }
    std::string_view token;
    return skim_scalar(token);
  }

  /// A routing field's value as a key: a string or a plain integer (its
  /// token is then its `id_key`), or a literal. Anything else declines.
  bool skim_key_value(std::optional<std::string_view>& key) {
    skip_space();
    const std::size_t start = at_;
    if (peek() == '"') {
      std::string_view content;
      bool escaped = false;
      if (!skim_string(content, escaped) || escaped) return false;
      key = text_.substr(start, at_ - start);
      return true;
    }
    std::string_view token;
    if (!skim_scalar(token)) return false;
    if (token != "true" && token != "false" && token != "null" && !plain_integer(token)) return false;
    key = token;
    return true;
  }

  /// A string routed by its characters; any other value is skimmed and
  /// leaves `content` empty (`route_of` ignores it too).
  bool skim_string_value(std::optional<std::string_view>& content, int depth) {
    skip_space();
    if (peek() != '"') {
      content.reset();
      return skim_value(depth);
    }
    std::string_view characters;
    bool escaped = false;
    if (!skim_string(characters, escaped) || escaped) return false;
    content = characters;
    return true;
  }

  /// -?(0|[1-9][0-9]*), at most 18 digits, not -0: nlohmann-json holds it
  /// exactly and writes it back as the same text.
  static bool plain_integer(std::string_view token) {
    std::string_view digits = token.starts_with('-') ? token.substr(1) : token;
    if (digits.empty() || digits.size() > 18) return false;
    if (digits.find_first_not_of("0123456789") != std::string_view::npos) return false;
    if (digits.size() > 1 && digits.front() == '0') return false;
    return token != "-0";
  }

  /// One message object (a batch's element at depth 1): its routing fields.
  bool skim_message(fields& message, int depth) {
    return skim_object(depth + 1, [&](std::string_view key, bool escaped) {
      if (escaped) return false;  // could be any of the keys below
      if (key == "id") return skim_key_value(message.id);
      if (key == "method") {
        message.has_method = true;
        return skim_string_value(message.method, depth + 1);
      }
      if (key == "error") {
        message.has_error = true;
        return skim_value(depth + 1);
      }
      if (key != "params") return skim_value(depth + 1);
      // A later "params" replaces an earlier one, as in a parse.
      message.params_object = false;
      message.progress_token.reset();
      message.task_id.reset();
      message.related_task_id.reset();
      skip_space();
      if (peek() != '{') return skim_value(depth + 1);
      message.params_object = true;
      return skim_params(message, depth + 1);
    });
  }

  bool skim_params(fields& message, int depth) {
    return skim_object(depth + 1, [&](std::string_view key, bool escaped) {
      if (escaped) return false;
      if (key == "progressToken") return skim_key_value(message.progress_token);
      if (key == "taskId") return skim_string_value(message.task_id, depth + 1);
      if (key != "_meta") return skim_value(depth + 1);
      message.related_task_id.reset();
      skip_space();
      if (peek() != '{') return skim_value(depth + 1);
      return skim_object(depth + 2, [&](std::string_view name, bool name_escaped) {
        if (name_escaped) return false;
        if (name != related_task_key) return skim_value(depth + 2);
        message.related_task_id.reset();
        skip_space();
        if (peek() != '{') return skim_value(depth + 2);
        return skim_object(depth + 3, [&](std::string_view field, bool field_escaped) {
          if (field_escaped) return false;
          if (field != "taskId") return skim_value(depth + 3);
          return skim_string_value(message.related_task_id, depth + 3);
        });
      });
    });
  }

  /// `{` members `}`: `member(key, escaped)` reads each value.
  template <class Member>
  bool skim_object(int depth, Member&& member) {
    return skim_sequence('{', '}', depth, [&] {
      std::string_view key;
      bool escaped = false;
      if (!skim_string(key, escaped)) return false;
      skip_space();
      if (peek() != ':') return false;
      ++at_;
      return member(key, escaped);
    });
  }

  /// `[` elements `]`: `element()` reads each.
  template <class Element>
  bool skim_array(Element&& element, int depth = 1) {
    return skim_sequence('[', ']', depth, element);
  }

  /// `open` items separated by commas `close`, `item()` reading each.
  template <class Item>
  bool skim_sequence(char open, char close, int depth, Item&& item) {
    if (depth > max_depth || peek() != open) return false;
    ++at_;
    skip_space();
    if (peek() == close) {
      ++at_;
      return true;
    }
    for (;;) {
      skip_space();
      if (!item()) return false;
      skip_space();
      if (peek() == ',') {
        ++at_;
        continue;
      }
      if (peek() != close) return false;
      ++at_;
      return true;
    }
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

}  // namespace detail

/// The facts of `line` without parsing it; nullopt where only a parse can
/// tell (see the header's comment). Never wrong for a line that parses.
inline std::optional<message_route> skim_route(std::string_view line) { return detail::route_skimmer(line).run(); }

/// The facts of `line`: skimmed, else parsed (ids kept exact).
inline message_route route_line(std::string_view line) {
  if (auto skimmed = skim_route(line)) return std::move(*skimmed);
  return route_of(parse_exact_ids(line));
}

}  // namespace bashexec::server::mcp

// server/request_parse: the bounded parse of one request line, shared by
// both tool servers: nesting depth, value count (json_lines_server's reader
// bounds the line length), valid UTF-8, and the request's `id` recovered
// whenever it can be read, so that even an error about the rest of the line
// can echo it. No threads and no I/O.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/server/rpc_id.hpp"
#include "bashexec/tools/render.hpp"
#include "bashexec/tools/utf8.hpp"

namespace bashexec::server {

/// The dimensions of one request line (docs/tool-protocol.md). nlohmann-json
/// parses iteratively but copies and dumps recursively, so an unbounded
/// nesting depth is a stack overflow one copy away.
struct request_limits {
  /// Longest request line kept; a longer one is answered with an error and its
  /// bytes are dropped as they arrive (the servers' line_reader applies it).
  std::size_t max_line_bytes = std::size_t{16} << 20;
  /// Deepest nesting of arrays and objects, the request object itself counting
  /// as one level. Tool arguments are flat; 64 leaves room for any harness's
  /// structured `id`.
  std::size_t max_depth = 64;
  /// Values in the whole line (every scalar, array, object and key), so that
  /// a line of a million tiny values cannot become a million-node tree.
  std::size_t max_values = 10000;
  /// A session id names a log file (percent-encoded, up to 3 bytes per byte,
  /// under the 255-byte file-name limit).
  std::size_t max_session_bytes = 80;
};

namespace detail {

/// A SAX pass over a request line that builds nothing: it measures depth and
/// value count and picks up the top-level `id` when it is a scalar, so that an
/// error about the rest of the line can still echo it. The parser it is fed
/// to is iterative, so any depth is safe to measure.
class request_scan {
 public:
  using json = nlohmann::json;

  bool null() { return scalar(nullptr); }
  bool boolean(bool value) { return scalar(value); }
  // With `exact_ids`, an id nlohmann-json would not hold exactly keeps its
  // text (server/rpc_id.hpp; `0` arrives unsigned, so a signed one was `-0`).
  bool number_integer(json::number_integer_t value) {
    return exact_ids && value == 0 ? scalar(mcp::exact_number("-0")) : scalar(value);
  }
  bool number_unsigned(json::number_unsigned_t value) { return scalar(value); }
  bool number_float(json::number_float_t value, const std::string& text) {
    return exact_ids ? scalar(mcp::exact_number(text)) : scalar(value);
  }
  bool string(std::string& value) {
    if (id_next()) {
      id = json(std::move(value));
      id_structured = false;
    }
    return true;
  }
  bool binary(json::binary_t&) { return scalar(nullptr); }
  bool start_object(std::size_t) { return open(true); }
  bool start_array(std::size_t) { return open(false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& name) {
    ++values;
    expect_id_ = depth_ == 1 && top_is_object && name == "id";
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    error = e.what();
    error_position = position;
    return false;
  }

  /// Keep number ids exactly (the MCP server's JSON-RPC ids).
  bool exact_ids = false;
  std::size_t max_depth = 0;
  std::size_t values = 0;
  bool top_is_object = false;
  bool top_seen = false;
  /// The last top-level `id` seen, when it was a scalar.
  std::optional<json> id;
  /// The top-level `id` is an array or object (only the full parse reads it).
  bool id_structured = false;
  std::optional<std::string> error;
  std::size_t error_position = 0;

 private:
  /// True (once) when the value now arriving is the top-level `id`.
  bool id_next() {
    ++values;
    if (!top_seen) top_seen = true;
    return std::exchange(expect_id_, false);
  }

  template <class T>
  bool scalar(T&& value) {
    if (id_next()) {
      id = json(std::forward<T>(value));
      id_structured = false;
    }
    return true;
  }

  bool open(bool object) {
    if (!top_seen) top_is_object = object;
    if (id_next()) {
      id.reset();
      id_structured = true;
    }
    max_depth = std::max(max_depth, ++depth_);
    return true;
  }

  bool close() {
    --depth_;
    expect_id_ = false;
    return true;
  }

  std::size_t depth_ = 0;
  bool expect_id_ = false;
};

/// `text` cut to about `max_bytes` on a character boundary, for quoting a
/// parser's message (which may repeat part of the line) in a response.
inline std::string short_text(std::string_view text, std::size_t max_bytes = 200) {
  return command_summary(text, max_bytes);
}

}  // namespace detail

/// A request line after the bounded parse: the request object, or the error
/// to answer; `id` is whatever could be read of the request's id (null when
/// nothing could).
struct parsed_line {
  /// Why a line was refused, for a protocol that answers each with its own
  /// code (the MCP server: parse error or invalid request).
  enum class failure { none, invalid_utf8, malformed, not_object, too_deep, too_many_values };

  nlohmann::json id;
  std::optional<nlohmann::json> request;
  std::string error;
  failure why = failure::none;
};

/// The top-level scalar `id` of a (possibly cut, invalid or oversized) line,
/// or null; with `exact_ids`, a number kept as its text (server/rpc_id.hpp).
inline nlohmann::json recover_id(std::string_view line, bool exact_ids = false) {
  try {
    detail::request_scan scan;
    scan.exact_ids = exact_ids;
    const std::string valid = is_valid_utf8(line) ? std::string(line) : to_valid_utf8(line);
    nlohmann::json::sax_parse(valid, &scan);
    return scan.id.value_or(nullptr);
  } catch (...) {
    return nullptr;
  }
}

/// Parses one request line within `limits` (the line length excepted): one
/// JSON object, or with `allow_array` an object or an array (a JSON-RPC
/// batch, whose elements the caller checks). With `exact_ids`, number ids
/// keep their text (server/rpc_id.hpp).
inline parsed_line parse_request_line(std::string_view line, const request_limits& limits = {},
                                      bool allow_array = false, bool exact_ids = false) {
  parsed_line out;
  using failure = parsed_line::failure;
  if (!is_valid_utf8(line)) {
    std::size_t at = 0;
    while (at < line.size()) {
      std::size_t invalid = 0;
      const std::size_t n = bashexec::detail::utf8_char_length(line, at, &invalid);
      if (n == 0) break;
      at += n;
    }
    out.id = recover_id(line, exact_ids);
    out.why = failure::invalid_utf8;
    out.error = fmt::format(
        "request line is not valid UTF-8 (first invalid byte at offset {}); JSON text must be UTF-8. "
        "Nothing was run.",
        at);
    return out;
  }
  detail::request_scan scan;
  scan.exact_ids = exact_ids;
  nlohmann::json::sax_parse(line, &scan);
  if (scan.id) out.id = *scan.id;
  if (scan.error) {
    out.why = failure::malformed;
    out.error = fmt::format("malformed request line: expected one JSON object per line ({})",
                            detail::short_text(*scan.error));
    return out;
  }
  if (!scan.top_is_object && !(allow_array && scan.max_depth > 0)) {
    out.why = failure::not_object;
    out.error = "malformed request line: expected one JSON object per line";
    return out;
  }
  if (scan.max_depth > limits.max_depth) {
    out.why = failure::too_deep;
    out.error = fmt::format(
        "request nests arrays and objects {} levels deep; at most {} are allowed. Nothing was run.", scan.max_depth,
        limits.max_depth);
    return out;
  }
  if (scan.values > limits.max_values) {
    out.why = failure::too_many_values;
    out.error = fmt::format("request holds {} JSON values; at most {} are allowed. Nothing was run.", scan.values,
                            limits.max_values);
    return out;
  }
  // Within the limits: the full parse builds a bounded tree.
  auto request = exact_ids ? mcp::parse_exact_ids(line) : nlohmann::json::parse(line, nullptr, false);
  if (request.is_discarded() || !(request.is_object() || (allow_array && request.is_array()))) {
    out.why = failure::not_object;
    out.error = "malformed request line: expected one JSON object per line";
    return out;
  }
  if (request.is_object())
    if (auto id = request.find("id"); id != request.end()) out.id = *id;
  out.request = std::move(request);
  return out;
}

}  // namespace bashexec::server

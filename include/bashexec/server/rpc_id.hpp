// server/rpc_id: JSON-RPC ids echoed exactly as sent. nlohmann-json reads a
// number it cannot hold exactly (an integer beyond 64 bits, `-0`, `1.50`)
// as a double, which would come back as another number
// (`-9223372036854775809` as `-9.223372036854776e+18`). mcp_server's parse
// keeps the token's text for such a number where it is an id (a message's
// `id`, a cancellation's `params.requestId`) in an *exact number* — an
// object under a key no parsed line can hold (invalid UTF-8) — and its
// writer (`dump_line`) puts that text back on the wire verbatim. Ids held
// exactly by nlohmann-json (strings, 64-bit integers) stay plain values.
// A number that overflows a double (`1e400`) is not parsed at all: the
// line is a parse error.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace bashexec::server::mcp {

/// Invalid UTF-8: a line that holds it is refused before any parse, and no
/// `\u` escape decodes to it, so no client can forge an exact number.
inline const std::string exact_number_key = "\xFF" "bashexec-exact-number";

/// A number token kept as its text.
inline nlohmann::json exact_number(std::string text) { return {{exact_number_key, std::move(text)}}; }

/// The text of an exact number, or null for any other value.
inline const std::string* exact_number_text(const nlohmann::json& value) {
  if (!value.is_object() || value.size() != 1) return nullptr;
  const auto text = value.find(exact_number_key);
  if (text == value.end() || !text->is_string()) return nullptr;
  return &text->get_ref<const std::string&>();
}

/// An exact number with no fraction and no exponent: an integer id, however
/// large (MCP: ids are strings or integers).
inline bool is_exact_integer(const nlohmann::json& value) {
  const auto* text = exact_number_text(value);
  return text && text->find_first_of(".eE") == std::string::npos;
}

/// A map key for an id: its JSON text, so that 1 and "1" differ (an exact
/// number's text as it was read).
inline std::string id_key(const nlohmann::json& id) {
  if (const auto* text = exact_number_text(id)) return *text;
  return id.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace detail {

/// nlohmann-json's DOM builder, except that a number it would not hold
/// exactly becomes an exact number where it is an id: `id` of a message
/// (the line's object, or an element of a batch) and `requestId` in its
/// `params`.
class exact_id_dom_parser : public nlohmann::detail::json_sax_dom_parser<nlohmann::json> {
  using base = nlohmann::detail::json_sax_dom_parser<nlohmann::json>;

 public:
  explicit exact_id_dom_parser(nlohmann::json& result) : base(result, /*allow_exceptions=*/false) {}

  bool number_float(number_float_t value, const string_t& text) {
    return is_id() ? exact(text) : base::number_float(value, text);
  }
  bool number_integer(number_integer_t value) {
    // nlohmann-json reads `0` as unsigned: a signed zero was written `-0`.
    return value == 0 && is_id() ? exact("-0") : base::number_integer(value);
  }
  bool start_object(std::size_t size) { return open(false, base::start_object(size)); }
  bool start_array(std::size_t size) { return open(true, base::start_array(size)); }
  bool end_object() { return close(base::end_object()); }
  bool end_array() { return close(base::end_array()); }
  bool key(string_t& name) {
    key_ = name;
    return base::key(name);
  }

 private:
  struct level {
    bool array;
    std::string key;  // the key this container is the value of
  };

  bool message_at(std::size_t depth) const {
    return depth >= 1 && depth <= levels_.size() &&
           (depth == 1 ? !levels_[0].array : depth == 2 && levels_[0].array && !levels_[1].array);
  }

  bool is_id() const {
    if (levels_.empty() || levels_.back().array) return false;
    const std::size_t depth = levels_.size();
    if (key_ == "id") return message_at(depth);
    return key_ == "requestId" && levels_.back().key == "params" && message_at(depth - 1);
  }

  bool exact(const std::string& text) {
    std::string name = exact_number_key, value = text;
    return base::start_object(1) && base::key(name) && base::string(value) && base::end_object();
  }

  bool open(bool array, bool ok) {
    levels_.push_back({array, levels_.empty() || levels_.back().array ? std::string() : key_});
    return ok;
  }

  bool close(bool ok) {
    levels_.pop_back();
    return ok;
  }

  std::vector<level> levels_;
  std::string key_;
};

inline std::string dump_plain(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace detail

/// Parses `line` (valid UTF-8) keeping ids exact; discarded when it is not JSON.
inline nlohmann::json parse_exact_ids(std::string_view line) {
  nlohmann::json root;
  detail::exact_id_dom_parser parser(root);
  if (!nlohmann::json::sax_parse(line, &parser) || parser.is_errored()) return nlohmann::json::value_t::discarded;
  return root;
}

/// One message (or a batch of them) as a line, an exact-number `id` written
/// as the text it was read from.
inline std::string dump_line(const nlohmann::json& message) {
  if (message.is_array()) {
    std::string out = "[";
    for (const auto& element : message) {
      if (out.size() > 1) out += ',';
      out += dump_line(element);
    }
    return out + ']';
  }
  if (message.is_object()) {
    const auto id = message.find("id");
    if (id != message.end())
      if (const auto* text = exact_number_text(*id)) {
        // Only a number token's characters reach the wire unquoted.
        const bool number = !text->empty() && text->find_first_not_of("+-.0123456789eE") == std::string::npos;
        nlohmann::json rest = message;
        rest.erase("id");
        const std::string body = detail::dump_plain(rest);  // "{...}"
        return "{\"id\":" + (number ? *text : std::string("null")) + (body.size() > 2 ? "," + body.substr(1) : "}");
      }
  }
  return detail::dump_plain(message);
}

}  // namespace bashexec::server::mcp

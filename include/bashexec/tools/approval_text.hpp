// tools/approval_text: how an escalation request is shown to the person who
// approves it. What a human approves is exactly what runs: the whole
// command, every line, numbered, nothing truncated, and every character a
// person could not see or could misread written as an escape:
//   `\\`                        a backslash itself (so every escape is unambiguous)
//   `\t` `\r` `\xNN`             C0 controls (NUL included) and DEL; in one-line
//                                fields also `\n`
//   `\xNN`                       each byte of an invalid UTF-8 sequence (>= 0x80)
//   `\u{XXXX}`                   C1 controls, bidirectional controls (U+202A-202E,
//                                U+2066-2069, U+200E/200F, U+061C), zero-width and
//                                other invisible or format characters (U+200B-200D,
//                                U+2060-2064, U+FEFF, U+00AD, U+180E, ...), spaces
//                                other than U+0020, line/paragraph separators,
//                                variation selectors, tag characters
//                                (U+E0000-E007F), private-use code points and
//                                noncharacters
// A request whose text would exceed `max_approval_text_bytes` is never shown
// cut: `approval_text` answers nothing and the tool layer refuses the
// request before anyone is asked (tools/escalation.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include "bashexec/detail/text/utf8_boundary.hpp"
#include "bashexec/tools/approval.hpp"

namespace bashexec {

/// The largest approval question shown to a person, in bytes of rendered
/// text (about a thousand lines of a long script); a longer one is refused.
inline constexpr std::size_t max_approval_text_bytes = std::size_t{64} << 10;

namespace detail {

/// Code points a person cannot see, or could mistake for others, in a
/// terminal or a dialog: controls, format characters, bidirectional
/// controls, spaces other than U+0020, invisible fillers, variation
/// selectors, tags, private use and noncharacters.
constexpr bool is_hidden_code_point(char32_t c) noexcept {
  if (c < 0x20 || c == 0x7F) return true;
  if (c < 0x80) return false;
  if (c <= 0xA0 || c == 0xAD || c == 0x34F || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x8E2) return true;
  if (c >= 0x600 && c <= 0x605) return true;
  if (c == 0x890 || c == 0x891 || c == 0x115F || c == 0x1160 || c == 0x1680 || c == 0x17B4 || c == 0x17B5)
    return true;
  if (c >= 0x180B && c <= 0x180F) return true;
  if (c >= 0x2000 && c <= 0x200F) return true;  // spaces, zero-width, LRM/RLM
  if (c >= 0x2028 && c <= 0x202F) return true;  // separators, embeddings, overrides, narrow space
  if (c >= 0x205F && c <= 0x206F) return true;  // word joiner, invisible operators, isolates
  if (c == 0x2800 || c == 0x3000 || c == 0x3164 || c == 0xFFA0 || c == 0xFEFF) return true;
  if (c >= 0xFE00 && c <= 0xFE0F) return true;  // variation selectors
  if (c >= 0xE000 && c <= 0xF8FF) return true;  // private use
  if (c >= 0xFDD0 && c <= 0xFDEF) return true;  // noncharacters
  if (c >= 0xFFF0 && c <= 0xFFFB) return true;  // specials, interlinear annotation
  if ((c & 0xFFFE) == 0xFFFE) return true;      // U+xFFFE, U+xFFFF
  if (c == 0x110BD || c == 0x110CD || (c >= 0x13430 && c <= 0x1343F) || (c >= 0x1BCA0 && c <= 0x1BCA3)) return true;
  if (c >= 0x1D173 && c <= 0x1D17A) return true;
  if (c >= 0xE0000) return true;  // tags, variation selectors supplement, private use planes
  return false;
}

constexpr char32_t decode_utf8(std::string_view character) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(character[i])); };
  switch (character.size()) {
    case 1: return byte(0);
    case 2: return ((byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
    case 3: return ((byte(0) & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
    default: return ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
  }
}

inline void append_visible_char(std::string& out, std::string_view character, bool keep_newline) {
  const char32_t c = decode_utf8(character);
  if (c == '\\') out += "\\\\";
  else if (c == '\n' && keep_newline) out += '\n';
  else if (c == '\n') out += "\\n";
  else if (c == '\t') out += "\\t";
  else if (c == '\r') out += "\\r";
  else if (c < 0x80 && is_hidden_code_point(c)) out += fmt::format("\\x{:02X}", static_cast<unsigned>(c));
  else if (is_hidden_code_point(c)) out += fmt::format("\\u{{{:04X}}}", static_cast<std::uint32_t>(c));
  else out.append(character);
}

}  // namespace detail

/// `text` with every hidden or misleading character escaped (see above);
/// line breaks are kept as line breaks when `keep_newlines`, else `\n`.
/// Always valid UTF-8.
inline std::string visible_text(std::string_view text, bool keep_newlines = false) {
  std::string out;
  out.reserve(text.size());
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t invalid = 0;
    const std::size_t n = detail::utf8_char_length(text, at, &invalid);
    if (n == 0) {
      for (std::size_t i = 0; i < invalid; ++i)
        out += fmt::format("\\x{:02X}", static_cast<unsigned>(static_cast<unsigned char>(text[at + i])));
      at += invalid;
      continue;
    }
    detail::append_visible_char(out, text.substr(at, n), keep_newlines);
    at += n;
  }
  return out;
}

/// The whole command as numbered lines (`  1 | ls`), every line kept, and
/// a header that says how many there are, so a person sees where it begins
/// and ends.
inline std::string visible_command(std::string_view command) {
  const std::string shown = visible_text(command, /*keep_newlines=*/true);
  std::size_t lines = 1;
  for (char ch : shown) lines += ch == '\n';
  const std::size_t width = std::to_string(lines).size();
  std::string out = fmt::format("Command ({} line{}, shown in full; \\ starts an escape):", lines, lines == 1 ? "" : "s");
  std::size_t number = 0, begin = 0;
  for (;;) {
    const std::size_t end = shown.find('\n', begin);
    out += fmt::format("\n{:>{}} | {}", ++number, width,
                       std::string_view(shown).substr(begin, end == std::string::npos ? end : end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return out;
}

/// The lines of the question that say what a call starts with from the
/// session's carried shell state; empty without any.
inline std::string carried_state_text(const approval_request& request) {
  std::string text;
  if (!request.carried_cwd.empty())
    text += "\nStarts in (carried from the session's earlier calls): " + visible_text(request.carried_cwd);
  if (!request.carried_env.empty()) {
    text += fmt::format("\nEnvironment carried from the session's earlier calls ({} variable{}):",
                        request.carried_env.size(), request.carried_env.size() == 1 ? "" : "s");
    for (const auto& [name, value] : request.carried_env) text += "\n  " + visible_text(name) + "=" + visible_text(value);
  }
  if (!request.carried_unset.empty()) {
    text += "\nUnset by the session's earlier calls:";
    for (const auto& name : request.carried_unset) text += " " + visible_text(name);
  }
  if (!request.withheld_env.empty()) {
    text += "\nNot carried into this wider call (set under a narrower mode):";
    for (const auto& name : request.withheld_env) text += " " + visible_text(name);
  }
  return text;
}

/// The question put to a person about `request`: the modes, the carried
/// state the call starts with (carried_state_text), the whole command
/// (`visible_command`), the description and the justification (each on one
/// line, `visible_text`). Empty when it would exceed
/// `max_approval_text_bytes`: nothing is shown cut.
inline std::optional<std::string> approval_text(const approval_request& request) {
  // The cheap bound first: escaping never shrinks a text.
  std::size_t listed_bytes = request.carried_cwd.size();
  for (const auto& domain : request.requested_domains) listed_bytes += domain.size() + 2;
  for (const auto& [name, value] : request.carried_env) listed_bytes += name.size() + value.size() + 3;
  for (const auto& name : request.carried_unset) listed_bytes += name.size() + 2;
  for (const auto& name : request.withheld_env) listed_bytes += name.size() + 2;
  if (request.command.size() + request.description.size() + request.justification.size() + listed_bytes >
      max_approval_text_bytes)
    return std::nullopt;
  std::string asked;
  if (request.widens_mode())
    asked = fmt::format("bashexec asks to run one command under {} mode (the session runs under {} mode).",
                        request.requested_mode, request.current_mode);
  else
    asked = fmt::format("bashexec asks to run one command under {} mode, as the session does.", request.current_mode);
  if (!request.requested_domains.empty()) {
    asked += "\nNetwork access asked for, beyond the allowed domains (this one command only):";
    for (const auto& domain : request.requested_domains) asked += "\n  " + visible_text(domain);
  }
  asked += carried_state_text(request);
  std::string text = fmt::format("{}\n{}\nDescription: {}\nJustification: {}", asked,
                                 visible_command(request.command), visible_text(request.description),
                                 visible_text(request.justification));
  if (text.size() > max_approval_text_bytes) return std::nullopt;
  return text;
}

/// The refusal of a request too long to show (`approval_text` is empty);
/// nobody was asked.
inline std::string approval_too_long_refusal(const approval_request& request) {
  return fmt::format(
      "the request to run this command {} is too long to show a person for approval (its command, "
      "description and justification shown in full would exceed {} bytes, and an approval is never asked about a "
      "cut command); the command did not run. Split the work into shorter commands.",
      requested_widening(request), max_approval_text_bytes);
}

}  // namespace bashexec

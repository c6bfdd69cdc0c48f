// detail/text/stderr_section: the one home of the `[stderr]` join — how stderr
// text follows stdout text wherever both reach a reader in one string (a
// background task's read delta, the tools' result body; docs/contract.md
// item 20).
#pragma once

#include <string>
#include <string_view>

namespace bashexec::detail {

/// The line that opens the stderr part.
inline constexpr std::string_view stderr_header = "[stderr]\n";

/// Appends the stderr part to `text`: a newline first when `text` is not
/// empty and does not end with one, then `[stderr]\n`, then `err`. Callers
/// decide whether there is a stderr part at all.
inline void append_stderr_section(std::string& text, std::string_view err) {
  if (!text.empty() && text.back() != '\n') text += '\n';
  text += stderr_header;
  text += err;
}

}  // namespace bashexec::detail

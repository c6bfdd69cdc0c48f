// Fuzz target: the result-text renderer (bashexec/tools/render.hpp) and its
// UTF-8 repair (bashexec/tools/utf8.hpp), whatever bytes a command printed
// and whatever facts a result carries.
//
// Properties:
//   - is_valid_utf8 agrees with an independent decoder (RFC 3629: shortest
//     form, no surrogates, nothing above U+10FFFF);
//   - to_valid_utf8 always returns valid UTF-8, returns valid input
//     unchanged, is idempotent, and mid-stream drops at most three leading
//     continuation bytes and nothing else;
//   - every rendered text (foreground result, bash_output read, completion
//     notice, command summary) is valid UTF-8;
//   - the foreground text keeps the contract-20 grammar: the output body
//     (`(no output)` when there is none, the stdout text first), then each
//     marker on a line of its own in the documented order, the signal or
//     non-zero exit line last;
//   - a bash_output text ends with the status line (running) or with the
//     status line and the sandbox markers (settled).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include <fmt/format.h>

#include <bashexec/tools/render.hpp>
#include <bashexec/tools/utf8.hpp>

#include "fuzz_support.hpp"

using namespace bashexec;

namespace {

/// RFC 3629 validity, decoded code point by code point (a second opinion on
/// detail::utf8_char_length's range tables).
bool reference_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t length = 0;
    char32_t cp = 0;
    if (lead < 0x80) { length = 1; cp = lead; }
    else if ((lead & 0xE0) == 0xC0) { length = 2; cp = lead & 0x1F; }
    else if ((lead & 0xF0) == 0xE0) { length = 3; cp = lead & 0x0F; }
    else if ((lead & 0xF8) == 0xF0) { length = 4; cp = lead & 0x07; }
    else return false;
    if (i + length > text.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr char32_t shortest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < shortest[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += length;
  }
  return true;
}

void check_repair(std::string_view bytes) {
  FUZZ_CHECK(is_valid_utf8(bytes) == reference_valid_utf8(bytes));
  for (const bool mid : {false, true}) {
    const std::string repaired = to_valid_utf8(bytes, mid);
    FUZZ_CHECK(is_valid_utf8(repaired));
    FUZZ_CHECK(to_valid_utf8(repaired) == repaired);
    std::size_t dropped = 0;
    if (mid)
      while (dropped < bytes.size() && dropped < 3 && detail::is_utf8_continuation(static_cast<unsigned char>(bytes[dropped])))
        ++dropped;
    if (is_valid_utf8(bytes.substr(dropped))) FUZZ_CHECK(repaired == bytes.substr(dropped));
  }
}

std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (;;) {
    const auto end = text.find('\n', start);
    lines.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return lines;
    start = end + 1;
  }
}

collected_output stream(FuzzedDataProvider& in) {
  collected_output out;
  out.text = in.ConsumeRandomLengthString(512);
  out.truncated = in.ConsumeBool();
  if (in.ConsumeBool()) out.spill_path = in.ConsumeRandomLengthString(64);
  return out;
}

std::optional<sandbox_info> sandbox(FuzzedDataProvider& in) {
  if (!in.ConsumeBool()) return std::nullopt;
  sandbox_info info;
  info.mode = sandbox_modes[in.ConsumeIntegralInRange<std::size_t>(0, sandbox_modes.size() - 1)];
  info.denied = in.ConsumeBool();
  info.runner_failed = in.ConsumeBool();
  return info;
}

/// The sandbox marker lines the grammar puts after the body.
std::vector<std::string> sandbox_lines(const std::optional<sandbox_info>& info, bool escalation) {
  std::vector<std::string> lines;
  if (!info) return lines;
  if (info->runner_failed) {
    lines.push_back(runner_failure_marker(info->mode));
  } else if (info->denied) {
    lines.push_back(denial_marker(info->mode));
    if (escalation && !escalation_hint(info->mode).empty()) lines.push_back(escalation_hint(info->mode));
  }
  return lines;
}

/// `text` is `head` followed by `lines`, each on a line of its own.
void check_suffix(const std::string& text, const std::string& head, const std::vector<std::string>& lines) {
  FUZZ_CHECK(text.compare(0, head.size(), head) == 0);
  std::string expected;
  for (const auto& line : lines) {
    if (!expected.empty() || (!head.empty() && head.back() != '\n')) expected += '\n';
    expected += line;
  }
  FUZZ_CHECK(text.substr(head.size()) == expected);
}

void check_run_result(FuzzedDataProvider& in) {
  run_result result;
  result.out = stream(in);
  result.err = stream(in);
  if (in.ConsumeBool()) result.exit_code = in.ConsumeIntegral<int>();
  if (in.ConsumeBool()) result.signal = in.ConsumeIntegralInRange<int>(-2, 80);
  result.timed_out = in.ConsumeBool();
  result.aborted = in.ConsumeBool();
  result.leftovers_killed = in.ConsumeBool();
  result.timeout = std::chrono::milliseconds(in.ConsumeIntegral<std::int64_t>());
  result.sandbox = sandbox(in);
  const bool escalation = in.ConsumeBool();

  const std::string text = render_run_result(result, escalation);
  FUZZ_CHECK(is_valid_utf8(text));

  const std::string body = render_output_body(result.out, result.err);
  FUZZ_CHECK(is_valid_utf8(body) && !body.empty());
  const std::string out_text = to_valid_utf8(result.out.text, result.out.truncated);
  FUZZ_CHECK(body.compare(0, out_text.size(), out_text) == 0);
  if (result.out.text.empty() && !result.out.truncated && result.err.text.empty()) FUZZ_CHECK(body == "(no output)");
  if (result.out.truncated) FUZZ_CHECK(body.find("\n" + truncation_note(result.out)) != std::string::npos);
  if (!result.err.text.empty()) FUZZ_CHECK(body.find("[stderr]\n") != std::string::npos);

  std::vector<std::string> markers = sandbox_lines(result.sandbox, escalation);
  if (result.timed_out) markers.push_back(fmt::format("[timed out after {}ms]", result.timeout.count()));
  if (result.aborted) markers.push_back("[aborted]");
  if (result.leftovers_killed)
    markers.push_back(
        "[leftover background processes were killed after the command exited; "
        "use run_in_background for long-lived processes]");
  if (result.signal)
    markers.push_back(fmt::format("[killed by signal: {}]", signal_name(*result.signal)));
  else if (result.exit_code && *result.exit_code != 0)
    markers.push_back(fmt::format("[exit code: {}]", *result.exit_code));
  check_suffix(text, body, markers);
  if (result.signal || (result.exit_code && *result.exit_code != 0)) FUZZ_CHECK(lines_of(text).back() == markers.back());
}

task_snapshot task(FuzzedDataProvider& in) {
  task_snapshot snapshot;
  snapshot.id = task_id(in.ConsumeRandomLengthString(24));
  snapshot.command = in.ConsumeRandomLengthString(400);
  snapshot.status = static_cast<task_status>(in.ConsumeIntegralInRange<int>(0, 2));
  if (in.ConsumeBool()) snapshot.exit_code = in.ConsumeIntegral<int>();
  if (in.ConsumeBool()) snapshot.signal = in.ConsumeIntegralInRange<int>(-2, 80);
  snapshot.sandbox = sandbox(in);
  return snapshot;
}

void check_task_texts(FuzzedDataProvider& in) {
  task_read read;
  read.task = task(in);
  read.delta = in.ConsumeRandomLengthString(512);
  read.lossy = in.ConsumeBool();
  if (in.ConsumeBool()) read.stdout_spill_path = in.ConsumeRandomLengthString(64);
  if (in.ConsumeBool()) read.stderr_spill_path = in.ConsumeRandomLengthString(64);
  const bool escalation = in.ConsumeBool();

  const std::string text = render_task_read(read, escalation);
  FUZZ_CHECK(is_valid_utf8(text));
  const std::string head = read.delta.empty() ? std::string("(no new output)") : to_valid_utf8(read.delta, true);
  std::vector<std::string> lines;
  if (read.lossy) lines.push_back(lossy_line(read));
  lines.push_back(status_line(read.task));
  if (read.task.status != task_status::running)
    for (auto& line : sandbox_lines(read.task.sandbox, escalation)) lines.push_back(line);
  check_suffix(text, head, lines);
  FUZZ_CHECK(is_valid_utf8(status_line(read.task)));

  const std::string notice = render_task_notice(read.task, escalation);
  FUZZ_CHECK(is_valid_utf8(notice));
  FUZZ_CHECK(notice.rfind("background task ", 0) == 0);

  const auto max_bytes = in.ConsumeIntegralInRange<std::size_t>(0, 300);
  const std::string summary = command_summary(read.task.command, max_bytes);
  FUZZ_CHECK(is_valid_utf8(summary));
  FUZZ_CHECK(summary.find('\n') == std::string::npos);
  const std::string_view command = read.task.command;
  if (command.find('\n') == std::string_view::npos && command.size() <= max_bytes && is_valid_utf8(command))
    FUZZ_CHECK(summary == command);
  FUZZ_CHECK(notice.find("\ncommand: " + command_summary(read.task.command)) != std::string::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_repair(std::string_view(reinterpret_cast<const char*>(data), size));
  FuzzedDataProvider in(data, size);
  if (in.ConsumeBool())
    check_run_result(in);
  else
    check_task_texts(in);
  return 0;
}

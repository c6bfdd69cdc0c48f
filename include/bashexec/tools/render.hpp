// tools/render: the result-text grammar of the model-facing tools (docs/contract.md
// item 20) as pure functions, shared by `bash_tools`, the CLI and the
// background-completion notice. Every function returns valid UTF-8.
//
// `bash` (foreground), byte-exact:
//   <stdout>[\n[output truncated; full output: <path>|(unavailable)]]
//   [<\n if the body so far is non-empty and lacks one>[stderr]\n<stderr>[\n<truncation note>]]
//   `(no output)` in place of an empty body; then each marker on its own line
//   (a newline is added only when the text does not already end with one):
//   [sandbox: file access denied under <mode> mode]   (or the runner-failure marker)
//   [to run this with wider file access, …]            (only when escalation is advertised)
//   [network: blocked <host>:<port> (<reason>), …]     (allowlist only: network_marker)
//   [to reach <names>, repeat … network_permissions …] (names not allowed, when it is advertised)
//   [timed out after <N>ms]
//   [aborted]
//   [leftover background processes were killed …]
//   [killed by signal: SIGTERM] | [exit code: N]      (non-zero exit only; always last)
// A terminal run that waits for input ends instead with
//   [waiting for input: "<prompt>"; answer with bash_input on bash-N]
// (the prompt with hidden characters escaped: tools/approval_text.hpp).
//
// `bash_output`: the delta or `(no new output)`, the lossy line
// (`[some output was dropped from memory; full output: <path>[, <path>]]`,
// bare paths), the status line, then the runner-failure or denial marker of
// a settled task, then its network marker; a running task that waits for
// input has `[waiting for input: "<prompt>"]` before its status line.
#pragma once

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "bashexec/detail/text/domain_name.hpp"
#include "bashexec/detail/text/stderr_section.hpp"
#include "bashexec/ids.hpp"
#include "bashexec/result.hpp"
#include "bashexec/sandbox_mode.hpp"
#include "bashexec/signal_name.hpp"
#include "bashexec/tools/approval_text.hpp"
#include "bashexec/tools/utf8.hpp"

namespace bashexec {

namespace detail {

/// Appends `line` on a line of its own: a newline first unless `text` is
/// empty or already ends with one.
inline void append_line(std::string& text, std::string_view line) {
  if (!text.empty() && text.back() != '\n') text.push_back('\n');
  text.append(line);
}

inline std::string path_or_unavailable(const std::optional<std::filesystem::path>& path) {
  return path && !path->empty() ? to_valid_utf8(path->string()) : std::string("(unavailable)");
}

}  // namespace detail

/// `[output truncated; full output: <path>]`, `(unavailable)` when the spill
/// path was withheld.
inline std::string truncation_note(const collected_output& stream) {
  return fmt::format("[output truncated; full output: {}]", detail::path_or_unavailable(stream.spill_path));
}

/// `[sandbox: file access denied under <mode> mode]`.
inline std::string denial_marker(sandbox_mode mode) {
  return fmt::format("[sandbox: file access denied under {} mode]", mode);
}

/// The one sanctioned way forward after a denial; empty when no mode is
/// wider than `denied_under`.
inline std::string escalation_hint(sandbox_mode denied_under) {
  std::string wider;
  for (auto mode : sandbox_modes) {
    if (!is_wider(mode, denied_under)) continue;
    if (!wider.empty()) wider += " or ";
    wider += fmt::format("\"{}\"", mode);
  }
  if (wider.empty()) return {};
  return fmt::format(
      "[to run this with wider file access, repeat the same command with sandbox_permissions ({}) "
      "and a justification; do not work around the sandbox]",
      wider);
}

/// The confinement failed before the command started.
inline std::string runner_failure_marker(sandbox_mode mode) {
  return fmt::format("[sandbox: the sandbox failed to start under {} mode; the command did not run]", mode);
}

/// Appends the sandbox marker lines of a settled run or task, if any.
inline void append_sandbox_markers(std::string& text, const std::optional<sandbox_info>& sandbox,
                                   bool escalation_advertised) {
  if (!sandbox) return;
  if (sandbox->runner_failed) {
    detail::append_line(text, runner_failure_marker(sandbox->mode));
  } else if (sandbox->denied) {
    detail::append_line(text, denial_marker(sandbox->mode));
    if (escalation_advertised)
      if (auto hint = escalation_hint(sandbox->mode); !hint.empty()) detail::append_line(text, hint);
  }
}

/// The one sanctioned way forward after names were blocked as not allowed,
/// as the file denial has its own: `[to reach pypi.org, repeat the same
/// command with network_permissions ["pypi.org"] and a justification; …]`.
/// Empty when no name was (a denied name, an address or a limit is not
/// something a grant changes; an IP literal is not a name).
inline std::string network_escalation_hint(const network_report& report) {
  std::vector<std::string> names;
  for (const auto& attempt : report.attempts) {
    if (attempt.decision != network_decision::blocked || attempt.reason != network_block_reason::not_allowed)
      continue;
    const auto name = network::canonical_domain(attempt.host);
    if (!name || name->find_first_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos) continue;
    if (std::find(names.begin(), names.end(), *name) == names.end() && names.size() < network_marker_hosts)
      names.push_back(*name);
  }
  if (names.empty()) return {};
  // Canonical names are letters, digits, dots and hyphens: quoted as they are.
  std::string listed, array;
  for (const auto& name : names) {
    listed += (listed.empty() ? "" : ", ") + name;
    array += (array.empty() ? "\"" : ", \"") + name + '"';
  }
  return fmt::format(
      "[to reach {}, repeat the same command with network_permissions [{}] and a justification; do not work "
      "around the network policy]",
      listed, array);
}

/// Appends the `[network: blocked …]` line of an allowlist run or settled
/// task (network_policy.hpp's network_marker), if anything was blocked, and
/// the hint when the schema offers `network_permissions`.
inline void append_network_marker(std::string& text, const std::optional<network_report>& network,
                                  bool network_escalation_advertised = false) {
  if (!network) return;
  if (std::string marker = network_marker(*network); !marker.empty()) detail::append_line(text, to_valid_utf8(marker));
  if (network_escalation_advertised)
    if (std::string hint = network_escalation_hint(*network); !hint.empty()) detail::append_line(text, hint);
}

/// stdout, its truncation note, the `[stderr]` section, or `(no output)`.
inline std::string render_output_body(const collected_output& out, const collected_output& err) {
  std::string body = to_valid_utf8(out.text, out.truncated);
  if (out.truncated) {
    body += '\n';
    body += truncation_note(out);
  }
  if (!err.text.empty()) {
    detail::append_stderr_section(body, to_valid_utf8(err.text, err.truncated));
    if (err.truncated) {
      body += '\n';
      body += truncation_note(err);
    }
  }
  if (body.empty()) body = "(no output)";
  return body;
}

/// `"<prompt>"`: the prompt of an input wait, hidden characters escaped
/// and quotes backslashed, so the marker stays on one line and unambiguous.
inline std::string quoted_prompt(const input_wait& wait) {
  std::string visible = visible_text(wait.prompt);
  std::string quoted = "\"";
  for (char c : visible) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  quoted += '"';
  return quoted;
}

/// `[waiting for input: "<prompt>"]`.
inline std::string waiting_marker(const input_wait& wait) {
  return fmt::format("[waiting for input: {}]", quoted_prompt(wait));
}

/// The text of a foreground `bash` call (contract 20), settled or — on a
/// terminal — handed on as a task waiting for input (contract 26).
inline std::string render_run_result(const run_result& result, bool escalation_advertised,
                                     bool network_escalation_advertised = false) {
  if (result.continued_as && result.input_wait) {
    std::string text = result.out.text.empty() ? std::string("(no output)") : to_valid_utf8(result.out.text, true);
    if (result.out.truncated) detail::append_line(text, truncation_note(result.out));
    detail::append_line(text, fmt::format("[waiting for input: {}; answer with bash_input on {}]",
                                          quoted_prompt(*result.input_wait), to_valid_utf8(result.continued_as->value())));
    return text;
  }
  std::string text = render_output_body(result.out, result.err);
  append_sandbox_markers(text, result.sandbox, escalation_advertised);
  append_network_marker(text, result.network, network_escalation_advertised);
  if (result.timed_out) detail::append_line(text, fmt::format("[timed out after {}ms]", result.timeout.count()));
  if (result.aborted) detail::append_line(text, "[aborted]");
  if (result.leftovers_killed)
    detail::append_line(text,
                        "[leftover background processes were killed after the command exited; "
                        "use run_in_background for long-lived processes]");
  if (result.signal)
    detail::append_line(text, fmt::format("[killed by signal: {}]", signal_name(*result.signal)));
  else if (result.exit_code && *result.exit_code != 0)
    detail::append_line(text, fmt::format("[exit code: {}]", *result.exit_code));
  return text;
}

/// `started background task bash-N`.
inline std::string render_started(const task_id& id) {
  return fmt::format("started background task {}", to_valid_utf8(id.value()));
}

/// `[status: running]`, `[status: completed, exit code: N]`,
/// `[status: killed by SIGTERM]`.
inline std::string status_line(const task_snapshot& task) {
  switch (task.status) {
    case task_status::running: return "[status: running]";
    case task_status::completed:
      return task.exit_code ? fmt::format("[status: completed, exit code: {}]", *task.exit_code)
                            : std::string("[status: completed]");
    case task_status::killed:
      return task.signal ? fmt::format("[status: killed by {}]", signal_name(*task.signal))
                         : std::string("[status: killed]");
  }
  return "[status: unknown]";
}

/// `[some output was dropped from memory; full output: <paths>]`: the spill
/// paths joined with `, ` and nothing else, so a client may take the text
/// after `full output: ` as paths. Each file's name ends in its stream
/// (`-stdout`, `-stderr`); `(unavailable)` when every path was withheld.
inline std::string lossy_line(const task_read& read) {
  std::string paths;
  for (const auto* path : {&read.stdout_spill_path, &read.stderr_spill_path}) {
    if (!*path || (*path)->empty()) continue;
    if (!paths.empty()) paths += ", ";
    paths += to_valid_utf8((*path)->string());
  }
  if (paths.empty()) paths = "(unavailable)";
  return fmt::format("[some output was dropped from memory; full output: {}]", paths);
}

/// The text of a `bash_output` call (contract 20).
inline std::string render_task_read(const task_read& read, bool escalation_advertised,
                                    bool network_escalation_advertised = false) {
  // A delta starts wherever the previous read stopped, possibly mid-character.
  std::string text = read.delta.empty() ? std::string("(no new output)") : to_valid_utf8(read.delta, true);
  if (read.lossy) detail::append_line(text, lossy_line(read));
  if (read.task.status == task_status::running && read.task.input_wait)
    detail::append_line(text, waiting_marker(*read.task.input_wait));
  detail::append_line(text, status_line(read.task));
  if (read.task.status != task_status::running) {
    append_sandbox_markers(text, read.task.sandbox, escalation_advertised);
    append_network_marker(text, read.task.network, network_escalation_advertised);
  }
  return text;
}

/// The first line of `command`, cut to about `max_bytes` on a character
/// boundary, for one-line mentions of a command.
inline std::string command_summary(std::string_view command, std::size_t max_bytes = 200) {
  const auto newline = command.find('\n');
  bool cut = newline != std::string_view::npos;
  std::string_view line = command.substr(0, newline);
  if (line.size() > max_bytes) {
    std::size_t end = max_bytes;
    while (end > 0 && detail::is_utf8_continuation(static_cast<unsigned char>(line[end]))) --end;
    line = line.substr(0, end);
    cut = true;
  }
  std::string summary = to_valid_utf8(line);
  if (cut) summary += " \xE2\x80\xA6";  // " …"
  return summary;
}

/// What a harness injects into the owning session when a background task
/// settles:
///   background task bash-N finished; read its output with bash_output
///   command: <first line of the command>
///   [status: …]
///   [sandbox marker lines, if any]
inline std::string render_task_notice(const task_snapshot& task, bool escalation_advertised,
                                      bool network_escalation_advertised = false) {
  std::string text = fmt::format("background task {} finished; read its output with bash_output\ncommand: {}",
                                 to_valid_utf8(task.id.value()), command_summary(task.command));
  detail::append_line(text, status_line(task));
  if (task.status != task_status::running) {
    append_sandbox_markers(text, task.sandbox, escalation_advertised);
    append_network_marker(text, task.network, network_escalation_advertised);
  }
  return text;
}

}  // namespace bashexec

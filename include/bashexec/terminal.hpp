// terminal: the vocabulary of talking to a running command — a
// pseudo-terminal of its own (`terminal_size`), the executor's terminal
// settings (`terminal_settings`), and the kernel's fact that a command is
// waiting for input (`input_wait`). The executor members that use them are
// basic_executor's write_input, close_input, resize and interrupt
// (docs/terminals.md, contract items 22-27).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "bashexec/ids.hpp"

namespace bashexec {

/// The window of a command's terminal, in character cells.
struct terminal_size {
  std::uint16_t rows = 24;
  std::uint16_t columns = 80;
  friend bool operator==(const terminal_size&, const terminal_size&) = default;
};

/// What the executor does for commands on a terminal (executor_config::terminal).
struct terminal_settings {
  /// TERM for a command on a terminal: a real terminal type, not `dumb`.
  /// NO_COLOR, PAGER and GIT_PAGER stay as for every command (contract 7).
  std::string term = "xterm-256color";
  /// How long a task's output must have been quiet before the executor
  /// looks at where its processes are blocked (the look itself is the
  /// evidence; this only spares the look while output flows).
  std::chrono::milliseconds quiet{100};
  /// The longest a look is put off while the task stays quiet and busy:
  /// looks back off from `quiet` to this.
  std::chrono::milliseconds max_interval{400};
  /// The longest `write_input` waits for a full terminal or pipe to take
  /// bytes; what was not written by then is reported, never dropped silently.
  std::chrono::milliseconds write_timeout{2000};
  /// The most bytes of an input wait's prompt (the text after the output's
  /// last newline).
  std::size_t prompt_bytes = 256;
};

/// A running task's command waits for input — a fact read from the kernel,
/// never a guess from its output or a timer (docs/terminals.md): after its
/// output went quiet, a process of the command is blocked reading its
/// terminal or its stdin pipe (in the terminal's foreground process group),
/// and no process of the command can make progress without input.
struct input_wait {
  /// When the executor first saw the command waiting (this wait).
  std::chrono::system_clock::time_point since{};
  /// The text after the output's last newline (at most
  /// terminal_settings::prompt_bytes, whole UTF-8 characters): what a
  /// person would read as the question.
  std::string prompt;
  /// The process blocked reading, as the executor's pid namespace numbers it.
  int pid = 0;
  /// The terminal is in non-canonical mode: a full-screen program or a
  /// single-key prompt waits for a key, not a line.
  bool raw = false;
  /// The blocked call: "read", "poll", "select" or "epoll_wait".
  std::string call;
};

/// Input for a task that cannot take it: the task settled, its input was
/// closed, or it never had one (started without a terminal or kept stdin).
class input_closed : public std::runtime_error {
 public:
  input_closed(const task_id& id, const std::string& why)
      : std::runtime_error("task " + id.value() + ": " + why), id_(id) {}
  const task_id& id() const noexcept { return id_; }

 private:
  task_id id_;
};

}  // namespace bashexec

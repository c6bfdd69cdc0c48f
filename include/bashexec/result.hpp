// result: what a run or a background task reports back — collected output,
// sandbox facts, exit facts, task snapshots and incremental reads.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "bashexec/containment.hpp"
#include "bashexec/detail/text/enum_names.hpp"
#include "bashexec/ids.hpp"
#include "bashexec/network_policy.hpp"
#include "bashexec/sandbox_mode.hpp"
#include "bashexec/shell_state.hpp"
#include "bashexec/terminal.hpp"

namespace bashexec {

/// One stream as collected under its cap (contract 5).
struct collected_output {
  /// The tail of the stream, at most the cap.
  std::string text;
  /// True when bytes were dropped from memory (the spill file has them all).
  bool truncated = false;
  /// The full-stream spill file; empty when there is none or closing it failed.
  std::optional<std::filesystem::path> spill_path;
};

/// The sandbox facts of one confined (or deliberately unconfined) run.
struct sandbox_info {
  sandbox_mode mode = sandbox_mode::read_only;
  /// The command failed because the sandbox refused a file effect.
  bool denied = false;
  /// Empty for `danger-full-access`, which is not confined.
  std::optional<enforcement> level;
  /// The confinement itself failed: the command never ran.
  bool runner_failed = false;
  /// The backend that confined it ("bwrap", "landlock", "runner_command"):
  /// a chain's selected candidate. Empty for `danger-full-access`.
  std::string_view backend;
};

/// A settled foreground run (contract 2–4).
struct run_result {
  std::optional<int> exit_code;
  /// The signal that ended the shell, as a number (see `signal_name`).
  std::optional<int> signal;
  bool timed_out = false;
  bool aborted = false;
  /// True when the shell exited but descendants still held its output open
  /// past the drain period and were killed.
  bool leftovers_killed = false;
  std::chrono::milliseconds timeout{};
  collected_output out;
  collected_output err;
  std::optional<sandbox_info> sandbox;
  /// What contained it: what its kills and leftover rule reached, and what
  /// would have killed it had the executor's process died (containment.hpp).
  containment_mechanism containment = containment_mechanism::process_group;
  /// Under `sandbox.network = allowlist`: every connection the command tried
  /// through the egress proxy, in order, bounded (network_policy.hpp). Empty
  /// under any other setting.
  std::optional<network_report> network;
  /// The command ran on a terminal (exec_request::terminal): `out` holds
  /// stdout and stderr merged, as the terminal showed them; `err` is empty.
  bool terminal = false;
  /// A terminal run that began waiting for input (terminal.hpp) returned
  /// here, with the output so far: the command goes on as this task,
  /// owned by the request's owner, to be answered with `write_input`.
  std::optional<task_id> continued_as;
  /// The wait that ended the run, when `continued_as` is set.
  std::optional<bashexec::input_wait> input_wait;
  /// With exec_request::capture_state: the shell's state at its exit. Empty
  /// when it did not exit by itself (a signal, a timeout, an abort) or the
  /// state could not be taken; then `state_notice` says why.
  std::optional<shell_state> final_state;
  std::optional<std::string> state_notice;
};

enum class task_status { running, completed, killed };

template <>
struct detail::enum_names<task_status> {
  static constexpr enum_table<task_status, 3> table{
      {{task_status::running, "running"}, {task_status::completed, "completed"}, {task_status::killed, "killed"}}};
};

/// A copy of a background task's facts at one moment.
struct task_snapshot {
  task_id id;
  std::string command;
  task_status status = task_status::running;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<sandbox_info> sandbox;
  /// What contains it (see run_result::containment).
  containment_mechanism containment = containment_mechanism::process_group;
  /// The owner stored with it (the ownership policy's `keep`), verbatim; a
  /// completion listener reads it here even once the task is forgotten.
  std::optional<owner_token> owner{};
  /// Why the command did not run: its spawn failed, or the executor could
  /// not watch it and killed it at once (the task settled as killed, the
  /// reason also in its stderr). Empty for a task that started.
  std::optional<std::string> start_error{};
  /// As run_result::network: the attempts so far while it runs, all of them
  /// once it settled.
  std::optional<network_report> network{};
  /// Runs on a terminal of its own (its output merges stderr).
  bool terminal = false;
  /// Takes input (`write_input`): a terminal, or a stdin kept open, not
  /// yet closed, while the task runs.
  bool input_open = false;
  /// While it runs: the command waits for input (terminal.hpp). Cleared
  /// by the next output or input.
  std::optional<bashexec::input_wait> input_wait{};
};

/// An incremental read of a background task (contract 6).
struct task_read {
  task_snapshot task;
  /// New stdout bytes, then (when stderr has new bytes) `[stderr]\n` and them.
  std::string delta;
  /// Some bytes since the last read slid out of memory; see the spill paths.
  bool lossy = false;
  std::optional<std::filesystem::path> stdout_spill_path;
  std::optional<std::filesystem::path> stderr_spill_path;
};

}  // namespace bashexec

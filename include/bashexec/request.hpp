// request: what a caller asks for (`exec_request`) and what the executor
// resolved it to (`exec_spec`, every default applied and validated).
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "bashexec/ids.hpp"
#include "bashexec/run_progress.hpp"
#include "bashexec/sandbox_mode.hpp"
#include "bashexec/terminal.hpp"

namespace bashexec {

/// The fields of a request and of its resolution, written once: `Field<T>`
/// is `std::optional<T>` in a request (the gap `resolve` fills) and plain
/// `T` once resolved. An aggregate, so `exec_request{.command = "…"}` works.
template <template <class> class Field>
struct basic_exec_request {
  std::string command{};
  Field<std::filesystem::path> workdir{};
  Field<std::chrono::milliseconds> timeout{};
  /// In-memory cap of stdout only; stderr keeps the executor's `output_cap`.
  Field<std::size_t> stdout_max_bytes{};
  /// Requested before the spawn, `run` and `start` throw infrastructure_error
  /// and nothing runs; requested later, the process group is stopped (TERM,
  /// KILL after the grace): a run is `aborted`, a task settles killed.
  std::stop_token stop{};
  /// Written to the child's stdin, which is then closed. Without it stdin is
  /// /dev/null; an empty string is still a pipe.
  std::optional<std::string> stdin_data{};
  /// Merged last into the scrubbed environment: an explicit entry wins.
  std::optional<std::map<std::string, std::string>> env{};
  std::optional<owner_token> owner{};
  std::optional<sandbox_mode> mode{};
  /// Names this one call may reach besides `sandbox.egress.allowed_domains`
  /// (exact names or `*.` wildcards), under `sandbox.network = allowlist`
  /// only: what an approved network escalation widens (tools/escalation.hpp).
  /// `denied_domains` still wins, and the address rules still hold.
  std::vector<std::string> network_grants{};
  /// When set, a foreground `run` keeps its byte counts there as it reads
  /// (a background task ignores it: `read_output` is its progress).
  std::shared_ptr<run_progress> progress{};
  /// Run on a pseudo-terminal of its own with this window (terminal.hpp):
  /// the terminal's slave is the command's stdin, stdout, stderr and
  /// controlling terminal, so line discipline, echo, ^C and /dev/tty work.
  /// stderr is merged into stdout, as on any terminal. A foreground `run`
  /// that starts waiting for input returns at once as such and goes on as
  /// a task (run_result::continued_as). Not with `stdin_data`
  /// (std::invalid_argument): a terminal's input is typed with write_input.
  std::optional<terminal_size> terminal{};
  /// A background task's stdin stays a pipe open for `write_input` (after
  /// `stdin_data`, when given) until `close_input`. A terminal's input is
  /// always open.
  bool keep_stdin_open = false;
  /// Report the shell's final working directory and exported environment
  /// (run_result::final_state, shell_state.hpp), captured by the shell
  /// itself at its exit into a file of the executor's — never read from
  /// its output. A foreground run on pipes only; ignored by `start`.
  bool capture_state = false;
  /// Names removed from the child's environment (after the scrub, before
  /// `env`): what a carried state's `unset` says.
  std::vector<std::string> env_unset{};
};

namespace detail {
/// A field `resolve` always sets.
template <class T>
using resolved = T;
}  // namespace detail

/// One command to run. Everything but `command` is optional; `resolve`
/// fills the gaps from the executor's configuration (contract 1).
using exec_request = basic_exec_request<std::optional>;

/// A resolved request: workdir, timeout and stdout cap are always set.
using exec_spec = basic_exec_request<detail::resolved>;

}  // namespace bashexec

// detail/engine/shell_state_capture: how a shell's final state reaches the
// executor (exec_request::capture_state, shell_state.hpp) — from the shell
// itself, through a file of the executor's, never from its output.
//
// The command runs as `shell -c WRAPPER SHELL COMMAND`: the wrapper (fixed
// text) sets an EXIT trap and evaluates COMMAND ($0 stays the shell, no
// positional parameters, as for `shell -c COMMAND`). At the shell's exit —
// by the end of the command or by `exit N`, not by a signal — the trap
// writes one record to the state file, inherited as a descriptor of its
// own, with builtins only (`builtin pwd -P`, `builtin export -p`,
// `builtin printf`; no subshell, which would cost a fork):
//   "bashexec-state-2\0" <cwd> ["\n"] "\0" <export -p> "\0end\0"
// where `export -p` is bash's own listing, one variable a line
// (`declare -x NAME="value"`, `$'...'` for control characters, `export
// NAME=...` in POSIX mode), read back by a strict parser of that quoting;
// then exits with the command's status. The file is a memory file
// (memfd) of the executor's: the trap never blocks on it whatever the size,
// and it has no name anything else could open. The executor reads at most
// `limit` bytes of it after the shell exited; a record that is longer,
// truncated, or malformed is dropped with a notice (`state_notice`): a
// command may break its own capture (close the descriptor, replace the
// EXIT trap), never make the executor take something it would not take
// from `cd` and `export`. What is taken is then filtered (credential names,
// the executor's own variables) and diffed against the environment the
// call would start with without carried state.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bashexec/config.hpp"
#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/shell_state.hpp"

namespace bashexec::detail {

/// The wrapper script for a state written to descriptor `fd` of the shell.
BASHEXEC_DECL std::string state_wrapper(int fd);

/// A record as the trap wrote it.
struct state_record {
  std::string cwd;
  std::vector<std::pair<std::string, std::string>> env;
};

/// The record in `bytes`, or empty with `why` set (truncated, malformed).
BASHEXEC_DECL std::optional<state_record> parse_state_record(std::string_view bytes, std::string& why);

/// Variables never carried: the executor's own settings and the shell's
/// bookkeeping (see shell_state::env).
BASHEXEC_DECL bool is_uncarried_name(std::string_view name);

/// `record` as a shell_state against `baseline` ("NAME=value" entries: the
/// environment a call starts with when nothing is carried).
BASHEXEC_DECL shell_state carried_state(const state_record& record, const std::vector<std::string>& baseline,
                                        const environment_scrub& scrub);

/// An unnamed memory file for the record (memfd), never numbered 0-2.
BASHEXEC_DECL unique_fd make_state_file();

/// What the shell left in `file`: its state, or empty with `why` set.
BASHEXEC_DECL std::optional<shell_state> read_state_file(int file, std::size_t limit,
                                                         const std::vector<std::string>& baseline,
                                                         const environment_scrub& scrub, std::string& why);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/engine/impl/shell_state_capture.ipp"
#endif

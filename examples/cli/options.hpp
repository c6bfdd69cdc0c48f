// The bashexec CLI's command-line parsing: one small struct per subcommand,
// strict about unknown flags, with the help texts next to the flags.
#pragma once

#include <charconv>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <bashexec/network_access.hpp>
#include <bashexec/sandbox_mode.hpp>

namespace bashexec::cli {

/// A command-line mistake: printed with a pointer to --help, exit status 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr std::string_view main_help = R"(bashexec — run shell commands for AI coding agents, confined and bounded.

Usage:
  bashexec run [--mode MODE | --unconfined] [--network NET] [--workdir DIR] [--timeout MS] [--json] -- COMMAND
  bashexec serve [--mode MODE | --unconfined] [--network NET] [--workdir DIR] [--session-dir DIR]
                 [--approve never|always|ask]
  bashexec tools [--mode MODE | --unconfined]
  bashexec --help | --version

Subcommands:
  run     Run one command and print the model-facing result text (or --json).
  serve   A JSON-lines tool server on stdin/stdout for harnesses in any language.
  tools   Print the JSON schemas of the bash, bash_output and bash_kill tools.

Modes: read-only (default), workspace-write, danger-full-access (runs unconfined).
Network (confined calls only): full (default), loopback, none.
Run `bashexec SUBCOMMAND --help` for the details of one subcommand.
)";

inline constexpr std::string_view run_help = R"(Usage: bashexec run [options] -- COMMAND

Runs COMMAND with `bash -c` in its own process group and prints the result
text a model would see: stdout, a [stderr] section, then markers such as
[sandbox: file access denied under read-only mode] and [exit code: N].

Options:
  --mode MODE     read-only (default), workspace-write or danger-full-access
  --unconfined    no sandbox at all (same as --mode danger-full-access)
  --network NET   full (default), loopback (a private loopback only) or none
  --workdir DIR   working directory, and the workspace root writes go to
                  under workspace-write (default: the current directory)
  --timeout MS    kill the command's process group after MS milliseconds
                  (default 120000, at most 600000)
  --json          print the whole run result as one JSON object instead
  -h, --help      this text

Exit status: the command's own exit code; 128+N when a signal N killed it;
125 when it could not run at all (bad workdir, no usable sandbox), with a
one-line reason on stderr; 2 for a command-line mistake.
)";

inline constexpr std::string_view serve_help = R"(Usage: bashexec serve [options]

A JSON-lines tool server: one JSON request per input line, exactly one
response line per request, requests handled concurrently.

  {"id": 1, "session": "s1", "tool": "bash", "args": {"command": "ls", "description": "list"}}
    -> {"id": 1, "text": "...", "is_error": false}
  {"id": 2, "op": "tools"}                                   -> {"id": 2, "tools": [...], ...}
  {"id": 3, "op": "set_mode", "session": "s1", "mode": "workspace-write"}
  {"id": 4, "op": "approve", "approval": 7, "outcome": "allowed-once"}
A "session" (any string, "" included) owns the background tasks it starts;
without one (absent or null) they are ownerless and open to every caller.
Unprompted lines: {"notice": "...", "session": "s1"} when a background task
settles, and {"approval": {...}} questions under --approve ask.
End of input: in-flight requests finish, background tasks are killed, exit 0.

Options:
  --mode MODE         the default mode of every session (default read-only)
  --unconfined        no sandbox (same as --mode danger-full-access)
  --network NET       full (default), loopback or none, for every confined call
  --workdir DIR       every session's working directory and workspace root
  --session-dir DIR   where session logs (mode overrides) are kept
                      (default: a private directory under $XDG_RUNTIME_DIR or /var/tmp —
                      never /tmp, which workspace-write may grant)
  --approve POLICY    escalation requests: never (default), always, or ask
  -h, --help          this text
)";

inline constexpr std::string_view tools_help = R"(Usage: bashexec tools [--mode MODE | --unconfined]

Prints the JSON array of tool schemas a harness gives its model. Under a
sandbox (any mode but danger-full-access) the bash tool also offers
sandbox_permissions and justification, the approval-gated escalation.
)";

enum class approval_policy { never, always, ask };

struct common_options {
  sandbox_mode mode = sandbox_mode::read_only;
  network_access network = network_access::full;
  std::optional<std::string> workdir;
  bool confined() const { return mode != sandbox_mode::danger_full_access; }
};

struct run_options : common_options {
  std::optional<std::chrono::milliseconds> timeout;
  bool json = false;
  std::string command;
};

struct serve_options : common_options {
  std::optional<std::string> session_dir;
  approval_policy approve = approval_policy::never;
};

/// Walks argv after the subcommand; `--flag value` and `--flag=value` both work.
class arguments {
 public:
  explicit arguments(std::vector<std::string_view> args) : args_(std::move(args)) {}

  bool done() const { return index_ >= args_.size(); }
  std::string_view peek() const { return args_[index_]; }

  /// The next argument; for `--flag=value` splits it and keeps the value.
  std::string_view next() {
    std::string_view arg = args_[index_++];
    if (arg.starts_with("--") && arg.find('=') != std::string_view::npos) {
      pending_value_ = arg.substr(arg.find('=') + 1);
      return arg.substr(0, arg.find('='));
    }
    pending_value_.reset();
    return arg;
  }

  std::string_view value(std::string_view flag) {
    if (pending_value_) return *std::exchange(pending_value_, std::nullopt);
    if (done()) throw usage_error(fmt::format("{} needs a value", flag));
    return args_[index_++];
  }

  /// Everything left, joined by spaces (the command after `--`).
  std::string rest() {
    std::string joined;
    for (; index_ < args_.size(); ++index_) {
      if (!joined.empty()) joined += ' ';
      joined += args_[index_];
    }
    return joined;
  }

 private:
  std::vector<std::string_view> args_;
  std::size_t index_ = 0;
  std::optional<std::string_view> pending_value_;
};

inline sandbox_mode parse_mode(std::string_view text) {
  if (auto mode = parse_sandbox_mode(text)) return *mode;
  throw usage_error(
      fmt::format("--mode: unknown mode \"{}\" (read-only, workspace-write or danger-full-access)", text));
}

/// Handles the flags every subcommand shares; false when `flag` is not one.
inline bool parse_common(std::string_view flag, arguments& args, common_options& options) {
  if (flag == "--mode") {
    options.mode = parse_mode(args.value(flag));
  } else if (flag == "--unconfined") {
    options.mode = sandbox_mode::danger_full_access;
  } else if (flag == "--workdir") {
    options.workdir = std::string(args.value(flag));
  } else if (flag == "--network") {
    auto value = args.value(flag);
    auto access = parse_network_access(value);
    if (!access) throw usage_error(fmt::format("--network: expected full, loopback or none, got \"{}\"", value));
    options.network = *access;
  } else {
    return false;
  }
  return true;
}

inline std::chrono::milliseconds parse_timeout(std::string_view text) {
  long long ms = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (error != std::errc{} || end != text.data() + text.size() || ms <= 0)
    throw usage_error(fmt::format("--timeout: expected a positive number of milliseconds, got \"{}\"", text));
  return std::chrono::milliseconds(ms);
}

inline approval_policy parse_approval(std::string_view text) {
  if (text == "never") return approval_policy::never;
  if (text == "always") return approval_policy::always;
  if (text == "ask") return approval_policy::ask;
  throw usage_error(fmt::format("--approve: expected never, always or ask, got \"{}\"", text));
}

[[noreturn]] inline void unknown_flag(std::string_view subcommand, std::string_view flag) {
  throw usage_error(fmt::format("{}: unknown option {}", subcommand, flag));
}

}  // namespace bashexec::cli

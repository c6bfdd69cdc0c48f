// The bashexec CLI's command-line parsing: one small struct per subcommand,
// strict about unknown flags, with the help texts next to the flags.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <bashexec/config.hpp>
#include <bashexec/containment.hpp>
#include <bashexec/network_access.hpp>
#include <bashexec/network_policy.hpp>
#include <bashexec/sandbox_mode.hpp>
#include <bashexec/server/options.hpp>

namespace bashexec::cli {

/// A command-line mistake: printed with a pointer to --help, exit status 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr std::string_view main_help = R"(bashexec — run shell commands for AI coding agents, confined and bounded.

Usage:
  bashexec run [--mode MODE | --unconfined] [--network NET] [--workdir DIR] [--timeout MS] [--json]
               [--prespawn N] -- COMMAND
  bashexec serve [--mode MODE | --unconfined] [--network NET] [--workdir DIR] [--session-dir DIR]
                 [--carry cwd,env] [--approve never|always|ask] [--max-in-flight N] [--prespawn N]
                 [--retain-tasks N] [--retain-bytes SIZE] [--retain-age TIME]
                 [--write-timeout TIME]
  bashexec mcp [--mode MODE | --unconfined] [--network NET] [--workdir DIR] [--session-dir DIR]
               [--session ID] [--carry cwd,env] [--approve never|always|ask] [--max-in-flight N]
               [--prespawn N]
               [--retain-tasks N] [--retain-bytes SIZE] [--retain-age TIME]
               [--write-timeout TIME]
               [--http ADDR:PORT [--token-file FILE] [--allow-host H:P] [--allow-origin O] [--executor-api]
                [--max-sessions N] [--session-idle-timeout TIME] [--request-timeout TIME]]
  bashexec tools [--mode MODE | --unconfined] [--carry WHAT]
  bashexec --help | --version

Subcommands:
  run     Run one command and print the model-facing result text (or --json).
  serve   A JSON-lines tool server on stdin/stdout for harnesses in any language.
  mcp     A Model Context Protocol server on stdin/stdout (Claude Code, Codex, SDKs),
          or over Streamable HTTP with --http.
  tools   Print the JSON schemas of the bash, bash_output and bash_kill tools.

Modes: read-only (default), workspace-write, danger-full-access (runs unconfined).
Network (confined calls only): full (default), loopback, none.
run, serve and mcp also take --containment, the --max-* resource limits, and
--backend auto|bwrap|landlock with --bwrap PATH and --setpriv PATH.
Run `bashexec SUBCOMMAND --help` for the details of one subcommand.
)";

inline constexpr std::string_view run_help = R"(Usage: bashexec run [options] -- COMMAND

Runs COMMAND with `bash -c` in its own process group and prints the result
text a model would see: stdout, a [stderr] section, then markers such as
[sandbox: file access denied under read-only mode] and [exit code: N].

Options:
  --mode MODE     read-only (default), workspace-write or danger-full-access
  --unconfined    no sandbox at all (same as --mode danger-full-access)
  --network NET   full (default), loopback (a private loopback only), none,
                  or allowlist: only the domains below, through the egress
                  proxy (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY point at it)
  --allow-domain D   allowlist: a name, or *.example.com for its subdomains
                     (not the apex); repeatable
  --deny-domain D    allowlist: refused even when allowed; repeatable
  --allow-range CIDR allowlist: an address range private or literal targets
                     may use (10.0.0.0/8); repeatable
  --network-methods M  allowlist: all (default) or read-only (plain-HTTP GET,
                     HEAD and OPTIONS; no HTTPS)
  --host NAME=ADDR   allowlist: resolve NAME to ADDR (a pinned host)
  --workdir DIR   working directory, and the workspace root writes go to
                  under workspace-write (default: the current directory)
  --timeout MS    kill the command's process group after MS milliseconds
                  (default 120000, at most 600000)
  --json          print the whole run result as one JSON object instead
  --prespawn N    accepted (1 to 64) for symmetry with serve and mcp; run
                  serves its one command cold and starts no pool
  -h, --help      this text

Exit status: the command's own exit code; 128+N when a signal N killed it;
125 when it could not run at all (bad workdir, no usable sandbox) or its
result could not be written to stdout, with a one-line reason on stderr; 2
for a command-line mistake. SIGINT, SIGTERM or SIGHUP to bashexec kills the
command's process group, removes its spill files and exits 128+N.

Truncated output: the full stream's spill file path is printed and the file
is kept after bashexec exits, in a 0700 directory of the user's own:
$XDG_RUNTIME_DIR/bashexec/bashexec-run, else /var/tmp/bashexec-run-UID, else
/dev/shm/bashexec-run-UID (a link or someone else's directory at a name is
passed over; with none, the path printed is (unavailable) and stderr says why),
readable by later commands and writable by no confined one. Each `run`
removes kept spill files of ended runs older than 24 hours, then the oldest
while all together exceed 1 GiB.
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
settles, and {"approval": {...}} questions under --approve ask, whose "text"
is what to show the person: the whole command, every line numbered, hidden
characters escaped (a request too long to show is refused, never cut).
Outcomes: allowed-once, rejected, cancelled, unavailable, and under
--network allowlist allowed-for-session (the names asked for stay granted to
the session, recorded in its log).
Limits per line: 16 MiB, nesting depth 64, 10000 JSON values, session ids
of at most 80 bytes; a line over a limit gets an error response (with its
"id" whenever it can be read) and the server keeps serving.
End of input: no more lines are read, pending approvals are cancelled, the
calls in flight run to their end (each within its own timeout) and are
answered, then background tasks are killed, exit 0 (`serve < requests.jsonl`
answers every line). SIGINT, SIGTERM, SIGHUP: no more lines are read, calls
in flight are aborted (their responses still written while stdout takes
them), background tasks are killed, exit 128+N. A client that stops reading
(a response waits --write-timeout for stdout to take a byte): the same as a
signal, its later responses dropped, exit 0.

Options:
  --mode MODE         the default mode of every session (default read-only)
  --unconfined        no sandbox (same as --mode danger-full-access)
  --network NET       full (default), loopback, none or allowlist, for every
                      confined call; with allowlist: --allow-domain D,
                      --deny-domain D, --allow-range CIDR, --network-methods
                      all|read-only, --host NAME=ADDR (see bashexec run --help)
  --workdir DIR       every session's working directory and workspace root
  --session-dir DIR   where session logs (mode overrides) are kept
                      (default: a private directory under $XDG_RUNTIME_DIR or /var/tmp —
                      never /tmp, which workspace-write may grant)
  --carry WHAT        what each session carries from one bash call to the
                      next: cwd (the working directory), env (exported
                      variables), cwd,env, or none (default: every call a
                      fresh shell). Kept in the session log; see
                      docs/shell-state.md
  --approve POLICY    escalation requests: never (default), always, or ask
  --max-in-flight N   tool calls running at once (default 32, at most 1024); a
                      call over the limit waits for a free slot, and reading
                      pauses meanwhile. A call waiting for approval holds none.
  --prespawn N        keep a pool of N processes (1 to 64) started ahead of
                      the calls, per confinement setup: a call takes one,
                      else starts cold. Costs N idle processes per setup in
                      use; not faster than cold on Linux today (see
                      docs/benchmarks.md, "Prespawned pool")
  --retain-tasks N    settled background tasks remembered (default 1000)
  --retain-bytes SIZE memory their output holds: 16777216, 512K, 16M, 1G
                      (powers of 1024; default 16M)
  --retain-age TIME   time since a task settled: 500ms, 90s, 10min, 1h
                      (default 1h)
                      Past any of the three the task that settled first is
                      forgotten: its spill files are removed, and bash_output
                      or bash_kill of its id answers that it was forgotten.
                      A running task is never forgotten.
  --write-timeout TIME  how long a response may wait for stdout to take any
                      byte of it (default 30s); past it the client counts as
                      gone and the server shuts down
  -h, --help          this text
)";

inline constexpr std::string_view mcp_help = R"(Usage: bashexec mcp [options]

A Model Context Protocol (MCP) server over the stdio transport: newline-
delimited JSON-RPC 2.0 on stdin/stdout, diagnostics on stderr only. Start it
from an MCP client's configuration, e.g.  claude mcp add bashexec -- bashexec mcp

Protocol versions 2025-11-25 (newest), 2025-06-18, 2025-03-26 and 2024-11-05:
the client's version when it is one of these, else 2025-11-25.
  tools/list      bash, bash_output, bash_kill with their JSON Schemas and
                  annotations (bash_output read-only; bash and bash_kill not)
  tools/call      {content: [{type: "text", text}], isError, structuredContent}
                  where text is the byte-exact result text `serve` answers and
                  structuredContent the call's facts, declared as each tool's
                  outputSchema (from 2025-06-18)
  tasks (2025-11-25)  a bash call with "task": {ttl?} answers a task at once
                  and runs as the plain call would; tasks/get, tasks/result
                  (the same CallToolResult), tasks/list, tasks/cancel (kills
                  the command), notifications/tasks/status on each change
  notifications/cancelled  aborts that call (its process group is killed);
                  no response follows
  _meta.progressToken      notifications/progress while the call runs
                  (elapsed seconds, bytes of output so far)
  logging/setLevel         background-task notices arrive as
                  notifications/message at level "notice"
  elicitation/create       asks the person about a sandbox_permissions
                  escalation when the client declared the capability (else
                  the outcome is "unavailable")
  batches         only under 2025-03-26, the one version that allows them
One connection is one session: it owns its background tasks, and its mode
override is read from --session-dir (a `bashexec serve` set_mode op on the
same directory and session id sets it). Limits per message as for serve:
16 MiB, nesting depth 64, 10000 JSON values. End of input (how MCP clients
shut a server down): no more messages are read, calls in flight are aborted,
background tasks are killed, exit 0. SIGINT, SIGTERM, SIGHUP: the same, then
exit 128+N. A client that stops reading: the same after --write-timeout.

Options:
  --mode MODE         the session's default mode (default read-only)
  --unconfined        no sandbox (same as --mode danger-full-access)
  --network NET       full (default), loopback, none or allowlist, for every
                      confined call; with allowlist: --allow-domain D,
                      --deny-domain D, --allow-range CIDR, --network-methods
                      all|read-only, --host NAME=ADDR (see bashexec run --help)
  --workdir DIR       the working directory and workspace root
  --session-dir DIR   where the session log (its mode override) is kept
                      (default: a private directory, removed at exit)
  --carry WHAT        what each session carries from one bash call to the
                      next: cwd (the working directory), env (exported
                      variables), cwd,env, or none (default: every call a
                      fresh shell). Kept in the session log; see
                      docs/shell-state.md
  --session ID        the session id: owner of its tasks, name of its log
                      (default "mcp"; 1 to 80 bytes)
  --approve POLICY    escalation requests: ask (default: elicitation when the
                      client supports it, else unavailable), always or never
  --max-in-flight N   tool calls running at once (default 32, at most 1024)
  --prespawn N        keep a pool of N processes (1 to 64) per confinement
                      setup, started ahead of the calls, as for serve
  --retain-tasks N, --retain-bytes SIZE, --retain-age TIME
                      which settled background tasks are remembered, as for
                      serve (defaults 1000 tasks, 16M, 1h)
  --write-timeout TIME  as for serve (default 30s)
  -h, --help          this text

Over HTTP (the Streamable HTTP transport of MCP 2025-11-25; docs/tool-protocol.md):
  --http ADDR:PORT    serve at http://ADDR:PORT/mcp instead of stdio (PORT 0:
                      any free port; the address is printed on stderr). Each
                      client session (MCP-Session-Id) is a session of its own:
                      it owns its tasks, its mode override lives in memory
  --token-file FILE   every request must carry `Authorization: Bearer TOKEN`,
                      TOKEN the file's first line (16+ visible ASCII
                      characters; the file readable by its owner only).
                      Required for any address but the loopback
  --allow-host HOST:PORT, --allow-origin ORIGIN
                      Host and Origin values admitted besides the bound
                      address's own (403 otherwise: DNS-rebinding protection)
  --max-sessions N    sessions at once (default 64; an initialize past it: 503)
  --session-idle-timeout TIME
                      a session without a request or an open stream for this
                      long is ended and its commands killed (default 30min)
  --executor-api      also serve the executor protocol at /exec/v1, for a C++
                      harness's bashexec::remote_executor (docs/remote.md):
                      byte-exact output, runs and tasks of the harness's own,
                      under the same token and checks; its sessions count
                      against --max-sessions and expire the same way. A
                      request names its own mode; under --approve never one
                      wider than --mode (or a network grant) is refused
  --request-timeout TIME
                      a request's header and body must arrive within this
                      from its first byte, or the connection is closed
                      (default 10s: a client sending a byte a second holds
                      nothing for long)
  A connection from one of this server's own commands is refused (403): under
  --network full they share the loopback. A dropped connection never stops a
  session's commands; DELETE, the idle timeout and SIGTERM do. SIGTERM: no new connection, calls in flight answer
  as aborted, every command is killed and reaped, exit 143.
  Health probes, answered without a token or Host check: GET /livez (200 while
  serving) and GET /readyz (200 when a session could open, 503 at
  --max-sessions or once shutting down).
)";

// serve_help states the library's retention defaults in words.
static_assert(task_retention{}.max_tasks == 1000 && task_retention{}.max_bytes == std::uint64_t{16} << 20 &&
                  task_retention{}.max_age == std::chrono::hours(1),
              "the retention defaults changed: update --retain-* in serve_help and docs/tool-protocol.md");

inline constexpr std::string_view tools_help = R"(Usage: bashexec tools [--mode MODE | --unconfined] [--carry WHAT]

Prints the JSON array of tool schemas a harness gives its model. Under a
sandbox (any mode but danger-full-access) the bash tool also offers
sandbox_permissions and justification, the approval-gated escalation.
With --carry (as for serve and mcp) the bash tool describes the carried
shell state and offers reset.
)";

/// `--approve`: the library server's policy.
using server::approval_policy;

struct common_options {
  sandbox_mode mode = sandbox_mode::read_only;
  network_access network = network_access::full;
  /// --allow-domain, --deny-domain, --allow-range, --network-methods, --host:
  /// the egress policy under --network allowlist.
  network_policy egress;
  /// The egress-policy flags given, in order: each needs --network allowlist.
  std::vector<std::string> egress_flags;
  std::optional<std::string> workdir;
  /// --containment and the per-process limits (executor_config's knobs).
  process_containment containment = process_containment::automatic;
  resource_limits limits;
  /// --prespawn N: serve calls from a warm pool of N per key (spawn_with<prespawned>).
  std::optional<std::size_t> prespawn;
  /// --backend: the one sandbox backend to use; empty for auto (bwrap, else Landlock).
  std::string backend;
  /// --bwrap PATH, --setpriv PATH: the programs bwrap confinement runs.
  std::optional<std::string> bwrap_program, setpriv_program;
  bool confined() const { return mode != sandbox_mode::danger_full_access; }
};

/// The help lines of the containment and limits flags, which `run`, `serve`
/// and `mcp` share.
inline constexpr std::string_view limits_help = R"(Containment and limits (every command of this process):
  --containment HOW   automatic (default: a cgroup per command where the host
                      allows it, else the process group), process-group, or
                      cgroup (an error when the host cannot)
  --max-processes N   RLIMIT_NPROC (per user id, system-wide; not enforced for root)
  --max-memory BYTES  RLIMIT_AS, virtual address space per process
  --max-cpu-time S    RLIMIT_CPU seconds per process (wall time is the timeout)
  --max-file-size BYTES  RLIMIT_FSIZE, the largest file a process may write
  --max-open-files N  RLIMIT_NOFILE
Sandbox backend (confined commands):
  --backend NAME      auto (default: bwrap where it works, else Landlock),
                      bwrap or landlock; --json results name the one used
  --bwrap PATH        the bubblewrap program (absolute; default: bwrap from
                      /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin,
                      never $PATH)
  --setpriv PATH      the setpriv program bwrap needs as root (likewise)
                      A program, or a directory above it, that someone other
                      than root or you could change, or that lies in the
                      workspace or /tmp, is refused (docs/security.md).
)";

struct run_options : common_options {
  std::optional<std::chrono::milliseconds> timeout;
  bool json = false;
  std::string command;
};

inline constexpr std::size_t default_max_in_flight = 32;
inline constexpr std::size_t max_max_in_flight = 1024;

struct serve_options : common_options {
  std::optional<std::string> session_dir;
  /// --carry: what each session carries from call to call.
  state_carry carry{};
  approval_policy approve = approval_policy::never;
  std::size_t max_in_flight = default_max_in_flight;
  /// The library's defaults unless a --retain-* flag says otherwise.
  task_retention retention;
  std::chrono::milliseconds write_timeout = server::server_options{}.write_timeout;
};

/// `mcp` takes `serve`'s options; escalations are asked through elicitation
/// by default, and the connection is one session.
struct mcp_options : serve_options {
  mcp_options() { approve = approval_policy::ask; }
  std::string session = "mcp";
  std::chrono::milliseconds progress_interval{500};
  /// --http ADDR:PORT and the HTTP transport's flags.
  std::optional<std::string> http_address;
  std::uint16_t http_port = 0;
  std::optional<std::string> token_file;
  std::vector<std::string> allow_hosts;
  std::vector<std::string> allow_origins;
  std::size_t max_sessions = 64;
  std::chrono::milliseconds session_idle_timeout{std::chrono::minutes(30)};
  std::chrono::milliseconds request_timeout{std::chrono::seconds(10)};
  /// --executor-api: serve the executor protocol at /exec/v1 too.
  bool executor_api = false;
};

/// --http ADDR:PORT: an IPv4 address or a bracketed IPv6 one, and a port
/// from 0 to 65535.
inline void parse_http_address(std::string_view text, mcp_options& options) {
  const auto colon = text.rfind(':');
  auto bad = [&] {
    return usage_error(fmt::format("--http: expected ADDRESS:PORT (127.0.0.1:8080, [::1]:8080), got \"{}\"", text));
  };
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) throw bad();
  std::string_view address = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (address.front() == '[') {
    if (address.size() < 3 || address.back() != ']') throw bad();
    address = address.substr(1, address.size() - 2);
  }
  unsigned value = 0;
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (error != std::errc{} || end != port.data() + port.size() || value > 65535) throw bad();
  options.http_address = std::string(address);
  options.http_port = static_cast<std::uint16_t>(value);
}

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

/// A whole positive number filling `text` (after any unit was cut off).
inline std::optional<std::uint64_t> positive_number(std::string_view text) {
  std::uint64_t n = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (error != std::errc{} || end != text.data() + text.size() || n == 0) return std::nullopt;
  return n;
}

/// A positive integer flag value (a count, bytes or seconds).
inline std::uint64_t parse_positive(std::string_view flag, std::string_view text) {
  if (auto n = positive_number(text)) return *n;
  throw usage_error(fmt::format("{}: expected a positive integer, got \"{}\"", flag, text));
}

/// A number of `what` (calls, processes) from 1 to `max`.
inline std::size_t parse_count(std::string_view flag, std::string_view text, std::string_view what, std::size_t max) {
  const auto n = positive_number(text);
  if (!n || *n > max)
    throw usage_error(fmt::format("{}: expected a number of {} from 1 to {}, got \"{}\"", flag, what, max, text));
  return static_cast<std::size_t>(*n);
}

/// --prespawn's range: the library's prespawn_settings::per_key (config.hpp).
inline constexpr std::size_t max_prespawn = bashexec::prespawn_settings::max_per_key;

inline process_containment parse_containment(std::string_view text) {
  if (text == "automatic") return process_containment::automatic;
  if (text == "process-group") return process_containment::process_group;
  if (text == "cgroup") return process_containment::cgroup;
  throw usage_error(fmt::format("--containment: expected automatic, process-group or cgroup, got \"{}\"", text));
}

/// Reads one egress-policy flag's value into `options.egress`; false when
/// `flag` is not one.
inline bool parse_egress_value(std::string_view flag, arguments& args, common_options& options) {
  if (flag == "--allow-domain") {
    options.egress.allowed_domains.emplace_back(args.value(flag));
  } else if (flag == "--deny-domain") {
    options.egress.denied_domains.emplace_back(args.value(flag));
  } else if (flag == "--allow-range") {
    options.egress.allowed_ranges.emplace_back(args.value(flag));
  } else if (flag == "--network-methods") {
    const auto value = args.value(flag);
    auto methods = parse_network_methods(value);
    if (!methods) throw usage_error(fmt::format("--network-methods: expected all or read-only, got \"{}\"", value));
    options.egress.methods = *methods;
  } else if (flag == "--host") {
    const auto value = args.value(flag);
    const auto equals = value.find('=');
    if (equals == std::string_view::npos || equals == 0 || equals + 1 == value.size())
      throw usage_error(fmt::format("--host: expected NAME=ADDRESS, got \"{}\"", value));
    options.egress.host_map[std::string(value.substr(0, equals))] = std::string(value.substr(equals + 1));
  } else {
    return false;
  }
  return true;
}

/// Parses one of the egress-policy flags and checks the policy so far: a bad
/// value is a usage error (exit 2) naming the flag and the policy's field.
inline bool parse_egress_flag(std::string_view flag, arguments& args, common_options& options) {
  if (!parse_egress_value(flag, args, options)) return false;
  if (std::find(options.egress_flags.begin(), options.egress_flags.end(), flag) == options.egress_flags.end())
    options.egress_flags.emplace_back(flag);
  try {
    options.egress.validate();
  } catch (const std::invalid_argument& error) {
    throw usage_error(fmt::format("{}: {}", flag, error.what()));
  }
  return true;
}

/// Refuses an egress-policy flag without --network allowlist: the policy
/// applies only through the egress proxy, so every command would otherwise
/// have the network the mode gives (full by default) while the person who
/// wrote --allow-domain believes it restricted.
inline void check_network_flags(const common_options& options) {
  if (options.egress_flags.empty() || proxies_network(options.network)) return;
  std::string flags;
  for (const auto& flag : options.egress_flags) flags += (flags.empty() ? "" : ", ") + flag;
  throw usage_error(fmt::format("{}: {} only with --network allowlist (this command line gives every command the "
                                "network \"{}\"); add --network allowlist, or leave {} out",
                                flags, options.egress_flags.size() == 1 ? "applies" : "apply",
                                to_string(options.network), options.egress_flags.size() == 1 ? "it" : "them"));
}

/// Handles the flags every subcommand shares; false when `flag` is not one.
inline bool parse_common(std::string_view flag, arguments& args, common_options& options) {
  if (flag == "--containment") {
    options.containment = parse_containment(args.value(flag));
  } else if (flag == "--max-processes") {
    options.limits.max_processes = parse_positive(flag, args.value(flag));
  } else if (flag == "--max-memory") {
    options.limits.max_address_space_bytes = parse_positive(flag, args.value(flag));
  } else if (flag == "--max-cpu-time") {
    options.limits.max_cpu_time = std::chrono::seconds(parse_positive(flag, args.value(flag)));
  } else if (flag == "--max-file-size") {
    options.limits.max_file_size_bytes = parse_positive(flag, args.value(flag));
  } else if (flag == "--max-open-files") {
    options.limits.max_open_files = parse_positive(flag, args.value(flag));
  } else if (flag == "--mode") {
    options.mode = parse_mode(args.value(flag));
  } else if (flag == "--unconfined") {
    options.mode = sandbox_mode::danger_full_access;
  } else if (flag == "--prespawn") {
    options.prespawn = parse_count(flag, args.value(flag), "processes", max_prespawn);
  } else if (flag == "--workdir") {
    options.workdir = std::string(args.value(flag));
  } else if (flag == "--backend") {
    const auto value = args.value(flag);
    if (value != "auto" && value != "bwrap" && value != "landlock")
      throw usage_error(fmt::format("--backend: expected auto, bwrap or landlock, got \"{}\"", value));
    options.backend = value == "auto" ? "" : std::string(value);
  } else if (flag == "--bwrap" || flag == "--setpriv") {
    const auto value = args.value(flag);
    if (!value.starts_with('/')) throw usage_error(fmt::format("{}: expected an absolute path, got \"{}\"", flag, value));
    (flag == "--bwrap" ? options.bwrap_program : options.setpriv_program) = std::string(value);
  } else if (flag == "--network") {
    auto value = args.value(flag);
    auto access = parse_network_access(value);
    if (!access)
      throw usage_error(fmt::format("--network: expected full, loopback, none or allowlist, got \"{}\"", value));
    options.network = *access;
  } else if (parse_egress_flag(flag, args, options)) {
    // the egress policy (--network allowlist)
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

/// `text` without the unit suffix `unit`, when it ends in it.
inline std::optional<std::string_view> without_suffix(std::string_view text, std::string_view unit) {
  if (!text.ends_with(unit)) return std::nullopt;
  return text.substr(0, text.size() - unit.size());
}

inline std::size_t parse_max_in_flight(std::string_view text) {
  return parse_count("--max-in-flight", text, "calls", max_max_in_flight);
}

inline std::size_t parse_retain_tasks(std::string_view text) {
  const auto n = positive_number(text);
  if (!n || *n > std::numeric_limits<std::size_t>::max())
    throw usage_error(fmt::format("--retain-tasks: expected a positive number of tasks, got \"{}\"", text));
  return static_cast<std::size_t>(*n);
}

/// "16777216", "512K", "16M", "1G" (also "KiB", "MiB", "GiB"): powers of 1024.
inline std::uint64_t parse_retain_bytes(std::string_view text) {
  static constexpr std::pair<std::string_view, unsigned> units[] = {
      {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"K", 10}, {"M", 20}, {"G", 30}};
  std::string_view digits = text;
  unsigned shift = 0;
  for (const auto& [unit, unit_shift] : units)
    if (auto cut = without_suffix(text, unit)) {
      digits = *cut;
      shift = unit_shift;
      break;
    }
  const auto n = positive_number(digits);
  if (!n || *n > (std::numeric_limits<std::uint64_t>::max() >> shift))
    throw usage_error(fmt::format(
        "--retain-bytes: expected a positive size such as 16777216, 512K, 16M or 1G, got \"{}\"", text));
  return *n << shift;
}

/// "500ms", "90s", "10min", "1h" (a unit is required: a bare number would
/// be read as seconds by some and milliseconds by others).
inline std::chrono::milliseconds parse_duration(std::string_view flag, std::string_view text) {
  static constexpr std::pair<std::string_view, std::uint64_t> units[] = {
      {"ms", 1}, {"min", 60000}, {"s", 1000}, {"h", 3600000}};
  for (const auto& [unit, ms_per_unit] : units)
    if (auto cut = without_suffix(text, unit))
      if (auto n = positive_number(*cut);
          n && *n <= static_cast<std::uint64_t>(std::chrono::milliseconds::max().count()) / ms_per_unit)
        return std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(*n * ms_per_unit));
  throw usage_error(
      fmt::format("{}: expected a positive duration such as 500ms, 90s, 10min or 1h, got \"{}\"", flag, text));
}

/// `--carry cwd|env|cwd,env|none`.
inline state_carry parse_carry(std::string_view text) {
  if (auto carry = parse_state_carry(text)) return *carry;
  throw usage_error(fmt::format("--carry: expected cwd, env, cwd,env or none, got \"{}\"", text));
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

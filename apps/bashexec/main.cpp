// The `bashexec` command-line program: `run` one command, `serve` the tools
// as JSON lines or over MCP (`mcp`), or print the `tools` schemas — for people trying bashexec
// and for harnesses written in languages other than C++.
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <type_traits>
#include <stop_token>
#include <utility>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <bashexec/bashexec.hpp>
#include <bashexec/server/json_lines_server.hpp>
#include <bashexec/server/http_guard.hpp>
#include <bashexec/server/http_sessions.hpp>
#include <bashexec/server/mcp_server.hpp>
#include <bashexec/tools/bash_tools.hpp>
#include <bashexec/tools/render.hpp>
#include <bashexec/tools/result_json.hpp>

#include "executors.hpp"
#include "mcp_http.hpp"
#include "options.hpp"
#include "signals.hpp"
#include "temp_dirs.hpp"

namespace bashexec::cli {
namespace {

constexpr int exit_cannot_run = 125;
constexpr int exit_usage = 2;

/// Writes all of `text` to stdout; false (errno set) when it could not,
/// e.g. stdout is closed (`>&-`) or its reader went away (EPIPE).
bool write_stdout(std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(STDOUT_FILENO, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

/// A note on stderr. fmt::print throws when the write fails; a closed or
/// broken stderr must not turn a note into std::terminate.
template <class... Args>
void note(fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    const std::string text = fmt::format(format, std::forward<Args>(args)...);
    std::string_view rest = text;
    while (!rest.empty()) {
      const ssize_t n = ::write(STDERR_FILENO, rest.data(), rest.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
  } catch (...) {
  }
}

/// `text` on stdout, ending in exactly one newline of its own; false when
/// the output was lost (the reason is then on stderr).
bool print_result(std::string text) {
  if (!text.ends_with('\n')) text += '\n';
  if (write_stdout(text)) return true;
  note("bashexec: the result could not be written to stdout: {}\n", std::strerror(errno));
  return false;
}

/// A closed stdin, stdout or stderr would be reused by the first descriptor
/// the executor opens (a pipe, a spill file), and our output would land in
/// it. A closed one is therefore reopened as /dev/null read-only: reads see
/// end of input, writes fail with EBADF, so a lost output is still noticed.
void occupy_closed_stdio() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int opened = ::open("/dev/null", O_RDONLY);
    if (opened >= 0 && opened != fd) {
      ::dup2(opened, fd);
      ::close(opened);
    }
  }
}

const char* signal_label(int signo) {
  switch (signo) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
  }
  return "a signal";
}

int exit_status(const run_result& result) {
  if (result.signal) return 128 + *result.signal;
  return result.exit_code.value_or(exit_cannot_run);
}

/// Reads a subcommand's flags in order. -h/--help prints `help` and
/// --version the version, and nothing runs: their exit status is returned.
/// Every other flag goes to `take(flag, args)`, which returns false for a
/// flag it does not know.
template <class Take>
std::optional<int> read_flags(std::string_view subcommand, std::vector<std::string_view> argv,
                              std::string_view help, Take&& take) {
  arguments args(std::move(argv));
  while (!args.done()) {
    auto flag = args.next();
    if (flag == "-h" || flag == "--help") return fmt::print("{}", help), 0;
    if (flag == "--version") return fmt::print("bashexec {}\n", version), 0;
    if (!take(flag, args)) unknown_flag(subcommand, flag);
  }
  return std::nullopt;
}

/// A subcommand's help followed by the containment and limits flags.
std::string with_limits_help(std::string_view help) { return fmt::format("{}\n{}", help, limits_help); }

int run_command(std::vector<std::string_view> argv) {
  run_options options;
  const auto answered = read_flags("run", std::move(argv), with_limits_help(run_help), [&](auto flag, auto& args) {
    if (flag == "--")
      options.command = args.rest();  // takes every argument left
    else if (flag == "--timeout")
      options.timeout = parse_timeout(args.value(flag));
    else if (flag == "--json")
      options.json = true;
    else if (!flag.starts_with("-"))
      throw usage_error(fmt::format("run: put the command after --, as in: bashexec run -- '{}'", flag));
    else
      return parse_common(flag, args, options);
    return true;
  });
  if (answered) return *answered;
  check_network_flags(options);
  if (options.command.empty()) throw usage_error("run: no command given (bashexec run [options] -- COMMAND)");
  // One command, served cold: a pool would start processes nothing uses.
  options.prespawn.reset();

  signal_watch& signals = signal_watch::start();  // already started by main: no thread before it
  sweep_leftovers();
  // `run` exits right after printing, so a spill path it prints must outlive
  // it: its spill directory goes into this user's kept directory, and stays
  // when a path was printed.
  const auto workspace = options.workdir ? std::filesystem::absolute(*options.workdir) : std::filesystem::current_path();
  std::string why_not_kept;
  const held_directory kept = open_kept_spills(workspace, why_not_kept);
  if (kept) prune_kept_spills(kept.fd.get());
  const int status = with_executor(options, [&](auto& executor) {
    std::stop_source abort;
    const auto on_signal = signals.on_signal([&abort] { abort.request_stop(); });
    exec_request request;
    request.command = options.command;
    request.timeout = options.timeout;
    request.stop = abort.get_token();
    // Nothing is kept unless a printed path points into it.
    auto forget_spills = [&executor, &kept] {
      if (auto dir = executor.spill_directory(); kept && !dir.empty())
        detail::remove_tree_at(kept.fd.get(), dir.filename().string());
    };
    try {
      run_result result = executor.run(executor.resolve(std::move(request)));
      if (signals.received()) return forget_spills(), 0;  // killed for our signal: no result to print
      if (!kept && (result.out.spill_path || result.err.spill_path)) {
        // Removed with the executor: a printed path would point at nothing.
        result.out.spill_path.reset();
        result.err.spill_path.reset();
        note("bashexec: the full output cannot be kept after exit, so no path is printed: {}\n", why_not_kept);
      }
      const bool written = print_result(options.json ? to_json(result).dump() : render_run_result(result, false));
      if (!written || !(result.out.spill_path || result.err.spill_path)) forget_spills();
      if (kept) prune_kept_spills(kept.fd.get());  // the total, with this run's files counted
      return written ? exit_status(result) : exit_cannot_run;
    } catch (const std::exception& e) {
      forget_spills();
      if (signals.received()) return 0;
      note("bashexec: {}\n", e.what());
      return exit_cannot_run;
    }
  }, [&kept, &workspace](executor_config& config) {
    if (!kept) return;  // spill files die with the executor; their paths are not printed
    config.spill_parent = kept.path;
    config.keep_spill_dir = true;  // removed above unless a printed path points into it
    // Earlier runs' kept files too must stay read-only under a workspace that
    // holds them (a workspace of `/`).
    if (auto inside = path_inside(kept.path, workspace)) config.sandbox.protected_paths.push_back(*inside);
  });
  // The executor is gone here: the command's group is killed and reaped, and
  // the spill files are gone unless the printed result names them.
  if (const int signo = signals.received()) {
    note("bashexec: stopped by {}; the command was killed\n", signal_label(signo));
    return 128 + signo;
  }
  return status;
}

int tools_command(std::vector<std::string_view> argv) {
  common_options options;
  state_carry carry;
  const auto answered = read_flags("tools", std::move(argv), tools_help, [&](auto flag, auto& args) {
    if (flag == "--carry") {
      carry = parse_carry(args.value(flag));
      return true;
    }
    return parse_common(flag, args, options);
  });
  if (answered) return *answered;
  check_network_flags(options);
  // The schemas depend on whether the executor confines and on what
  // sessions carry (every executor the CLI builds takes input: `tty` and
  // bash_input).
  fmt::print("{}\n", tool_schemas(options.confined(), false, true, carry).dump(2));
  return 0;
}

/// The flags `serve` and `mcp` share; false when `flag` is not one.
bool parse_server_flag(std::string_view flag, arguments& args, serve_options& options) {
  if (parse_common(flag, args, options)) return true;
  if (flag == "--session-dir")
    options.session_dir = std::string(args.value(flag));
  else if (flag == "--carry")
    options.carry = parse_carry(args.value(flag));
  else if (flag == "--approve")
    options.approve = parse_approval(args.value(flag));
  else if (flag == "--max-in-flight")
    options.max_in_flight = parse_max_in_flight(args.value(flag));
  else if (flag == "--retain-tasks")
    options.retention.max_tasks = parse_retain_tasks(args.value(flag));
  else if (flag == "--retain-bytes")
    options.retention.max_bytes = parse_retain_bytes(args.value(flag));
  else if (flag == "--retain-age")
    options.retention.max_age = parse_duration(flag, args.value(flag));
  else if (flag == "--write-timeout")
    options.write_timeout = parse_duration(flag, args.value(flag));
  else
    return false;
  return true;
}

/// The library's options of the server a subcommand runs.
server::server_options server_options_of(const serve_options& options) {
  server::server_options out;
  out.approve = options.approve;
  out.carry = options.carry;
  out.max_in_flight = options.max_in_flight;
  out.write_timeout = options.write_timeout;
  return out;
}

server::mcp_server_options server_options_of(const mcp_options& options) {
  server::mcp_server_options out;
  out.approve = options.approve;
  out.carry = options.carry;
  out.max_in_flight = options.max_in_flight;
  out.write_timeout = options.write_timeout;
  out.session = options.session;
  out.progress_interval = options.progress_interval;
  return out;
}

/// Serves with `Server` (`json_lines_server` or `mcp_server`) on stdin and
/// stdout until end of input or a signal.
template <template <class> class Server>
struct over_stdio {
  template <class Executor, class Served>
  void operator()(Executor& executor, Served served, signal_watch& signals) const {
    Server<Executor> server(executor, std::move(served));
    const auto on_signal = signals.on_signal([&server] { server.stop(); });
    server.serve();
  }
};

/// Runs a server until it ends or a signal: the session directory (a
/// private one unless --session-dir), the executor, `serve(executor,
/// server options, signals)`, and the cleanup after it.
template <class Options, class Serve>
int run_server(const Options& options, Serve&& serve) {
  std::filesystem::path session_dir;
  std::optional<session_directory> private_dir;  // removed last, after the executor
  sweep_leftovers();
  if (options.session_dir) {
    session_dir = std::filesystem::absolute(*options.session_dir);
  } else {
    // Not under /tmp: workspace-write grants /tmp under Landlock, and a
    // confined command must not be able to edit another session's log.
    try {
      session_dir = private_dir.emplace(session_base()).path();
    } catch (const std::exception& e) {
      note("bashexec: cannot create a session directory: {}\n", e.what());
      return exit_cannot_run;
    }
  }
  signal_watch& signals = signal_watch::start();  // already started by main, before any thread
  int status = 0;
  try {
    status = with_executor(options, [&](auto& executor) {
      auto served = server_options_of(options);
      served.session_dir = session_dir;
      served.workdir = options.workdir ? std::filesystem::absolute(*options.workdir) : std::filesystem::current_path();
      serve(executor, std::move(served), signals);
      return 0;
      // Leaving this scope destroys the server, then the executor: every
      // background task is killed and reaped, the spill files removed.
    }, [&options, &session_dir](executor_config& config) {
      config.retention = options.retention;
      // Under a workspace that holds them (a workspace of `/`), the session
      // logs stay read-only to workspace-write commands too.
      if (auto inside = path_inside(session_dir, config.cwd.value_or(std::filesystem::current_path())))
        config.sandbox.protected_paths.push_back(*inside);
    });
  } catch (const std::exception& e) {
    note("bashexec: {}\n", e.what());
    status = exit_cannot_run;
  }
  if (const int signo = signals.received()) return 128 + signo;
  return status;
}

int serve_command(std::vector<std::string_view> argv) {
  serve_options options;
  const auto answered = read_flags("serve", std::move(argv), with_limits_help(serve_help),
                                   [&](auto flag, auto& args) { return parse_server_flag(flag, args, options); });
  if (answered) return *answered;
  check_network_flags(options);
  return run_server(options, over_stdio<server::json_lines_server>{});
}

int mcp_command(std::vector<std::string_view> argv) {
  mcp_options options;
  const auto answered = read_flags("mcp", std::move(argv), with_limits_help(mcp_help), [&](auto flag, auto& args) {
    if (flag == "--http")
      return parse_http_address(args.value(flag), options), true;
    if (flag == "--token-file")
      return options.token_file = std::string(args.value(flag)), true;
    if (flag == "--allow-host")
      return options.allow_hosts.emplace_back(args.value(flag)), true;
    if (flag == "--allow-origin")
      return options.allow_origins.emplace_back(args.value(flag)), true;
    if (flag == "--max-sessions")
      return options.max_sessions = parse_count(flag, args.value(flag), "sessions", 4096), true;
    if (flag == "--request-timeout")
      return options.request_timeout = parse_duration(flag, args.value(flag)), true;
    if (flag == "--session-idle-timeout")
      return options.session_idle_timeout = parse_duration(flag, args.value(flag)), true;
    if (flag == "--executor-api") return options.executor_api = true, true;
    if (flag != "--session") return parse_server_flag(flag, args, options);
    options.session = std::string(args.value(flag));
    if (options.session.empty() || options.session.size() > server::request_limits{}.max_session_bytes)
      throw usage_error(
          fmt::format("--session: expected an id of 1 to {} bytes", server::request_limits{}.max_session_bytes));
    return true;
  });
  if (answered) return *answered;
  check_network_flags(options);
  if (!options.http_address) {
    if (options.token_file || !options.allow_hosts.empty() || !options.allow_origins.empty() || options.executor_api)
      throw usage_error("mcp: --token-file, --allow-host, --allow-origin and --executor-api need --http ADDR:PORT");
    return run_server(options, over_stdio<server::mcp_server>{});
  }
  // Refused before anything starts, as a usage error.
  try {
    if (options.token_file) (void)server::http::read_token_file(*options.token_file);
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what());
  }
  if (!options.token_file && !server::http::is_loopback_address(*options.http_address))
    throw usage_error(fmt::format("--http {}: any address but the loopback needs --token-file (whoever reaches it "
                                  "could run commands)",
                                  *options.http_address));
  return run_server(options, [&options](auto& executor, server::mcp_server_options served, signal_watch& signals) {
    std::shared_ptr<server::executor_api_backend> api;
    if (options.executor_api) {
      server::executor_api_options api_options;
      api_options.idle_timeout = options.session_idle_timeout;
      api_options.max_sessions = options.max_sessions;
      if (options.approve == server::approval_policy::never) {
        // No model may escalate here, so no harness may either.
        api_options.max_mode = executor.default_mode();
        api_options.allow_network_grants = false;
      }
      api = server::executor_api(executor, api_options);
    }
    serve_mcp_http(server::mcp_sessions(executor, std::move(served)), std::move(api), options, signals);
  });
}

int main_impl(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) {
    note("{}", std::string_view(main_help));
    return exit_usage;
  }
  const std::string_view subcommand = args.front();
  std::vector<std::string_view> rest(args.begin() + 1, args.end());
  try {
    if (subcommand == "-h" || subcommand == "--help" || subcommand == "help") return fmt::print("{}", main_help), 0;
    if (subcommand == "--version" || subcommand == "version") return fmt::print("bashexec {}\n", version), 0;
    if (subcommand == "run") return run_command(std::move(rest));
    if (subcommand == "serve") return serve_command(std::move(rest));
    if (subcommand == "mcp") return mcp_command(std::move(rest));
    if (subcommand == "tools") return tools_command(std::move(rest));
    throw usage_error(fmt::format("unknown subcommand {} (run, serve, mcp, tools)", subcommand));
  } catch (const usage_error& e) {
    note("bashexec: {}\nRun `bashexec --help` for usage.\n", e.what());
    return exit_usage;
  } catch (const std::exception& e) {
    // E.g. printing --help to a closed stdout: fmt::print throws.
    note("bashexec: {}\n", e.what());
    return exit_cannot_run;
  }
}

}  // namespace
}  // namespace bashexec::cli

int main(int argc, char** argv) {
  // First: no command this process runs — an unconfined one included — may
  // read its environment, memory or descriptors through /proc (non-root
  // commands; docs/security.md, "Embedding the executor").
  try {
    bashexec::harden_host_process();
  } catch (const std::exception& e) {
    bashexec::cli::note("bashexec: {}\n", e.what());
    return bashexec::cli::exit_cannot_run;
  }
  // A harness that closes our stdout must not kill us mid-cleanup; children
  // still start with default dispositions (the spawn policies reset them).
  std::signal(SIGPIPE, SIG_IGN);
  bashexec::cli::occupy_closed_stdio();
  // Before any other thread exists, so that every thread inherits the mask.
  auto& signals = bashexec::cli::signal_watch::start();
  const int status = bashexec::cli::main_impl(argc, argv);
  if (const int signo = signals.received()) return 128 + signo;
  return status;
}

// The `bashexec` command-line program: `run` one command, `serve` the tools
// as JSON lines, or print the `tools` schemas — for people trying bashexec
// and for harnesses written in languages other than C++.
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <bashexec/bashexec.hpp>
#include <bashexec/tools/bash_tools.hpp>
#include <bashexec/tools/render.hpp>
#include <bashexec/tools/result_json.hpp>

#include "options.hpp"
#include "serve.hpp"

namespace bashexec::cli {
namespace {

constexpr int exit_cannot_run = 125;
constexpr int exit_usage = 2;

executor_config make_config(const common_options& options) {
  executor_config config;
  if (options.workdir) config.cwd = std::filesystem::absolute(*options.workdir);
  config.sandbox.default_mode = options.mode;
  config.sandbox.network = options.network;
  return config;
}

/// Runs `body` with the executor the options ask for: the sandboxing one
/// unless the mode is danger-full-access.
template <class Body>
int with_executor(const common_options& options, Body&& body) {
  if (options.confined()) {
    sandbox_executor executor(make_config(options));
    return body(executor);
  }
  local_executor executor(make_config(options));
  return body(executor);
}

/// `text` on stdout, ending in exactly one newline of its own.
void print_line(const std::string& text) {
  fmt::print("{}{}", text, text.ends_with('\n') ? "" : "\n");
}

int exit_status(const run_result& result) {
  if (result.signal) return 128 + *result.signal;
  return result.exit_code.value_or(exit_cannot_run);
}

int run_command(std::vector<std::string_view> argv) {
  arguments args(std::move(argv));
  run_options options;
  while (!args.done()) {
    auto flag = args.next();
    if (flag == "--") {
      options.command = args.rest();
      break;
    }
    if (flag == "-h" || flag == "--help") return fmt::print("{}", run_help), 0;
    if (flag == "--version") return fmt::print("bashexec {}\n", version), 0;
    if (parse_common(flag, args, options)) continue;
    if (flag == "--timeout") {
      options.timeout = parse_timeout(args.value(flag));
    } else if (flag == "--json") {
      options.json = true;
    } else if (flag.starts_with("-")) {
      unknown_flag("run", flag);
    } else {
      throw usage_error(fmt::format("run: put the command after --, as in: bashexec run -- '{}'", flag));
    }
  }
  if (options.command.empty()) throw usage_error("run: no command given (bashexec run [options] -- COMMAND)");

  return with_executor(options, [&](auto& executor) {
    exec_request request;
    request.command = options.command;
    request.timeout = options.timeout;
    try {
      const run_result result = executor.run(executor.resolve(std::move(request)));
      if (options.json)
        fmt::print("{}\n", to_json(result).dump());
      else
        print_line(render_run_result(result, false));
      return exit_status(result);
    } catch (const std::exception& e) {
      fmt::print(stderr, "bashexec: {}\n", e.what());
      return exit_cannot_run;
    }
  });
}

int tools_command(std::vector<std::string_view> argv) {
  arguments args(std::move(argv));
  common_options options;
  while (!args.done()) {
    auto flag = args.next();
    if (flag == "-h" || flag == "--help") return fmt::print("{}", tools_help), 0;
    if (flag == "--version") return fmt::print("bashexec {}\n", version), 0;
    if (!parse_common(flag, args, options)) unknown_flag("tools", flag);
  }
  // The schemas depend only on whether the executor confines.
  fmt::print("{}\n", tool_schemas(options.confined()).dump(2));
  return 0;
}

int serve_command(std::vector<std::string_view> argv) {
  arguments args(std::move(argv));
  serve_options options;
  while (!args.done()) {
    auto flag = args.next();
    if (flag == "-h" || flag == "--help") return fmt::print("{}", serve_help), 0;
    if (flag == "--version") return fmt::print("bashexec {}\n", version), 0;
    if (parse_common(flag, args, options)) continue;
    if (flag == "--session-dir")
      options.session_dir = std::string(args.value(flag));
    else if (flag == "--approve")
      options.approve = parse_approval(args.value(flag));
    else
      unknown_flag("serve", flag);
  }
  std::filesystem::path session_dir;
  std::optional<std::filesystem::path> private_dir;
  if (options.session_dir) {
    session_dir = std::filesystem::absolute(*options.session_dir);
  } else {
    // Not under /tmp: workspace-write grants /tmp under Landlock, and a
    // confined command must not be able to edit another session's log.
    const char* runtime = std::getenv("XDG_RUNTIME_DIR");
    std::filesystem::path base = runtime && *runtime && std::filesystem::is_directory(runtime) ? runtime : "/var/tmp";
    std::string templ = (base / "bashexec-sessions-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) {
      fmt::print(stderr, "bashexec: cannot create a session directory: {}\n", std::strerror(errno));
      return exit_cannot_run;
    }
    session_dir = templ;
    private_dir = session_dir;
  }
  int status = 0;
  try {
    status = with_executor(options, [&](auto& executor) {
      std::filesystem::path workdir = options.workdir ? std::filesystem::absolute(*options.workdir)
                                                      : std::filesystem::current_path();
      tool_server server(executor, options, session_dir, workdir);
      server.serve(std::cin);
      return 0;
    });
  } catch (const std::exception& e) {
    fmt::print(stderr, "bashexec: {}\n", e.what());
    status = exit_cannot_run;
  }
  if (private_dir) {
    std::error_code ignored;
    std::filesystem::remove_all(*private_dir, ignored);
  }
  return status;
}

int main_impl(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) {
    fmt::print(stderr, "{}", main_help);
    return exit_usage;
  }
  const std::string_view subcommand = args.front();
  std::vector<std::string_view> rest(args.begin() + 1, args.end());
  try {
    if (subcommand == "-h" || subcommand == "--help" || subcommand == "help") return fmt::print("{}", main_help), 0;
    if (subcommand == "--version" || subcommand == "version") return fmt::print("bashexec {}\n", version), 0;
    if (subcommand == "run") return run_command(std::move(rest));
    if (subcommand == "serve") return serve_command(std::move(rest));
    if (subcommand == "tools") return tools_command(std::move(rest));
    throw usage_error(fmt::format("unknown subcommand {} (run, serve, tools)", subcommand));
  } catch (const usage_error& e) {
    fmt::print(stderr, "bashexec: {}\nRun `bashexec --help` for usage.\n", e.what());
    return exit_usage;
  }
}

}  // namespace
}  // namespace bashexec::cli

int main(int argc, char** argv) {
  // A harness that closes our stdout must not kill us mid-cleanup; children
  // still start with default dispositions (the spawn policies reset them).
  std::signal(SIGPIPE, SIG_IGN);
  return bashexec::cli::main_impl(argc, argv);
}

// tools/schemas: the JSON Schemas of the `bash`, `bash_output`, `bash_kill`
// and `bash_input` tools, and the descriptions that teach a model how to use
// them (docs/contract.md items 18, 20, 26). Each tool is
//   {"name": …, "description": …, "input_schema": {JSON Schema of the arguments}}.
// `sandbox_permissions` and `justification` appear only when escalation is
// advertised, that is, when the executor confines; `tty` and the
// `bash_input` tool only when the executor takes input (interactive);
// `reset`, and a description of the carried state instead of "no shell
// state persists", only where sessions carry it (tools/carried_state.hpp).
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "bashexec/tools/carried_state.hpp"

namespace bashexec {

inline constexpr std::string_view bash_tool_name = "bash";
inline constexpr std::string_view bash_output_tool_name = "bash_output";
inline constexpr std::string_view bash_kill_tool_name = "bash_kill";
inline constexpr std::string_view bash_input_tool_name = "bash_input";
/// Every tool a server may dispatch; `bash_input` answers only over an
/// executor that takes input (bash_tools).
inline constexpr std::array tool_names{bash_tool_name, bash_output_tool_name, bash_kill_tool_name,
                                       bash_input_tool_name};

namespace detail {

inline constexpr std::string_view bash_description_intro =
    "Run a shell command with `bash -c` and return what it printed.\n";

inline constexpr std::string_view bash_fresh_shell_description =
    "- No shell state persists between calls: every call is a fresh shell, so `cd`, `export` and "
    "variables are forgotten. To run somewhere else pass `workdir` (relative paths resolve against "
    "the session's working directory) rather than prefixing `cd dir &&`.\n";

/// What a session carrying its state is told instead, by what it carries.
inline std::string bash_carried_description(state_carry carry) {
  std::string what = carry.cwd && carry.env ? "the working directory (`cd`) and exported variables (`export`, "
                                              "`source .venv/bin/activate`)"
                     : carry.cwd           ? "the working directory (`cd`)"
                                           : "exported variables (`export`, `source .venv/bin/activate`)";
  return "- Each call is a new shell, but " + what +
         " carry over to the next call when the command exits by itself (not when it is killed or times "
         "out). Plain shell variables, aliases and functions do not. Background and `tty` calls start from "
         "the carried state but carry nothing forward. A result that starts with `[cwd: dir]` ran there "
         "(relative to the session's working directory). Pass `reset: true` to start over from the session's "
         "working directory and environment.\n";
}

inline constexpr std::string_view bash_markers_description =
    "- Check the `[exit code: N]` marker: it is the last line whenever the command exited non-zero "
    "(`[killed by signal: NAME]` when a signal ended it); no marker means exit code 0. Output the "
    "command wrote to stderr follows a `[stderr]` line. Long output keeps its end and names a file "
    "holding all of it.\n";

inline constexpr std::string_view bash_stdin_description =
    "- stdin is empty: programs that wait for input get end-of-file, interactive programs do not work.\n";

inline constexpr std::string_view bash_tty_description =
    "- stdin is empty unless `tty` is true. With `tty` the command runs on a terminal of its own: prompts "
    "(`[Y/n]`, `read -p`, passwords), REPLs (`python3 -i`), `git add -p` and full-screen programs work, and "
    "stderr is merged into the output. When the command stops to wait for input the call returns at once "
    "with `[waiting for input: \"<prompt>\"; answer with bash_input on bash-N]`: it keeps running as task "
    "bash-N, and bash_input answers it. Prefer non-interactive flags (`-y`, `--yes`) where they exist.\n";

inline constexpr std::string_view bash_description_tail =
    "- A foreground command is killed after `timeoutMs` (`[timed out after Nms]`). For servers, "
    "watchers and other long-running commands use `run_in_background`, then `bash_output` and `bash_kill`.";

inline constexpr std::string_view bash_sandbox_description =
    "\n- Commands run in a sandbox that limits which files they may change (read-only < "
    "workspace-write < danger-full-access). `[sandbox: file access denied under <mode> mode]` means "
    "the sandbox refused a file effect: that is policy, not a bug. Do not retry around it (other "
    "paths, other tools, copies, tricks). The one sanctioned retry is the same command again with "
    "`sandbox_permissions` set to the mode it needs and a `justification`; a person is asked to "
    "approve that single call, and the calls after it are sandboxed as before.";

inline nlohmann::json string_property(std::string_view description) {
  return {{"type", "string"}, {"description", description}};
}

inline nlohmann::json tool_schema(std::string_view name, std::string_view description, nlohmann::json properties,
                                  nlohmann::json required) {
  return {{"name", name},
          {"description", description},
          {"input_schema",
           {{"type", "object"},
            {"properties", std::move(properties)},
            {"required", std::move(required)},
            {"additionalProperties", false}}}};
}

}  // namespace detail

/// The JSON Schema of `bash`.
/// `network_advertised`: the executor's network is an allowlist, so
/// `network_permissions` is offered beside `sandbox_permissions`.
/// `interactive`: the executor takes input, so `tty` is offered (and bash_input).
/// `carry`: what sessions carry from call to call, so that `reset` is offered.
inline nlohmann::json bash_tool_schema(bool escalation_advertised, bool network_advertised = false,
                                       bool interactive = false, state_carry carry = {}) {
  nlohmann::json properties = {
      {"command", detail::string_property("The command to run, as one bash script.")},
      {"description", detail::string_property("What the command does, in 5-10 words, for the person watching.")},
      {"timeoutMs",
       {{"type", "integer"},
        {"minimum", 1},
        {"description",
         "Foreground timeout in milliseconds (default 120000; values above the maximum, 600000 unless "
         "configured otherwise, are clamped). Not used with run_in_background."}}},
      {"workdir", detail::string_property("Directory to run in; a relative path resolves against the session's "
                                          "working directory, which is also the default.")},
      {"run_in_background",
       {{"type", "boolean"},
        {"description",
         "Start the command in the background and return its task id (bash-N) at once; no timeout "
         "applies. Read its output with bash_output, stop it with bash_kill."}}},
  };
  std::string description(detail::bash_description_intro);
  if (carry.cwd)
    properties["workdir"] = detail::string_property(
        "Directory to run in; a relative path resolves against the carried directory (the one the last "
        "call ended in), else the session's working directory.");
  if (carry.any()) {
    description += detail::bash_carried_description(carry);
    properties["reset"] = {{"type", "boolean"},
                           {"description",
                            "Forget the carried shell state first: run in the session's working directory with its "
                            "starting environment."}};
  } else {
    description += detail::bash_fresh_shell_description;
  }
  description += detail::bash_markers_description;
  description += interactive ? detail::bash_tty_description : detail::bash_stdin_description;
  description += detail::bash_description_tail;
  if (interactive)
    properties["tty"] = {{"type", "boolean"},
                         {"description",
                          "Run the command on a terminal of its own, for programs that ask questions or need a "
                          "terminal. If it waits for input the call returns with the output so far and the task id "
                          "to answer with bash_input."}};
  if (escalation_advertised) {
    description += detail::bash_sandbox_description;
    properties["sandbox_permissions"] = {
        {"type", "string"},
        {"enum", {"workspace-write", "danger-full-access"}},
        {"description",
         "Only after a sandbox denial: run this one call under a wider sandbox mode. Must be wider than the "
         "session's current mode, requires `justification`, and a person must approve it."}};
    properties["justification"] =
        detail::string_property("Why this command needs the wider sandbox mode, in one sentence for the person "
                                "approving it. Required with, and only with, sandbox_permissions.");
  }
  if (escalation_advertised && network_advertised) {
    properties["network_permissions"] = {
        {"type", "array"},
        {"items", {{"type", "string"}}},
        {"minItems", 1},
        {"maxItems", 16},
        {"description",
         "Only after a `[network: blocked …]` line: names this one call may reach besides the allowed domains "
         "(\"pypi.org\", or \"*.npmjs.org\" for its subdomains). Requires `justification`, and a person must "
         "approve it; denied domains stay denied."}};
    properties["justification"] = detail::string_property(
        "Why this command needs the wider sandbox mode or the extra network names, in one sentence for the "
        "person approving it. Required with, and only with, sandbox_permissions or network_permissions.");
  }
  return detail::tool_schema(bash_tool_name, description, std::move(properties), {"command", "description"});
}

/// The JSON Schema of `bash_output`.
inline nlohmann::json bash_output_tool_schema() {
  return detail::tool_schema(
      bash_output_tool_name,
      "Read what a background task (started with run_in_background) printed since the last read, then its "
      "status: `[status: running]`, `[status: completed, exit code: N]` or `[status: killed by SIGNAL]`. "
      "`(no new output)` means nothing new was printed; `[waiting for input: \"<prompt>\"]` means it waits for "
      "an answer (bash_input).",
      {{"task_id", detail::string_property("The id run_in_background returned, like bash-1.")}}, {"task_id"});
}

/// The JSON Schema of `bash_kill`.
inline nlohmann::json bash_kill_tool_schema() {
  return detail::tool_schema(
      bash_kill_tool_name,
      "Stop a background task and everything it started (SIGTERM, then SIGKILL after a grace period). "
      "Killing a task that already finished does nothing and says so.",
      {{"task_id", detail::string_property("The id run_in_background returned, like bash-1.")}}, {"task_id"});
}

/// The JSON Schema of `bash_input`.
inline nlohmann::json bash_input_tool_schema() {
  return detail::tool_schema(
      bash_input_tool_name,
      "Type into a running task's terminal (or its open stdin), then wait until it waits for input again, "
      "finishes, or `wait_ms` passes; answers like bash_output. `input` is sent as is: end a line with \"\\n\" "
      "to press Enter; \"\\u0003\" is Ctrl-C, \"\\u0004\" Ctrl-D (end of input), \"\\u001b\" Escape, "
      "\"\\u001b[A\" / \"\\u001b[B\" the up / down arrows. A password prompt does not echo what you type.",
      {{"task_id", detail::string_property("The task waiting for input, like bash-1.")},
       {"input", detail::string_property("What to type, e.g. \"y\\n\".")},
       {"wait_ms",
        {{"type", "integer"},
         {"minimum", 0},
         {"maximum", 600000},
         {"description",
          "How long to wait for the task to ask again or finish (default 10000). 0 answers at once."}}}},
      {"task_id", "input"});
}

/// The tool schemas, in the order `bash`, `bash_output`, `bash_kill`, and
/// with `interactive` `bash_input`.
inline nlohmann::json tool_schemas(bool escalation_advertised, bool network_advertised = false,
                                   bool interactive = false, state_carry carry = {}) {
  auto schemas = nlohmann::json::array({bash_tool_schema(escalation_advertised, network_advertised, interactive, carry),
                                        bash_output_tool_schema(), bash_kill_tool_schema()});
  if (interactive) schemas.push_back(bash_input_tool_schema());
  return schemas;
}

}  // namespace bashexec

// tools/bash_tools: the model-facing `bash`, `bash_output` and `bash_kill`
// tools over any executor (docs/contract.md items 18-21), and over an
// executor that takes input `bash`'s `tty` and the `bash_input` tool
// (items 26-27): each call's
// arguments (tools/arguments.hpp), its sandbox mode and approval-gated
// escalation (tools/escalation.hpp), the owner fence, the run or start, and
// the result text (tools/render.hpp). `call` never throws and never forwards
// model-supplied `stdin`, `env` or any key it does not know.
//
// A `bash_tools` made with a `state_carry` carries each session's working
// directory and/or exported environment from call to call (item 29,
// tools/carried_state.hpp): the state is read from the session's log, given
// to the executor as request data, captured from the shell at its exit and
// written back as a `shell-state` event when it changed.
//
// Task owners are the executor's: the fence asks `may_access`, and a
// completion notice goes to the owner the settled task's snapshot carries,
// so no record of its own races the executor's (a task that settles before
// `start` returns, or one the retention policy forgets before its notice is
// delivered).
//
// An executor usable here is a `tool_executor` (bashexec/executor.hpp): every
// `bashexec::executor` is one, and so is a test double with only the tools'
// part.
#pragma once

#include <algorithm>
#include <concepts>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/errors.hpp"
#include "bashexec/executor.hpp"
#include "bashexec/ids.hpp"
#include "bashexec/request.hpp"
#include "bashexec/result.hpp"
#include "bashexec/run_progress.hpp"
#include "bashexec/sandbox_mode.hpp"
#include "bashexec/session/session_log.hpp"
#include "bashexec/terminal.hpp"
#include "bashexec/tools/approval.hpp"
#include "bashexec/tools/arguments.hpp"
#include "bashexec/tools/carried_state.hpp"
#include "bashexec/tools/escalation.hpp"
#include "bashexec/tools/render.hpp"
#include "bashexec/tools/result_json.hpp"
#include "bashexec/tools/schemas.hpp"
#include "bashexec/tools/utf8.hpp"

namespace bashexec {

/// What a tool call answers the model. `is_error` marks calls that did not
/// do what was asked (bad arguments, refused escalation, infrastructure
/// failure, abort); a command that exited non-zero is not an error.
struct tool_result {
  std::string text;
  bool is_error = false;
  /// The call's facts as JSON (`tool_facts`: exit code, timed out, denied,
  /// task id, status), for clients that read fields rather than text; empty
  /// for a call that failed before it ran anything.
  std::optional<nlohmann::json> facts{};

  /// What the model sees: the facts only restate the text.
  friend bool operator==(const tool_result& a, const tool_result& b) {
    return a.text == b.text && a.is_error == b.is_error;
  }
};

/// Who is calling and from where.
struct call_context {
  /// The calling session: owner of the background tasks it starts, and the
  /// only session that may read or kill them. Any token is an owner, the
  /// empty string included (contract 11); no session at all (`nullopt`)
  /// starts ownerless tasks and may use only ownerless ones.
  std::optional<owner_token> session;
  /// The session's working directory: the default `workdir`, and the base a
  /// relative one resolves against. Empty: the executor's default.
  std::filesystem::path cwd;
  /// The session's log, holding its sandbox-mode override and its network
  /// grants; may be null.
  const session_log* log = nullptr;
  /// The same log, writable: where an `allowed-for-session` answer to a
  /// network escalation records its names, and where a carried shell state
  /// lives. Null: such an answer grants that one call only (as
  /// allowed-once), and no state is carried.
  session_log* grant_log = nullptr;
  /// Asked before a call runs under a wider mode; empty: nobody can approve.
  approval_callback approve;
  /// Aborts a foreground run (the run is then an error result); a
  /// background start it cancels starts nothing (or kills what it started).
  std::stop_token stop;
  /// When set, a foreground run keeps its byte counts there while it runs.
  std::shared_ptr<run_progress> progress;
};

/// Receives the owner of a settled background task (`nullopt` for an
/// ownerless one; an empty token is a session like any other) and the notice
/// to show that session (`render_task_notice`).
using notice_callback = std::function<void(const std::optional<owner_token>& owner, const std::string& notice)>;

/// The three tools over one executor, shared by every session of a harness.
/// Holds a reference to the executor, which must outlive it. Thread-safe as
/// far as the executor is.
///
/// With a notice callback, every background task of the executor that
/// settles is announced to its owner — one `bash_tools` per executor, so
/// that each task is announced once.
template <tool_executor Executor>
class bash_tools {
  /// The listener this object registers; a named type so that the
  /// subscription type is known.
  struct settled_listener {
    bash_tools* self;
    void operator()(const task_snapshot& task) const { self->on_settled(task); }
  };
  using subscription_type = decltype(std::declval<Executor&>().on_task_done(std::declval<settled_listener>()));

 public:
  /// `carry`: what each session carries from call to call (default:
  /// nothing, every call a fresh shell).
  explicit bash_tools(Executor& executor, notice_callback on_notice = {}, state_carry carry = {})
      : executor_(executor),
        on_notice_(std::move(on_notice)),
        carry_(carry),
        root_(carry.any() ? default_root(executor) : std::filesystem::path()),
        subscription_(executor.on_task_done(settled_listener{this})) {}

  bash_tools(const bash_tools&) = delete;
  bash_tools& operator=(const bash_tools&) = delete;

  /// True when the executor confines, so that `sandbox_permissions` and
  /// `justification` are offered to the model.
  bool escalation_advertised() const { return executor_.default_mode().has_value(); }

  /// True when, besides, the executor's network is an allowlist, so that
  /// `network_permissions` is offered (an executor without `config()` never
  /// offers it).
  bool network_escalation_advertised() const {
    if constexpr (requires { executor_.config().sandbox.network; })
      return escalation_advertised() && proxies_network(executor_.config().sandbox.network);
    else
      return false;
  }

  /// True when the executor's tasks take input: `tty` and `bash_input`.
  static constexpr bool input_advertised() { return interactive_executor<Executor>; }

  /// What sessions carry from call to call.
  state_carry carried() const noexcept { return carry_; }

  /// The JSON array of the `bash`, `bash_output` and `bash_kill` schemas
  /// (and `bash_input` when input is advertised).
  nlohmann::json schemas() const {
    return tool_schemas(escalation_advertised(), network_escalation_advertised(), input_advertised(), carry_);
  }

  /// The mode a call of this session runs under without escalation: the
  /// session override, else the executor default; empty when the executor
  /// never confines.
  std::optional<sandbox_mode> effective_mode(const call_context& context) const {
    return bashexec::effective_mode(executor_.default_mode(), context.log);
  }

  /// Runs one tool call. Never throws: every failure is an error result.
  tool_result call(std::string_view tool_name, const nlohmann::json& args, const call_context& context) {
    try {
      try {
        if (tool_name == bash_tool_name) return call_bash(args, context);
        if (tool_name == bash_output_tool_name) return call_output(args, context);
        if (tool_name == bash_kill_tool_name) return call_kill(args, context);
        if constexpr (input_advertised())
          if (tool_name == bash_input_tool_name) return call_input(args, context);
        return error(fmt::format("unknown tool {}; the tools are {}", tool_args::quoted(tool_name),
                                 input_advertised() ? "bash, bash_output, bash_kill and bash_input"
                                                    : "bash, bash_output and bash_kill"));
      } catch (const tool_args::argument_error& e) {
        return error(e.message);
      } catch (const unknown_task& e) {
        return error(to_valid_utf8(e.what()));
      } catch (const input_closed& e) {
        return error(to_valid_utf8(e.what()));
      } catch (const std::exception& e) {
        return error(fmt::format("internal error: {}", to_valid_utf8(e.what())));
      } catch (...) {
        return error("internal error");
      }
    } catch (...) {
      // Formatting the error itself failed (out of memory).
      return tool_result{std::string(), true};
    }
  }

  /// `call` with the arguments as JSON text, as most model APIs deliver them.
  /// Blank text counts as `{}`.
  tool_result call_text(std::string_view tool_name, std::string_view args_text, const call_context& context) {
    try {
      if (args_text.find_first_not_of(" \t\r\n") == std::string_view::npos)
        return call(tool_name, nlohmann::json::object(), context);
      auto args = nlohmann::json::parse(args_text, nullptr, false);
      if (args.is_discarded()) return error("arguments are not valid JSON");
      return call(tool_name, args, context);
    } catch (...) {
      return error("arguments are not valid JSON");
    }
  }

 private:
  static tool_result error(std::string text) { return tool_result{std::move(text), true}; }

  /// `workdir` against `base` (the carried directory, else the session's).
  static std::optional<std::filesystem::path> resolve_workdir(const std::optional<std::string>& workdir,
                                                              const std::filesystem::path& base) {
    if (!workdir) {
      if (base.empty()) return std::nullopt;
      return base;
    }
    std::filesystem::path path(*workdir);
    if (path.is_relative() && !base.empty()) path = base / path;
    return path.lexically_normal();
  }

  /// Where a session without a working directory of its own runs: the
  /// executor's default directory.
  static std::filesystem::path default_root(const Executor& executor) {
    try {
      exec_request probe;
      probe.command = ":";
      return std::filesystem::absolute(executor.resolve(std::move(probe)).workdir);
    } catch (...) {
      return std::filesystem::path();
    }
  }

  /// The session root of `context`, absolute.
  std::filesystem::path root_of(const call_context& context) const {
    if (context.cwd.empty()) return root_;
    std::error_code ec;
    auto root = std::filesystem::absolute(context.cwd, ec);
    return ec ? context.cwd : root.lexically_normal();
  }

  tool_result call_bash(const nlohmann::json& args, const call_context& context) {
    const tool_args::bash_arguments bash = tool_args::read_bash(args);
    if (bash.tty && !input_advertised())
      return error("field \"tty\": this executor cannot run commands on a terminal");
    if (bash.reset && !carry_.any()) return error("field \"reset\": this session carries no shell state");
    const auto wider = read_escalation(args, escalation_advertised(), network_escalation_advertised());

    const auto session_mode = effective_mode(context);
    if (wider && session_mode)
      if (auto refusal = not_wider_refusal(*wider, *session_mode)) return error(std::move(*refusal));
    const std::optional<sandbox_mode> mode = wider && wider->mode ? wider->mode : session_mode;

    // The carried state this call starts from (none without a writable log).
    session_log* const state_log = carry_.any() ? context.grant_log : nullptr;
    const std::filesystem::path root = state_log ? root_of(context) : std::filesystem::path();
    const shell_state_event before =
        state_log && !bash.reset ? current_shell_state(*state_log) : shell_state_event{};
    const carried_start start = state_log ? start_from(before, carry_, root, mode) : carried_start{};

    // Only the fields the model may set are copied: stdin, env and any other
    // key in `args` never reach the executor (contract 21).
    exec_request request;
    request.command = bash.command;
    request.workdir = resolve_workdir(bash.workdir, start.workdir ? *start.workdir : context.cwd);
    request.timeout = bash.timeout;
    if (!bash.background) {
      request.stop = context.stop;
      request.progress = context.progress;
    }
    // A terminal run may go on as a task (waiting for input): the caller's.
    if (bash.background || bash.tty) request.owner = context.session;
    if (bash.tty) request.terminal = terminal_size{};
    request.mode = mode;
    if (!start.env.empty()) request.env = start.env;
    request.env_unset = start.unset;
    // Only a foreground run on pipes ends in this call (a task's end is not
    // ordered with the session's later calls); a command that provably
    // changes nothing is not captured (its state is the one it started from).
    request.capture_state = state_log && !bash.background && !bash.tty && needs_state_capture(bash.command, start);
    // Names granted to the session for good, then those this call asks for.
    if (network_escalation_advertised() && context.log) request.network_grants = session_network_grants(*context.log);
    if (wider)
      for (const auto& domain : wider->domains)
        if (std::find(request.network_grants.begin(), request.network_grants.end(), domain) ==
            request.network_grants.end())
          request.network_grants.push_back(domain);

    exec_spec spec;
    try {
      spec = executor_.resolve(std::move(request));
    } catch (const std::invalid_argument& e) {
      return error(fmt::format("invalid request: {}", to_valid_utf8(e.what())));
    }

    // The request is checked before anyone is asked to approve it.
    if (wider) {
      approval_request question{context.session, bash.command, bash.description,
                                *session_mode, wider->mode.value_or(*session_mode),
                                wider->justification, wider->domains};
      if (start.workdir) question.carried_cwd = start.workdir->string();
      question.carried_env = start.env;
      question.carried_unset = start.unset;
      question.withheld_env = start.withheld;
      approval_decision decision = decide_approval(context.approve, question);
      if (decision.refusal) return error(std::move(*decision.refusal));
      if (decision.for_session && context.grant_log) {
        try {
          grant_network_for_session(*context.grant_log, wider->domains);
        } catch (const std::exception& e) {
          return error(fmt::format("the names were approved for the session, but the session log could not record "
                                   "them ({}); the command did not run",
                                   to_valid_utf8(e.what())));
        }
      }
    }

    if (state_log && bash.reset) {
      try {
        record_shell_state(*state_log, {});
      } catch (const std::exception& e) {
        return error(fmt::format("the session log could not record the reset ({}); the command did not run",
                                 to_valid_utf8(e.what())));
      }
    }
    const std::string carried_lines = render_carried_start(start);

    try {
      if (bash.background) {
        // A cancelled call starts nothing: its caller would never learn the id.
        if (context.stop.stop_requested())
          return error("the call was cancelled, so its background task did not start; nothing ran");
        const task_id id = detail::task_id_of(executor_.start(spec));
        if (auto failure = start_error(id))  // settled already, as killed: say so now, not at its first read
          return error(fmt::format("the command could not be run: {}; background task {} settled as killed",
                                   to_valid_utf8(*failure), to_valid_utf8(id.value())));
        if (context.stop.stop_requested()) {
          executor_.kill(id);
          return error(fmt::format("the call was cancelled as its background task started; task {} was killed",
                                   to_valid_utf8(id.value())));
        }
        return tool_result{carried_lines + render_started(id), false, started_facts(id)};
      }
      const run_result result = executor_.run(spec);
      std::string state_lines;
      if (spec.capture_state) state_lines = carry_forward(*state_log, before, start, result, root, mode);
      nlohmann::json facts = tool_facts(result);
      if (state_log) facts["cwd"] = start.shown_cwd.empty() ? std::string(".") : to_valid_utf8(start.shown_cwd);
      return tool_result{carried_lines + state_lines +
                             render_run_result(result, escalation_advertised(), network_escalation_advertised()),
                         result.aborted, std::move(facts)};
    } catch (const sandbox_unavailable& e) {
      return error(fmt::format("sandbox unavailable under {} mode: {}; the command did not run", e.mode(),
                               to_valid_utf8(e.what())));
    } catch (const infrastructure_error& e) {
      return error(fmt::format("the command could not be run: {}", to_valid_utf8(e.what())));
    } catch (const std::invalid_argument& e) {
      return error(fmt::format("invalid request: {}", to_valid_utf8(e.what())));
    }
  }

  /// Records the state `result` left as the session's next one, when it
  /// changed; answers the lines saying what was not carried.
  std::string carry_forward(session_log& log, const shell_state_event& before, const carried_start& start,
                            const run_result& result, const std::filesystem::path& root,
                            std::optional<sandbox_mode> mode) {
    if (!result.final_state)
      return render_state_not_carried(result.state_notice.value_or("the shell left no state"));
    std::vector<std::string> dropped;
    shell_state_event next = next_state(before, start, *result.final_state, carry_, root, mode, dropped);
    std::string lines = dropped.empty() ? std::string() : render_dropped_variables(dropped);
    if (next == before) return lines;
    try {
      record_shell_state(log, std::move(next));
    } catch (const std::exception& e) {
      lines += render_state_not_carried(fmt::format("the session log could not record it ({})", e.what()));
    }
    return lines;
  }

  /// A background start's facts: its id, and `running` — what the start
  /// knows; a read (bash_output) tells what happened since.
  static nlohmann::json started_facts(const task_id& id) {
    nlohmann::json facts = tool_facts();
    facts["task_id"] = to_valid_utf8(id.value());
    facts["status"] = "running";
    return facts;
  }

  /// Why task `id`, just started, did not run; empty when it did (or when
  /// it is no longer known).
  std::optional<std::string> start_error(const task_id& id) const noexcept {
    try {
      return executor_.get(id).start_error;
    } catch (...) {
      return std::nullopt;
    }
  }

  /// The owner fence (contract 19), the executor's ownership policy deciding:
  /// empty when `context` may use task `id`. Throws unknown_task (and
  /// task_forgotten) for an id the executor does not hold.
  std::optional<tool_result> fence(const task_id& id, const call_context& context) const {
    if (executor_.may_access(id, context.session)) return std::nullopt;
    return error(fmt::format("task {} belongs to another session", to_valid_utf8(id.value())));
  }

  tool_result call_output(const nlohmann::json& args, const call_context& context) {
    const task_id id = tool_args::read_task_id(args);
    try {
      if (auto refused = fence(id, context)) return *refused;
      const task_read read = executor_.read_output(id);
      return tool_result{render_task_read(read, escalation_advertised(), network_escalation_advertised()), false,
                         tool_facts(read)};
    } catch (const task_forgotten& e) {
      // Not "unknown": the model did start it, and must not retry or guess.
      return error(fmt::format("task {} finished and was forgotten; its output is no longer available ({})",
                               to_valid_utf8(id.value()), to_valid_utf8(e.limits())));
    }
  }

  /// `bash_input`: type into a task, wait until it asks again, settles or
  /// `wait_ms` passes, and answer like bash_output (contract 27).
  tool_result call_input(const nlohmann::json& args, const call_context& context) {
    const tool_args::input_arguments input = tool_args::read_input(args);
    const task_id& id = input.id;
    try {
      if (auto refused = fence(id, context)) return *refused;
      const std::size_t written = executor_.write_input(id, input.input);
      if (input.wait.count() > 0) executor_.wait_for_input(id, input.wait);
      const task_read read = executor_.read_output(id);
      std::string text = render_task_read(read, escalation_advertised(), network_escalation_advertised());
      if (written < input.input.size())
        text = fmt::format("[input: only {} of {} bytes were taken; the task is not reading]\n{}", written,
                           input.input.size(), text);
      nlohmann::json facts = tool_facts(read);
      facts["input_written"] = written;
      return tool_result{std::move(text), false, std::move(facts)};
    } catch (const task_forgotten& e) {
      return error(fmt::format("task {} finished and was forgotten; it takes no input ({})",
                               to_valid_utf8(id.value()), to_valid_utf8(e.limits())));
    }
  }

  tool_result call_kill(const nlohmann::json& args, const call_context& context) {
    const task_id id = tool_args::read_task_id(args);
    const std::string name = to_valid_utf8(id.value());
    try {
      if (auto refused = fence(id, context)) return *refused;
      if (executor_.kill(id)) {
        nlohmann::json facts = tool_facts();
        facts["task_id"] = name;
        facts["status"] = "running";  // until the kill has reaped it
        facts["killed"] = true;
        return tool_result{fmt::format("killed task {}", name), false, std::move(facts)};
      }
      // `kill` is false both for a task that has finished and for one whose
      // kill is already under way (a TERM-ignoring command in its grace
      // period): the text must agree with the status line below it.
      const task_snapshot task = executor_.get(id);
      nlohmann::json facts = tool_facts(task);
      facts["killed"] = false;
      if (task.status == task_status::running)
        return tool_result{
            fmt::format("task {} is already being killed and has not exited yet; nothing more to do\n{}", name,
                        status_line(task)),
            false, std::move(facts)};
      return tool_result{fmt::format("task {} had already finished; nothing was killed\n{}", name, status_line(task)),
                         false, std::move(facts)};
    } catch (const task_forgotten& e) {
      // Only settled tasks are forgotten (also between the fence, `kill`
      // and `get` above): like any finished task, there was nothing to kill.
      nlohmann::json facts = tool_facts();
      facts["task_id"] = name;
      facts["status"] = "forgotten";
      facts["killed"] = false;
      return tool_result{fmt::format("task {} had already finished and was forgotten; nothing was killed ({})", name,
                                     to_valid_utf8(e.limits())),
                         false, std::move(facts)};
    }
  }

  /// A background task settled: its notice goes to the owner its snapshot
  /// carries — the executor's record, valid even if the task was forgotten
  /// before this runs, or settled before `start` returned its id.
  void on_settled(const task_snapshot& task) noexcept {
    if (!on_notice_) return;
    try {
      on_notice_(task.owner, render_task_notice(task, escalation_advertised(), network_escalation_advertised()));
    } catch (...) {
      // A harness's failing notice must not break the task or the call.
    }
  }

  Executor& executor_;
  notice_callback on_notice_;
  state_carry carry_;
  /// The session root of a context without a working directory.
  std::filesystem::path root_;
  // Last: unsubscribes first, before the state the listener uses goes away.
  subscription_type subscription_;
};

}  // namespace bashexec

// tools/bash_tools: the model-facing `bash`, `bash_output` and `bash_kill`
// tools over any executor (DESIGN.md contract 18-21): schemas, argument
// validation, the per-call sandbox mode (escalation grant > session override
// > executor default), approval-gated escalation, the owner fence and the
// result text. `call` never throws and never forwards model-supplied `stdin`,
// `env` or any key it does not know.
//
// An executor usable here (`tool_executor`) provides:
//   std::optional<sandbox_mode> default_mode() const;   // empty: never confines
//   exec_spec resolve(exec_request) const;               // throws std::invalid_argument
//   run_result run(const exec_spec&);                    // throws infrastructure_error
//   task_id start(const exec_spec&);                     // (or a handle with .id())
//   task_snapshot get(const task_id&) const;             // throws unknown_task
//   std::optional<owner_token> owner_of(const task_id&) const;
//   task_read read_output(const task_id&);               // throws unknown_task
//   bool kill(const task_id&);                           // false: finished, or a kill already under way
//   on_task_done(listener) -> RAII subscription          // listener(const task_snapshot&)
#pragma once

#include <chrono>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bashexec/errors.hpp"
#include "bashexec/ids.hpp"
#include "bashexec/request.hpp"
#include "bashexec/result.hpp"
#include "bashexec/run_progress.hpp"
#include "bashexec/sandbox_mode.hpp"
#include "bashexec/session/session_log.hpp"
#include "bashexec/tools/approval.hpp"
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
  /// The session's log, holding its sandbox-mode override; may be null.
  const session_log* log = nullptr;
  /// Asked before a call runs under a wider mode; empty: nobody can approve.
  approval_callback approve;
  /// Aborts a foreground run (the run is then an error result).
  std::stop_token stop;
  /// When set, a foreground run keeps its byte counts there while it runs.
  std::shared_ptr<run_progress> progress;
};

/// Receives the owner of a settled background task (`nullopt` for an
/// ownerless one; an empty token is a session like any other) and the notice
/// to show that session (`render_task_notice`).
using notice_callback = std::function<void(const std::optional<owner_token>& owner, const std::string& notice)>;

namespace detail {

template <class Started>
concept exposes_task_id = std::convertible_to<Started, task_id> || requires(const Started& started) {
  { started.id() } -> std::convertible_to<task_id>;
};

template <class Started>
task_id task_id_of(Started&& started) {
  if constexpr (std::convertible_to<Started, task_id>)
    return std::forward<Started>(started);
  else
    return started.id();
}

/// A tool argument the model got wrong; becomes an error result.
struct argument_error {
  std::string message;
};

struct task_listener_probe {
  void operator()(const task_snapshot&) const {}
};

/// `text` as a JSON string literal, valid UTF-8 whatever it holds.
inline std::string quoted(std::string_view text) {
  return nlohmann::json(to_valid_utf8(text)).dump();
}

}  // namespace detail

template <class E>
concept tool_executor = requires(E& executor, const E& const_executor, exec_request request, const exec_spec& spec,
                                 const task_id& id) {
  { const_executor.default_mode() } -> std::convertible_to<std::optional<sandbox_mode>>;
  { const_executor.resolve(std::move(request)) } -> std::convertible_to<exec_spec>;
  { executor.run(spec) } -> std::convertible_to<run_result>;
  { executor.start(spec) } -> detail::exposes_task_id;
  { const_executor.get(id) } -> std::convertible_to<task_snapshot>;
  { const_executor.owner_of(id) } -> std::convertible_to<std::optional<owner_token>>;
  { executor.read_output(id) } -> std::convertible_to<task_read>;
  { executor.kill(id) } -> std::convertible_to<bool>;
  executor.on_task_done(detail::task_listener_probe{});
};

/// The three tools over one executor, shared by every session of a harness.
/// Holds a reference to the executor, which must outlive it. Thread-safe as
/// far as the executor is.
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
  explicit bash_tools(Executor& executor, notice_callback on_notice = {})
      : executor_(executor),
        on_notice_(std::move(on_notice)),
        subscription_(executor.on_task_done(settled_listener{this})) {}

  bash_tools(const bash_tools&) = delete;
  bash_tools& operator=(const bash_tools&) = delete;

  /// True when the executor confines, so that `sandbox_permissions` and
  /// `justification` are offered to the model.
  bool escalation_advertised() const { return executor_.default_mode().has_value(); }

  /// The JSON array of the `bash`, `bash_output` and `bash_kill` schemas.
  nlohmann::json schemas() const { return tool_schemas(escalation_advertised()); }

  /// The mode a call of this session runs under without escalation: the
  /// session override, else the executor default; empty when the executor
  /// never confines.
  std::optional<sandbox_mode> effective_mode(const call_context& context) const {
    const auto fallback = executor_.default_mode();
    if (!fallback) return std::nullopt;
    if (context.log)
      if (auto override_mode = effective_sandbox_mode(*context.log)) return override_mode;
    return fallback;
  }

  /// Runs one tool call. Never throws: every failure is an error result.
  tool_result call(std::string_view tool_name, const nlohmann::json& args, const call_context& context) {
    try {
      try {
        if (tool_name == bash_tool_name) return call_bash(args, context);
        if (tool_name == bash_output_tool_name) return call_output(args, context);
        if (tool_name == bash_kill_tool_name) return call_kill(args, context);
        return error(fmt::format("unknown tool {}; the tools are bash, bash_output and bash_kill",
                                 detail::quoted(tool_name)));
      } catch (const detail::argument_error& e) {
        return error(e.message);
      } catch (const unknown_task& e) {
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

  // ---- argument reading ------------------------------------------------

  static void require_object(const nlohmann::json& args) {
    if (!args.is_object()) throw detail::argument_error{"arguments must be a JSON object"};
  }

  /// The value of `field`, or null when absent (an explicit null is absent).
  static const nlohmann::json* find(const nlohmann::json& args, std::string_view field) {
    const auto it = args.find(field);
    if (it == args.end() || it->is_null()) return nullptr;
    return &*it;
  }

  static std::string required_string(const nlohmann::json& args, std::string_view field) {
    const auto* value = find(args, field);
    if (!value) throw detail::argument_error{fmt::format("missing required field \"{}\"", field)};
    if (!value->is_string()) throw detail::argument_error{fmt::format("field \"{}\" must be a string", field)};
    return value->get<std::string>();
  }

  static std::optional<std::string> optional_string(const nlohmann::json& args, std::string_view field) {
    const auto* value = find(args, field);
    if (!value) return std::nullopt;
    if (!value->is_string()) throw detail::argument_error{fmt::format("field \"{}\" must be a string", field)};
    return value->get<std::string>();
  }

  /// Commands and paths reach execve and chdir, which stop at a NUL byte.
  static void reject_nul(const std::string& text, std::string_view field) {
    if (text.find('\0') != std::string::npos)
      throw detail::argument_error{fmt::format("field \"{}\" must not contain NUL characters", field)};
  }

  static void reject_blank(const std::string& text, std::string_view field) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos)
      throw detail::argument_error{fmt::format("field \"{}\" must not be empty", field)};
  }

  static std::optional<std::chrono::milliseconds> optional_timeout(const nlohmann::json& args) {
    const auto* value = find(args, "timeoutMs");
    if (!value) return std::nullopt;
    // Anything longer is clamped by the executor anyway; saturating keeps
    // its deadline arithmetic far from overflow.
    constexpr std::int64_t ceiling = std::int64_t{1} << 31;
    const detail::argument_error bad{"field \"timeoutMs\" must be a positive integer (milliseconds)"};
    std::int64_t ms = 0;
    if (value->is_number_unsigned()) {
      const auto v = value->get<std::uint64_t>();
      ms = v > static_cast<std::uint64_t>(ceiling) ? ceiling : static_cast<std::int64_t>(v);
    } else if (value->is_number_integer()) {
      const auto v = value->get<std::int64_t>();
      ms = v > ceiling ? ceiling : v;
    } else if (value->is_number_float()) {
      const auto v = value->get<double>();
      if (!std::isfinite(v) || v != std::floor(v)) throw bad;
      ms = v > static_cast<double>(ceiling) ? ceiling : v < 0 ? -1 : static_cast<std::int64_t>(v);
    } else {
      throw bad;
    }
    if (ms <= 0) throw bad;
    return std::chrono::milliseconds(ms);
  }

  static bool optional_bool(const nlohmann::json& args, std::string_view field) {
    const auto* value = find(args, field);
    if (!value) return false;
    if (!value->is_boolean()) throw detail::argument_error{fmt::format("field \"{}\" must be a boolean", field)};
    return value->get<bool>();
  }

  struct escalation {
    sandbox_mode mode;
    std::string justification;
  };

  /// `sandbox_permissions` + `justification`, validated as a pair.
  std::optional<escalation> read_escalation(const nlohmann::json& args) const {
    const auto* permissions = find(args, "sandbox_permissions");
    const auto* justification = find(args, "justification");
    if (!permissions && !justification) return std::nullopt;
    if (!escalation_advertised()) {
      throw detail::argument_error{fmt::format(
          "field \"{}\" is not supported: this executor does not sandbox commands, so there is nothing to widen",
          permissions ? "sandbox_permissions" : "justification")};
    }
    std::optional<sandbox_mode> mode;
    if (permissions) {
      if (permissions->is_string()) mode = parse_sandbox_mode(permissions->get_ref<const std::string&>());
      if (!mode || *mode == sandbox_mode::read_only)
        throw detail::argument_error{
            "field \"sandbox_permissions\" must be \"workspace-write\" or \"danger-full-access\""};
    }
    std::string reason;
    if (justification) {
      if (!justification->is_string())
        throw detail::argument_error{"field \"justification\" must be a string"};
      reason = justification->get<std::string>();
      reject_blank(reason, "justification");
    }
    if (!permissions)
      throw detail::argument_error{"field \"justification\" is only accepted together with \"sandbox_permissions\""};
    if (!justification)
      throw detail::argument_error{"field \"sandbox_permissions\" requires \"justification\" (why the wider mode is needed)"};
    return escalation{*mode, std::move(reason)};
  }

  static std::optional<std::filesystem::path> resolve_workdir(const std::optional<std::string>& workdir,
                                                              const call_context& context) {
    if (!workdir) {
      if (context.cwd.empty()) return std::nullopt;
      return context.cwd;
    }
    std::filesystem::path path(*workdir);
    if (path.is_relative() && !context.cwd.empty()) path = context.cwd / path;
    return path.lexically_normal();
  }

  // ---- the tools --------------------------------------------------------

  tool_result call_bash(const nlohmann::json& args, const call_context& context) {
    require_object(args);
    const std::string command = required_string(args, "command");
    reject_blank(command, "command");
    reject_nul(command, "command");
    const std::string description = required_string(args, "description");
    reject_blank(description, "description");
    const auto timeout = optional_timeout(args);
    const auto workdir = optional_string(args, "workdir");
    if (workdir) {
      reject_blank(*workdir, "workdir");
      reject_nul(*workdir, "workdir");
    }
    const bool background = optional_bool(args, "run_in_background");
    const auto wider = read_escalation(args);

    const auto session_mode = effective_mode(context);
    if (wider && session_mode && !is_wider(wider->mode, *session_mode)) {
      return error(fmt::format(
          "sandbox_permissions \"{}\" is not wider than the current sandbox mode \"{}\", so there is nothing to "
          "approve; the command did not run. Run it without sandbox_permissions and justification.",
          wider->mode, *session_mode));
    }

    // Only the fields the model may set are copied: stdin, env and any other
    // key in `args` never reach the executor (contract 21).
    exec_request request;
    request.command = command;
    request.workdir = resolve_workdir(workdir, context);
    request.timeout = timeout;
    if (!background) {
      request.stop = context.stop;
      request.progress = context.progress;
    }
    if (background) request.owner = context.session;
    request.mode = wider ? std::optional(wider->mode) : session_mode;

    exec_spec spec;
    try {
      spec = executor_.resolve(std::move(request));
    } catch (const std::invalid_argument& e) {
      return error(fmt::format("invalid request: {}", to_valid_utf8(e.what())));
    }

    // The request is checked before anyone is asked to approve it.
    if (wider) {
      if (auto refusal = ask_approval(*wider, *session_mode, command, description, context)) return *refusal;
    }

    try {
      if (background) {
        const task_id id = start(spec, context.session);
        return tool_result{render_started(id), false,
                           nlohmann::json{{"task_id", to_valid_utf8(id.value())}, {"status", "running"}}};
      }
      const run_result result = executor_.run(spec);
      return tool_result{render_run_result(result, escalation_advertised()), result.aborted, tool_facts(result)};
    } catch (const sandbox_unavailable& e) {
      return error(fmt::format("sandbox unavailable under {} mode: {}; the command did not run", e.mode(),
                               to_valid_utf8(e.what())));
    } catch (const infrastructure_error& e) {
      return error(fmt::format("the command could not be run: {}", to_valid_utf8(e.what())));
    } catch (const std::invalid_argument& e) {
      return error(fmt::format("invalid request: {}", to_valid_utf8(e.what())));
    }
  }

  /// Empty when the call may run under `wider.mode`; otherwise the refusal.
  static std::optional<tool_result> ask_approval(const escalation& wider, sandbox_mode current,
                                                 const std::string& command, const std::string& description,
                                                 const call_context& context) {
    if (!context.approve)
      return error(fmt::format(
          "running this command under \"{}\" needs a person's approval, but nobody can approve requests in this "
          "session; the command did not run",
          wider.mode));
    approval_outcome outcome = approval_outcome::unavailable;
    try {
      outcome = context.approve(approval_request{context.session, command, description, current, wider.mode,
                                                 wider.justification});
    } catch (...) {
      outcome = approval_outcome::unavailable;
    }
    switch (outcome) {
      case approval_outcome::allowed_once: return std::nullopt;
      case approval_outcome::rejected:
        return error(fmt::format(
            "the request to run this command under \"{}\" was rejected; the command did not run. Do not try to get "
            "around the sandbox; continue within the current mode or ask the user how to proceed.",
            wider.mode));
      case approval_outcome::cancelled:
        return error("the approval request was cancelled before anyone answered; the command did not run");
      case approval_outcome::unavailable: break;
    }
    return error("approval is unavailable right now; the command did not run");
  }

  /// The owner fence (contract 19): empty when `context` may use task `id`.
  std::optional<tool_result> fence(const task_id& id, const call_context& context) const {
    const auto owner = executor_.owner_of(id);
    if (owner && *owner != context.session)
      return error(fmt::format("task {} belongs to another session", to_valid_utf8(id.value())));
    return std::nullopt;
  }

  static task_id required_task_id(const nlohmann::json& args) {
    std::string id = required_string(args, "task_id");
    reject_blank(id, "task_id");
    return task_id(std::move(id));
  }

  tool_result call_output(const nlohmann::json& args, const call_context& context) {
    require_object(args);
    const task_id id = required_task_id(args);
    if (auto refused = fence(id, context)) return *refused;
    try {
      const task_read read = executor_.read_output(id);
      nlohmann::json facts = tool_facts(read.task);
      facts["lossy"] = read.lossy;
      return tool_result{render_task_read(read, escalation_advertised()), false, std::move(facts)};
    } catch (const task_forgotten& e) {
      // Not "unknown": the model did start it, and must not retry or guess.
      return error(fmt::format("task {} finished and was forgotten; its output is no longer available ({})",
                               to_valid_utf8(id.value()), to_valid_utf8(e.limits())));
    }
  }

  tool_result call_kill(const nlohmann::json& args, const call_context& context) {
    require_object(args);
    const task_id id = required_task_id(args);
    if (auto refused = fence(id, context)) return *refused;
    const std::string name = to_valid_utf8(id.value());
    try {
      if (executor_.kill(id))
        return tool_result{fmt::format("killed task {}", name), false,
                           nlohmann::json{{"task_id", name}, {"killed", true}, {"status", "running"}}};
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
      // Only settled tasks are forgotten (also between `kill` and `get`
      // above): like any finished task, there was nothing to kill.
      return tool_result{fmt::format("task {} had already finished and was forgotten; nothing was killed ({})", name,
                                     to_valid_utf8(e.limits())),
                         false, nlohmann::json{{"task_id", name}, {"killed", false}, {"status", "forgotten"}}};
    }
  }

  // ---- background completion notices ------------------------------------
  //
  // A task may settle before `start` has returned its id to us, so while a
  // start is in flight unclaimed settlements are parked and claimed after.

  task_id start(const exec_spec& spec, const std::optional<owner_token>& owner) {
    if (!on_notice_) return detail::task_id_of(executor_.start(spec));
    {
      std::lock_guard lock(mutex_);
      ++starts_in_flight_;
    }
    std::optional<task_id> id;
    std::optional<task_snapshot> settled_early;
    try {
      id = detail::task_id_of(executor_.start(spec));
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (--starts_in_flight_ == 0) parked_.clear();
      throw;
    }
    {
      std::lock_guard lock(mutex_);
      if (auto it = parked_.find(*id); it != parked_.end()) {
        settled_early = std::move(it->second);
        parked_.erase(it);
      } else {
        started_.emplace(*id, owner);
      }
      if (--starts_in_flight_ == 0) parked_.clear();
    }
    if (settled_early) deliver(owner, *settled_early);
    return *id;
  }

  void on_settled(const task_snapshot& task) {
    if (!on_notice_) return;
    std::optional<std::optional<owner_token>> owner;  // outer: started here; inner: ownerless or not
    {
      std::lock_guard lock(mutex_);
      if (auto it = started_.find(task.id); it != started_.end()) {
        owner = std::move(it->second);
        started_.erase(it);
      } else if (starts_in_flight_ > 0) {
        parked_.insert_or_assign(task.id, task);
      }
    }
    if (owner) deliver(*owner, task);
  }

  void deliver(const std::optional<owner_token>& owner, const task_snapshot& task) noexcept {
    try {
      on_notice_(owner, render_task_notice(task, escalation_advertised()));
    } catch (...) {
      // A harness's failing notice must not break the task or the call.
    }
  }

  Executor& executor_;
  notice_callback on_notice_;
  std::mutex mutex_;
  std::unordered_map<task_id, std::optional<owner_token>> started_;
  std::unordered_map<task_id, task_snapshot> parked_;
  int starts_in_flight_ = 0;
  // Last: unsubscribes first, before the state the listener uses goes away.
  subscription_type subscription_;
};

}  // namespace bashexec

// executor: the executor concept — what the tool layer and the servers ask
// of whatever runs their commands. `basic_executor` (every composition of
// policies: sandbox_executor, local_executor, …) models it; so may a type of
// the host's own, such as a decorator over one, or an executor whose
// commands run elsewhere. A model is usable wherever an executor is:
// `bash_tools`, `json_lines_server`, `mcp_server`, `mcp_sessions`.
//
//   std::optional<sandbox_mode> default_mode() const;   // empty: never confines
//   exec_spec resolve(exec_request) const;               // throws std::invalid_argument naming the field
//   run_result run(const exec_spec&);                    // throws infrastructure_error
//   task_id start(const exec_spec&);                     // throws infrastructure_error
//   task_snapshot get(const task_id&) const;             // throws unknown_task
//   std::vector<task_snapshot> list() const;
//   std::optional<owner_token> owner_of(const task_id&) const;                       // empty for an unknown id
//   bool may_access(const task_id&, const std::optional<owner_token>& caller) const; // throws unknown_task
//   task_read read_output(const task_id&);               // throws unknown_task
//   bool kill(const task_id&);                           // false: finished, or a kill already under way
//   task_snapshot wait(const task_id&);
//   std::optional<task_snapshot> wait_for(const task_id&, std::chrono::milliseconds);
//   subscription on_task_done(listener);                 // listener(const task_snapshot&)
//
// What the signatures cannot say, and every model keeps (docs/contract.md
// gives the numbered items, docs/architecture.md "The executor concept"):
//   - run honours the spec's timeout and stop token, killing the command's
//     process group, and reports the first cause (timed out, aborted);
//   - read_output returns each byte once, in order, with its offset, and
//     says when bytes were lost to the output bound;
//   - the owner fence: may_access is true only for the task's owner (an
//     ownerless task: for everyone);
//   - each completion listener hears of each settled task exactly once, and
//     not after its subscription is destroyed;
//   - destroying the executor kills every task it started and reaps them:
//     nothing outlives it.
//
// `tool_executor` is the part the tools use (no list, owner_of, wait): a
// test double of the tool layer needs no more, and every executor is one.
// `interactive_executor` adds input to running tasks (terminal.hpp); the
// tools offer `tty` and `bash_input` only over one.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "bashexec/ids.hpp"
#include "bashexec/request.hpp"
#include "bashexec/result.hpp"
#include "bashexec/sandbox_mode.hpp"
#include "bashexec/subscription.hpp"
#include "bashexec/terminal.hpp"

namespace bashexec {

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

/// A completion listener, to ask whether an executor takes one.
struct task_listener_probe {
  void operator()(const task_snapshot&) const {}
};

}  // namespace detail

/// What `bash_tools` needs of an executor: resolve, run, start (a task id or
/// a handle with `.id()`), get, the owner fence, incremental reads, kill and
/// completion listeners.
template <class E>
concept tool_executor = requires(E& executor, const E& const_executor, exec_request request, const exec_spec& spec,
                                 const task_id& id, const std::optional<owner_token>& caller) {
  { const_executor.default_mode() } -> std::convertible_to<std::optional<sandbox_mode>>;
  { const_executor.resolve(std::move(request)) } -> std::convertible_to<exec_spec>;
  { executor.run(spec) } -> std::convertible_to<run_result>;
  { executor.start(spec) } -> detail::exposes_task_id;
  { const_executor.get(id) } -> std::convertible_to<task_snapshot>;
  { const_executor.may_access(id, caller) } -> std::convertible_to<bool>;
  { executor.read_output(id) } -> std::convertible_to<task_read>;
  { executor.kill(id) } -> std::convertible_to<bool>;
  executor.on_task_done(detail::task_listener_probe{});
};

/// An executor: the tools' part, and the listing, owners and waits the
/// servers and a harness use, with the behaviour the header comment lists.
template <class E>
concept executor = tool_executor<E> && requires(E& executor, const E& const_executor, const task_id& id,
                                                std::chrono::milliseconds timeout) {
  { executor.start(std::declval<const exec_spec&>()) } -> std::convertible_to<task_id>;
  { const_executor.list() } -> std::convertible_to<std::vector<task_snapshot>>;
  { const_executor.owner_of(id) } -> std::convertible_to<std::optional<owner_token>>;
  { executor.wait(id) } -> std::convertible_to<task_snapshot>;
  { executor.wait_for(id, timeout) } -> std::convertible_to<std::optional<task_snapshot>>;
  { executor.on_task_done(detail::task_listener_probe{}) } -> std::same_as<subscription>;
};

/// An executor whose tasks take input (terminal.hpp; basic_executor's
/// write_input, close_input, resize, interrupt and wait_for_input).
template <class E>
concept interactive_executor = tool_executor<E> && requires(E& executor, const task_id& id, std::string_view bytes,
                                                           std::chrono::milliseconds timeout, terminal_size size) {
  { executor.write_input(id, bytes) } -> std::convertible_to<std::size_t>;
  executor.close_input(id);
  executor.resize(id, size);
  { executor.interrupt(id) } -> std::convertible_to<bool>;
  { executor.wait_for_input(id, timeout) } -> std::convertible_to<std::optional<task_snapshot>>;
};

}  // namespace bashexec

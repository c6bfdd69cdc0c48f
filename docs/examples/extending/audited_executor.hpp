// audited_executor: an out-of-tree model of the executor concept
// (bashexec/executor.hpp; docs/extending.md, "An executor of your own"). It
// wraps any executor and passes every call through, after writing the
// command of each run and start to an audit sink: how a harness keeps its
// own record without touching bashexec. It uses only bashexec's installed
// headers; the tool layer, json_lines_server and mcp_server take it as they
// take sandbox_executor.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <bashexec/executor.hpp>

namespace example {

template <bashexec::executor Inner>
class audited_executor {
 public:
  /// `inner` must outlive this object, and its tasks are the inner
  /// executor's: they die with it. `audit` is called on the thread of each
  /// run or start, before the command is handed on; a server calls from
  /// several threads at once, so it must be thread-safe there.
  audited_executor(Inner& inner, std::function<void(const std::string& what)> audit)
      : inner_(inner), audit_(std::move(audit)) {}

  audited_executor(const audited_executor&) = delete;
  audited_executor& operator=(const audited_executor&) = delete;

  std::optional<bashexec::sandbox_mode> default_mode() const { return inner_.default_mode(); }
  /// The inner executor's settings, where it has them: the tools offer
  /// network escalation only when they can see an allowlist.
  decltype(auto) config() const
    requires requires(const Inner& inner) { inner.config(); }
  {
    return inner_.config();
  }
  bashexec::exec_spec resolve(bashexec::exec_request request) const { return inner_.resolve(std::move(request)); }

  bashexec::run_result run(const bashexec::exec_spec& spec) {
    audit_("run " + spec.command);
    return inner_.run(spec);
  }
  bashexec::task_id start(const bashexec::exec_spec& spec) {
    audit_("start " + spec.command);
    return inner_.start(spec);
  }

  bashexec::task_snapshot get(const bashexec::task_id& id) const { return inner_.get(id); }
  std::vector<bashexec::task_snapshot> list() const { return inner_.list(); }
  std::optional<bashexec::owner_token> owner_of(const bashexec::task_id& id) const { return inner_.owner_of(id); }
  bool may_access(const bashexec::task_id& id, const std::optional<bashexec::owner_token>& caller) const {
    return inner_.may_access(id, caller);
  }
  bashexec::task_read read_output(const bashexec::task_id& id) { return inner_.read_output(id); }
  bool kill(const bashexec::task_id& id) { return inner_.kill(id); }
  bashexec::task_snapshot wait(const bashexec::task_id& id) { return inner_.wait(id); }
  std::optional<bashexec::task_snapshot> wait_for(const bashexec::task_id& id, std::chrono::milliseconds timeout) {
    return inner_.wait_for(id, timeout);
  }
  template <class Listener>
  [[nodiscard]] bashexec::subscription on_task_done(Listener&& listener) {
    return inner_.on_task_done(std::forward<Listener>(listener));
  }

 private:
  Inner& inner_;
  std::function<void(const std::string&)> audit_;
};

}  // namespace example

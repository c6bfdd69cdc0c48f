// Fuzzes `bashexec serve`'s request handler (bashexec/server/request_handler.hpp): each
// input is up to 16 request lines, handled in order by one handler over the
// real `bash_tools`, the way the server handles them minus its threads.
// Properties: no crash, no hang, no sanitizer report, whatever the bytes;
// every line gets exactly one response object with an "id", a valid UTF-8
// "text" and a boolean "is_error"; a request that parses echoes its own id;
// the id of an oversized line's kept prefix is recovered without a crash.
//
// The executor is a fake (`echo_executor` below), not a real one with a no-op
// command: a real executor would spawn a process per input, thousands of
// times a second, and fork under ASan is slow and noisy. What the handler
// needs from an executor is the `tool_executor` concept, so the fake answers
// it in memory: `run` echoes the command as its output, `start` registers a
// task that `kill` settles, `get`/`read_output` throw `unknown_task` for ids
// it never issued — every branch of the tool layer is reachable.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include <bashexec/ownership/tracked_owners.hpp>
#include <bashexec/server/request_handler.hpp>
#include <bashexec/subscription.hpp>
#include <bashexec/tools/bash_tools.hpp>
#include <bashexec/tools/utf8.hpp>

#include "fuzz_support.hpp"

namespace {

using namespace bashexec;

class echo_executor {
 public:
  std::optional<sandbox_mode> default_mode() const { return sandbox_mode::read_only; }

  exec_spec resolve(exec_request request) const {
    if (request.command.empty()) throw std::invalid_argument("command must not be empty");
    if (request.workdir && request.workdir->empty()) throw std::invalid_argument("workdir must not be empty");
    exec_spec spec;
    spec.command = std::move(request.command);
    spec.workdir = request.workdir.value_or("/work");
    spec.timeout = std::min(request.timeout.value_or(std::chrono::milliseconds(120000)),
                            std::chrono::milliseconds(600000));
    spec.stdout_max_bytes = 64000;
    spec.stop = request.stop;
    spec.owner = request.owner;
    spec.mode = request.mode ? request.mode : default_mode();
    return spec;
  }

  run_result run(const exec_spec& spec) {
    if (spec.stop.stop_requested()) throw infrastructure_error("run: stop was requested before the command was spawned");
    run_result result;
    result.out.text = spec.command;  // raw bytes: the renderer must repair them
    result.exit_code = static_cast<int>(spec.command.size() % 3);
    result.timeout = spec.timeout;
    if (spec.mode) result.sandbox = sandbox_info{*spec.mode, spec.command.find("deny") != std::string::npos,
                                                 enforcement::full, false, {}};
    return result;
  }

  task_id start(const exec_spec& spec) {
    if (tasks_.size() >= 64) throw infrastructure_error("start: too many tasks in one input");
    task_id id(fmt::format("bash-{}", tasks_.size() + 1));
    tasks_[id.value()] = task{task_snapshot{id, spec.command, task_status::running, {}, {}, {}, containment_mechanism::process_group, spec.owner}};
    return id;
  }

  task_snapshot get(const task_id& id) const { return find(id).snapshot; }

  bool may_access(const task_id& id, const std::optional<owner_token>& caller) const {
    return tracked_owners::may_access(find(id).snapshot.owner, caller);
  }

  task_read read_output(const task_id& id) {
    task_read read;
    read.task = find(id).snapshot;
    read.delta = read.task.command;
    return read;
  }

  bool kill(const task_id& id) {
    auto& t = const_cast<task&>(find(id));
    if (t.snapshot.status != task_status::running) return false;
    t.snapshot.status = task_status::killed;
    t.snapshot.signal = 15;
    return true;
  }

  template <class Listener>
  subscription on_task_done(Listener&&) {
    return subscription();  // tasks settle only through `kill`; nothing to notify
  }

 private:
  struct task {
    task_snapshot snapshot;
  };

  const task& find(const task_id& id) const {
    auto it = tasks_.find(id.value());
    if (it == tasks_.end()) throw unknown_task(id);
    return it->second;
  }

  std::map<std::string, task> tasks_;
};

static_assert(tool_executor<echo_executor>);

void check_response(const nlohmann::json& response) {
  FUZZ_CHECK(response.is_object());
  FUZZ_CHECK(response.contains("id"));
  FUZZ_CHECK(response.contains("text") && response["text"].is_string());
  FUZZ_CHECK(response.contains("is_error") && response["is_error"].is_boolean());
  FUZZ_CHECK(is_valid_utf8(response["text"].get_ref<const std::string&>()));
  // What the server writes: must encode strictly (valid UTF-8 throughout).
  const std::string line = response.dump();
  FUZZ_CHECK(line.find('\n') == std::string::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  echo_executor executor;
  bash_tools tools(executor);
  server::session_logs logs("");  // in memory: no files per input
  server::approval_desk approvals([](const nlohmann::json&) {});
  // `always`, not `ask`: nobody would answer a question in this loop.
  server::request_handler handler(tools, logs, approvals, server::approval_policy::always, "/work");

  std::size_t begin = 0;
  for (int lines = 0; begin <= input.size() && lines < 16; ++lines) {
    std::size_t end = input.find('\n', begin);
    if (end == std::string_view::npos) end = input.size();
    const std::string_view line = input.substr(begin, end - begin);
    begin = end + 1;

    const nlohmann::json response = server::handle_request_line(line, handler);
    check_response(response);
    const server::parsed_line parsed = server::parse_request_line(line);
    if (parsed.request) {
      const auto id = parsed.request->find("id");
      FUZZ_CHECK(response["id"] == (id != parsed.request->end() ? *id : nlohmann::json(nullptr)));
    } else {
      FUZZ_CHECK(response["is_error"] == true);
    }
    // An oversized line: only a prefix is kept, its id recovered if readable.
    (void)server::recover_id(line.substr(0, line.size() / 2));
  }
  return 0;
}

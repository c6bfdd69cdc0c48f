// The model-facing tools over a scripted executor: schemas, argument
// validation, the effective mode and approval-gated escalation, the owner
// fence, what reaches the executor, and background notices (docs/contract.md
// items 18-21).
#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "executor_test_support.hpp"

#include <bashexec/ownership/no_owners.hpp>
#include <bashexec/ownership/tracked_owners.hpp>
#include <bashexec/subscription.hpp>
#include <bashexec/tools/bash_tools.hpp>

using namespace bashexec;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// A test-only executor: scripted results, recorded requests, tasks whose
/// fate the test decides.
class fake_executor {
 public:
  std::optional<sandbox_mode> configured_default;
  run_result next_result;
  std::function<void()> throw_on_run;  // when set, `run` calls it (it throws)
  bool settle_during_start = false;    // the task finishes before `start` returns
  std::function<void()> during_start;  // when set, `start` calls it after the task exists

  mutable std::vector<exec_request> requests;  // what `resolve` received
  std::vector<exec_spec> runs;
  std::vector<exec_spec> starts;

  struct task {
    task_snapshot snapshot;  // carries the owner, as the executor's snapshots do
    task_read next_read;
  };
  std::map<std::string, task> tasks;

  std::optional<sandbox_mode> default_mode() const { return configured_default; }

  exec_spec resolve(exec_request request) const {
    requests.push_back(request);
    if (request.timeout && request.timeout->count() > 600000) request.timeout = 600000ms;
    if (request.workdir && request.workdir->string() == "/nonexistent")
      throw std::invalid_argument("workdir /nonexistent does not exist");
    exec_spec spec;
    spec.command = request.command;
    spec.workdir = request.workdir.value_or("/default/cwd");
    spec.timeout = request.timeout.value_or(120000ms);
    spec.stdout_max_bytes = request.stdout_max_bytes.value_or(64000);
    spec.stop = request.stop;
    spec.stdin_data = request.stdin_data;
    spec.env = request.env;
    spec.owner = request.owner;
    spec.mode = request.mode ? request.mode : configured_default;
    return spec;
  }

  run_result run(const exec_spec& spec) {
    runs.push_back(spec);
    if (throw_on_run) throw_on_run();
    run_result result = next_result;
    if (configured_default && spec.mode && !result.sandbox)
      result.sandbox = sandbox_info{*spec.mode, false, enforcement::full, false, {}};
    return result;
  }

  task_id start(const exec_spec& spec) {
    starts.push_back(spec);
    task_id id(fmt::format("bash-{}", tasks.size() + 1));
    tasks[id.value()] = task{task_snapshot{id, spec.command, task_status::running, {}, {}, {}, containment_mechanism::process_group, spec.owner}, {}};
    if (settle_during_start) finish(id, 0);
    if (during_start) during_start();
    return id;
  }

  task_snapshot get(const task_id& id) const { return find(id).snapshot; }

  /// tracked_owners' rule over the stored owner, like the real executor.
  bool may_access(const task_id& id, const std::optional<owner_token>& caller) const {
    return tracked_owners::may_access(find(id).snapshot.owner, caller);
  }

  task_read read_output(const task_id& id) {
    auto& t = find(id);
    task_read read = t.next_read;
    read.task = t.snapshot;
    t.next_read = {};
    return read;
  }

  bool kill(const task_id& id) {
    auto& t = find(id);
    if (t.snapshot.status != task_status::running) return false;
    t.snapshot.status = task_status::killed;
    t.snapshot.signal = SIGTERM;
    notify(t.snapshot);
    return true;
  }

  template <class F>
  subscription on_task_done(F&& listener) {
    const int key = next_listener_++;
    listeners_.emplace(key, std::forward<F>(listener));
    return subscription([this, key] { listeners_.erase(key); });
  }

  /// Test control: the task exits with `code` (and these sandbox facts).
  void finish(const task_id& id, int code, std::optional<sandbox_info> sandbox = std::nullopt) {
    auto& t = find(id);
    t.snapshot.status = task_status::completed;
    t.snapshot.exit_code = code;
    t.snapshot.sandbox = sandbox;
    notify(t.snapshot);
  }

  /// Test control: a task started by someone else, with this owner.
  task_id add_task(std::optional<owner_token> owner) {
    task_id id(fmt::format("bash-{}", tasks.size() + 1));
    tasks[id.value()] = task{task_snapshot{id, "sleep 100", task_status::running, {}, {}, {}, containment_mechanism::process_group, std::move(owner)}, {}};
    return id;
  }

  std::size_t listener_count() const { return listeners_.size(); }

 private:
  task& find(const task_id& id) {
    auto it = tasks.find(id.value());
    if (it == tasks.end()) throw unknown_task(id);
    return it->second;
  }
  const task& find(const task_id& id) const { return const_cast<fake_executor*>(this)->find(id); }

  void notify(const task_snapshot& snapshot) {
    auto copy = listeners_;
    for (auto& [key, listener] : copy) listener(snapshot);
  }

  std::map<int, std::function<void(const task_snapshot&)>> listeners_;
  int next_listener_ = 0;
};

static_assert(tool_executor<fake_executor>);

fake_executor confining(sandbox_mode mode = sandbox_mode::read_only) {
  fake_executor executor;
  executor.configured_default = mode;
  executor.next_result.exit_code = 0;
  return executor;
}

fake_executor unconfined() {
  fake_executor executor;
  executor.next_result.exit_code = 0;
  return executor;
}

call_context session(std::string id = "s1") {
  call_context context;
  context.session = owner_token(std::move(id));
  context.cwd = "/work/project";
  return context;
}

json bash_args(std::string command = "ls") { return {{"command", std::move(command)}, {"description", "list"}}; }

/// `bash_args` asking for `mode` with a justification.
json escalating(std::string command, std::string mode = "workspace-write", std::string justification = "j") {
  json args = bash_args(std::move(command));
  args["sandbox_permissions"] = std::move(mode);
  args["justification"] = std::move(justification);
  return args;
}

/// A scripted approver that records every question.
struct scripted_approver {
  approval_outcome answer = approval_outcome::allowed_once;
  std::vector<approval_request> asked;
  approval_callback callback() {
    return [this](const approval_request& request) {
      asked.push_back(request);
      return answer;
    };
  }
};

/// Strips descriptions, leaving the structure a golden test can pin.
json structure_of(json schema) {
  if (schema.is_object()) {
    if (schema.contains("description") && schema["description"].is_string()) schema.erase("description");
    for (auto& [key, value] : schema.items()) value = structure_of(value);
  } else if (schema.is_array()) {
    for (auto& value : schema) value = structure_of(value);
  }
  return schema;
}

}  // namespace

// ---- schemas ----------------------------------------------------------------

TEST_CASE("contract 18: the schemas of an unconfined executor offer no escalation fields", "[tools][schema]") {
  auto executor = unconfined();
  bash_tools tools(executor);
  const json golden = json::parse(R"([
    {"name": "bash", "input_schema": {"type": "object", "additionalProperties": false,
      "required": ["command", "description"],
      "properties": {
        "command": {"type": "string"},
        "description": {"type": "string"},
        "timeoutMs": {"type": "integer", "minimum": 1},
        "workdir": {"type": "string"},
        "run_in_background": {"type": "boolean"}}}},
    {"name": "bash_output", "input_schema": {"type": "object", "additionalProperties": false,
      "required": ["task_id"], "properties": {"task_id": {"type": "string"}}}},
    {"name": "bash_kill", "input_schema": {"type": "object", "additionalProperties": false,
      "required": ["task_id"], "properties": {"task_id": {"type": "string"}}}}
  ])");
  CHECK(structure_of(tools.schemas()) == golden);
  CHECK_FALSE(tools.escalation_advertised());
  const std::string bash_description = tools.schemas()[0]["description"];
  CHECK_THAT(bash_description, !Catch::Contains("sandbox_permissions"));
}

TEST_CASE("contract 18: the schemas of a confining executor add sandbox_permissions and justification",
          "[tools][schema]") {
  auto executor = confining();
  bash_tools tools(executor);
  const json schemas = tools.schemas();
  json golden_bash = json::parse(R"(
    {"name": "bash", "input_schema": {"type": "object", "additionalProperties": false,
      "required": ["command", "description"],
      "properties": {
        "command": {"type": "string"},
        "description": {"type": "string"},
        "timeoutMs": {"type": "integer", "minimum": 1},
        "workdir": {"type": "string"},
        "run_in_background": {"type": "boolean"},
        "sandbox_permissions": {"type": "string", "enum": ["workspace-write", "danger-full-access"]},
        "justification": {"type": "string"}}}})");
  CHECK(structure_of(schemas[0]) == golden_bash);
  CHECK(structure_of(schemas[1]) == structure_of(bash_output_tool_schema()));
  CHECK(structure_of(schemas[2]) == structure_of(bash_kill_tool_schema()));
  CHECK(tools.escalation_advertised());
}

TEST_CASE("contract 18, 20: the bash description teaches the model the rules", "[tools][schema]") {
  auto executor = confining();
  bash_tools tools(executor);
  const std::string text = tools.schemas()[0]["description"];
  CHECK_THAT(text, Catch::Contains("No shell state persists between calls"));
  CHECK_THAT(text, Catch::Contains("`workdir`"));
  CHECK_THAT(text, Catch::Contains("`[exit code: N]`"));
  CHECK_THAT(text, Catch::Contains("policy, not a bug"));
  CHECK_THAT(text, Catch::Contains("Do not retry around it"));
  CHECK_THAT(text, Catch::Contains("The one sanctioned retry is the same command again with "
                                   "`sandbox_permissions`"));
  CHECK_THAT(text, Catch::Contains("`justification`"));
  for (const auto& tool : tools.schemas()) {
    CHECK_FALSE(tool["description"].get<std::string>().empty());
    for (const auto& [name, property] : tool["input_schema"]["properties"].items())
      CHECK_FALSE(property["description"].get<std::string>().empty());
  }
}

// ---- validation ---------------------------------------------------------------

TEST_CASE("contract 18: every invalid argument is an error result naming the field", "[tools][validation]") {
  auto executor = confining();
  bash_tools tools(executor);
  const auto context = session();
  const auto expect = [&](std::string_view tool, const json& args, const std::string& text) {
    INFO(tool << " " << args.dump());
    const auto result = tools.call(tool, args, context);
    CHECK(result.is_error);
    CHECK(result.text == text);
  };
  const auto with = [](json args, const json& extra) {
    args.update(extra);
    return args;
  };

  expect("rm", bash_args(), "unknown tool \"rm\"; the tools are bash, bash_output and bash_kill");
  expect("bash", json::array(), "arguments must be a JSON object");
  expect("bash", "ls", "arguments must be a JSON object");
  expect("bash", json(nullptr), "arguments must be a JSON object");
  expect("bash", {{"description", "d"}}, "missing required field \"command\"");
  expect("bash", {{"command", nullptr}, {"description", "d"}}, "missing required field \"command\"");
  expect("bash", {{"command", 42}, {"description", "d"}}, "field \"command\" must be a string");
  expect("bash", {{"command", "  \n"}, {"description", "d"}}, "field \"command\" must not be empty");
  expect("bash", {{"command", std::string("ls\0-la", 6)}, {"description", "d"}},
         "field \"command\" must not contain NUL characters");
  expect("bash", {{"command", "ls"}}, "missing required field \"description\"");
  expect("bash", {{"command", "ls"}, {"description", false}}, "field \"description\" must be a string");
  for (const json& bad : {json("1000"), json(0), json(-5), json(1.5), json(true), json::array()})
    expect("bash", with(bash_args(), {{"timeoutMs", bad}}),
           "field \"timeoutMs\" must be a positive integer (milliseconds)");
  expect("bash", with(bash_args(), {{"workdir", 7}}), "field \"workdir\" must be a string");
  expect("bash", with(bash_args(), {{"workdir", ""}}), "field \"workdir\" must not be empty");
  expect("bash", with(bash_args(), {{"run_in_background", "yes"}}), "field \"run_in_background\" must be a boolean");
  expect("bash", with(bash_args(), {{"sandbox_permissions", "workspace-write"}}),
         "field \"sandbox_permissions\" requires \"justification\" (why the wider mode is needed)");
  expect("bash", with(bash_args(), {{"justification", "need it"}}),
         "field \"justification\" is only accepted together with \"sandbox_permissions\"");
  for (const json& bad : {json("root"), json("read-only"), json(1)})
    expect("bash", with(bash_args(), {{"sandbox_permissions", bad}, {"justification", "j"}}),
           "field \"sandbox_permissions\" must be \"workspace-write\" or \"danger-full-access\"");
  expect("bash", with(bash_args(), {{"sandbox_permissions", "danger-full-access"}, {"justification", 3}}),
         "field \"justification\" must be a string");
  expect("bash", with(bash_args(), {{"sandbox_permissions", "danger-full-access"}, {"justification", " "}}),
         "field \"justification\" must not be empty");
  expect("bash_output", json::object(), "missing required field \"task_id\"");
  expect("bash_output", {{"task_id", 1}}, "field \"task_id\" must be a string");
  expect("bash_output", {{"task_id", "bash-99"}}, "unknown task bash-99");
  expect("bash_kill", json::object(), "missing required field \"task_id\"");
  expect("bash_kill", {{"task_id", "bash-99"}}, "unknown task bash-99");

  CHECK(executor.requests.empty());
  CHECK(executor.runs.empty());
}

TEST_CASE("contract 18: escalation fields under an executor that does not confine are refused",
          "[tools][validation]") {
  auto executor = unconfined();
  bash_tools tools(executor);
  auto args = bash_args();
  args["sandbox_permissions"] = "danger-full-access";
  args["justification"] = "needs /etc";
  auto result = tools.call("bash", args, session());
  CHECK(result == tool_result{"field \"sandbox_permissions\" is not supported: this executor does not sandbox "
                              "commands, so there is nothing to widen",
                              true});
  args.erase("sandbox_permissions");
  result = tools.call("bash", args, session());
  CHECK(result.text ==
        "field \"justification\" is not supported: this executor does not sandbox commands, so there is nothing "
        "to widen");
  CHECK(executor.requests.empty());
}

TEST_CASE("call_text reads the arguments from JSON text", "[tools][validation]") {
  auto executor = unconfined();
  bash_tools tools(executor);
  CHECK(tools.call_text("bash", R"({"command":"ls","description":"d"})", session()) == tool_result{"(no output)", false});
  CHECK(tools.call_text("bash", "{\"command\":", session()) == tool_result{"arguments are not valid JSON", true});
  CHECK(tools.call_text("bash", "", session()) == tool_result{"missing required field \"command\"", true});
}

TEST_CASE("no JSON input makes call throw or crash", "[tools][validation][fuzz]") {
  auto executor = confining();
  bash_tools tools(executor);
  scripted_approver approver;
  auto context = session();
  context.approve = approver.callback();

  std::mt19937 random(20240601);
  const std::vector<std::string> keys{"command",  "description", "timeoutMs", "workdir", "run_in_background",
                                      "sandbox_permissions", "justification", "task_id", "stdin", "env", ""};
  const std::function<json(int)> value = [&](int depth) -> json {
    switch (random() % (depth > 2 ? 8 : 10)) {
      case 0: return nullptr;
      case 1: return random() % 2 == 0;
      case 2: return static_cast<std::int64_t>(random()) - (1ll << 31);
      case 3: return static_cast<std::uint64_t>(random()) << 33;
      case 4: return std::ldexp(static_cast<double>(random()), static_cast<int>(random() % 80) - 40);
      case 5: {
        std::string text;
        for (int i = random() % 12; i > 0; --i) text.push_back(static_cast<char>(random() % 256));
        return text;
      }
      case 6: return std::vector<std::string>{"workspace-write", "danger-full-access", "read-only", "bash-1"}
          [random() % 4];
      case 7: return "ls";
      case 8: {
        json array = json::array();
        for (int i = random() % 4; i > 0; --i) array.push_back(value(depth + 1));
        return array;
      }
      default: {
        json object = json::object();
        for (int i = random() % 8; i > 0; --i) object[keys[random() % keys.size()]] = value(depth + 1);
        return object;
      }
    }
  };
  const std::vector<std::string> tool_names_to_try{"bash", "bash_output", "bash_kill", "", "bash\xFF"};
  executor.add_task(owner_token("s1"));
  for (int round = 0; round < 3000; ++round) {
    json args = value(0);
    if (round % 3 == 0) {
      args = json::object();
      for (int i = random() % 8; i > 0; --i) args[keys[random() % keys.size()]] = value(1);
    }
    const auto& tool = tool_names_to_try[random() % tool_names_to_try.size()];
    tool_result result;
    REQUIRE_NOTHROW(result = tools.call(tool, args, context));
    CHECK(is_valid_utf8(result.text));
    REQUIRE_NOTHROW(tools.call_text(tool, args.dump(-1, ' ', false, json::error_handler_t::replace), context));
  }
  for (const auto& exec_request : executor.requests) {
    CHECK_FALSE(exec_request.stdin_data.has_value());
    CHECK_FALSE(exec_request.env.has_value());
  }
}

// ---- what reaches the executor -------------------------------------------------

TEST_CASE("contract 21: model-supplied stdin, env and unknown keys never reach the executor", "[tools][contract-21]") {
  auto executor = confining();
  bash_tools tools(executor);
  auto args = bash_args("cat");
  args["stdin"] = "secret input";
  args["stdin_data"] = "secret input";
  args["env"] = {{"LD_PRELOAD", "/tmp/evil.so"}};
  args["stdout_max_bytes"] = 1;
  args["owner"] = "someone-else";
  args["mode"] = "danger-full-access";
  for (const bool background : {false, true}) {
    args["run_in_background"] = background;
    const auto result = tools.call("bash", args, session());
    CHECK_FALSE(result.is_error);
  }
  REQUIRE(executor.requests.size() == 2);
  for (const auto& request : executor.requests) {
    CHECK(request.command == "cat");
    CHECK_FALSE(request.stdin_data.has_value());
    CHECK_FALSE(request.env.has_value());
    CHECK_FALSE(request.stdout_max_bytes.has_value());
    CHECK(request.mode == sandbox_mode::read_only);
  }
  CHECK_FALSE(executor.requests[0].owner.has_value());
  CHECK(executor.requests[1].owner == owner_token("s1"));
  CHECK_FALSE(executor.runs[0].stdin_data.has_value());
  CHECK_FALSE(executor.starts[0].env.has_value());
}

TEST_CASE("a relative workdir resolves against the session cwd, and none uses the session cwd", "[tools]") {
  auto executor = unconfined();
  bash_tools tools(executor);
  auto args = bash_args();
  tools.call("bash", args, session());
  args["workdir"] = "sub/../src";
  tools.call("bash", args, session());
  args["workdir"] = "/abs/dir";
  tools.call("bash", args, session());
  args["timeoutMs"] = 2500;
  tools.call("bash", args, session());
  REQUIRE(executor.requests.size() == 4);
  CHECK(executor.requests[0].workdir == fs::path("/work/project"));
  CHECK(executor.requests[1].workdir == fs::path("/work/project/src"));
  CHECK(executor.requests[2].workdir == fs::path("/abs/dir"));
  CHECK(executor.requests[3].timeout == 2500ms);
  CHECK_FALSE(executor.requests[0].timeout.has_value());

  // Without a session cwd the executor's default applies.
  call_context bare;
  args.erase("workdir");
  tools.call("bash", args, bare);
  CHECK_FALSE(executor.requests.back().workdir.has_value());
}

TEST_CASE("contract 18: nothing is stamped under an executor that never confines, whatever the session log says",
          "[tools][contract-18]") {
  auto executor = unconfined();
  bash_tools tools(executor);
  session_log log;
  set_sandbox_mode(log, sandbox_mode::workspace_write);
  auto context = session();
  context.log = &log;
  CHECK_FALSE(tools.effective_mode(context).has_value());
  CHECK_FALSE(tools.call("bash", bash_args(), context).is_error);
  CHECK_FALSE(executor.requests.back().mode.has_value());
}

TEST_CASE("contract 18: the session override beats the executor default", "[tools][contract-18]") {
  auto executor = confining(sandbox_mode::read_only);
  bash_tools tools(executor);
  session_log log;
  auto context = session();
  context.log = &log;
  tools.call("bash", bash_args(), context);
  CHECK(executor.requests.back().mode == sandbox_mode::read_only);
  set_sandbox_mode(log, sandbox_mode::workspace_write);
  tools.call("bash", bash_args(), context);
  CHECK(executor.requests.back().mode == sandbox_mode::workspace_write);
  // Another session without the override keeps the default.
  tools.call("bash", bash_args(), session("s2"));
  CHECK(executor.requests.back().mode == sandbox_mode::read_only);
}

TEST_CASE("contract 18: a session override still applies after a restart", "[tools][contract-18]") {
  const test_support::temp_dir scratch(test_support::scratch_root(), "bashexec-tools-");
  const fs::path dir = scratch.path();
  const auto file = session_log_path(dir, "s1");
  {
    session_log log(file);
    set_sandbox_mode(log, sandbox_mode::danger_full_access);
  }
  // A new process: new executor, new tools, a new log object over the same file.
  auto executor = confining();
  bash_tools tools(executor);
  const session_log log(file);
  auto context = session();
  context.log = &log;
  tools.call("bash", bash_args(), context);
  CHECK(executor.requests.back().mode == sandbox_mode::danger_full_access);
}

// ---- escalation and approval -------------------------------------------------

TEST_CASE("contract 18: an escalation not strictly wider than the effective mode fails without asking anyone",
          "[tools][approval][contract-18]") {
  auto executor = confining(sandbox_mode::workspace_write);
  bash_tools tools(executor);
  scripted_approver approver;
  auto context = session();
  context.approve = approver.callback();
  auto args = bash_args("touch x");
  args["sandbox_permissions"] = "workspace-write";
  args["justification"] = "write x";
  CHECK(tools.call("bash", args, context) ==
        tool_result{"sandbox_permissions \"workspace-write\" is not wider than the current sandbox mode "
                    "\"workspace-write\", so there is nothing to approve; the command did not run. Run it without "
                    "sandbox_permissions and justification.",
                    true});

  // The session override counts: danger-full-access already in force.
  session_log log;
  set_sandbox_mode(log, sandbox_mode::danger_full_access);
  context.log = &log;
  args["sandbox_permissions"] = "danger-full-access";
  CHECK(tools.call("bash", args, context).text ==
        "sandbox_permissions \"danger-full-access\" is not wider than the current sandbox mode "
        "\"danger-full-access\", so there is nothing to approve; the command did not run. Run it without "
        "sandbox_permissions and justification.");
  CHECK(approver.asked.empty());
  CHECK(executor.runs.empty());
}

TEST_CASE("contract 18: allowed-once runs that single call under the wider mode, and the next is back to the session's",
          "[tools][approval][contract-18]") {
  auto executor = confining(sandbox_mode::read_only);
  bash_tools tools(executor);
  scripted_approver approver;
  session_log log;
  set_sandbox_mode(log, sandbox_mode::workspace_write);
  auto context = session();
  context.log = &log;
  context.approve = approver.callback();

  auto args = bash_args("touch /etc/x");
  args["description"] = "touch a system file";
  args["sandbox_permissions"] = "danger-full-access";
  args["justification"] = "the user asked to configure /etc";
  const auto result = tools.call("bash", args, context);
  CHECK(result == tool_result{"(no output)", false});

  REQUIRE(approver.asked.size() == 1);
  const auto& asked = approver.asked[0];
  CHECK(asked.session == owner_token("s1"));
  CHECK(asked.command == "touch /etc/x");
  CHECK(asked.description == "touch a system file");
  CHECK(asked.current_mode == sandbox_mode::workspace_write);
  CHECK(asked.requested_mode == sandbox_mode::danger_full_access);
  CHECK(asked.justification == "the user asked to configure /etc");
  REQUIRE(executor.runs.size() == 1);
  CHECK(executor.runs[0].mode == sandbox_mode::danger_full_access);

  tools.call("bash", bash_args("touch /etc/y"), context);
  REQUIRE(executor.runs.size() == 2);
  CHECK(executor.runs[1].mode == sandbox_mode::workspace_write);
  CHECK(approver.asked.size() == 1);
}

TEST_CASE("contract 18: rejected, cancelled, unavailable and no approver each refuse with their own text",
          "[tools][approval][contract-18]") {
  auto executor = confining(sandbox_mode::read_only);
  bash_tools tools(executor);
  scripted_approver approver;
  auto context = session();
  auto args = bash_args("touch x");
  args["sandbox_permissions"] = "workspace-write";
  args["justification"] = "write x";

  CHECK(tools.call("bash", args, context) ==
        tool_result{"running this command under \"workspace-write\" needs a person's approval, but nobody can "
                    "approve requests in this session; the command did not run",
                    true});

  context.approve = approver.callback();
  approver.answer = approval_outcome::rejected;
  CHECK(tools.call("bash", args, context) ==
        tool_result{"the request to run this command under \"workspace-write\" was rejected; the command did not "
                    "run. Do not try to get around the sandbox; continue within the current mode or ask the user "
                    "how to proceed.",
                    true});
  approver.answer = approval_outcome::cancelled;
  CHECK(tools.call("bash", args, context) ==
        tool_result{"the approval request was cancelled before anyone answered; the command did not run", true});
  approver.answer = approval_outcome::unavailable;
  CHECK(tools.call("bash", args, context) ==
        tool_result{"approval is unavailable right now; the command did not run", true});

  context.approve = [](const approval_request&) -> approval_outcome { throw std::runtime_error("dialog crashed"); };
  CHECK(tools.call("bash", args, context) ==
        tool_result{"approval is unavailable right now; the command did not run", true});

  CHECK(approver.asked.size() == 3);
  CHECK(executor.runs.empty());
  CHECK(executor.starts.empty());
}

TEST_CASE("contract 18: an escalated background task starts under the wider mode", "[tools][approval][contract-18]") {
  auto executor = confining(sandbox_mode::read_only);
  bash_tools tools(executor);
  scripted_approver approver;
  auto context = session();
  context.approve = approver.callback();
  auto args = bash_args("make install");
  args["run_in_background"] = true;
  args["sandbox_permissions"] = "workspace-write";
  args["justification"] = "install into the workspace";
  CHECK(tools.call("bash", args, context) == tool_result{"started background task bash-1", false});
  REQUIRE(executor.starts.size() == 1);
  CHECK(executor.starts[0].mode == sandbox_mode::workspace_write);
  CHECK(executor.starts[0].owner == owner_token("s1"));
}

/// A read-only executor's tools, and a session whose questions a scripted approver answers.
struct approving_session {
  fake_executor executor = confining(sandbox_mode::read_only);
  bash_tools<fake_executor> tools{executor};
  scripted_approver approver;
  call_context context = session();
  approving_session() { context.approve = approver.callback(); }
};

TEST_CASE_METHOD(approving_session, "the approver is asked about the whole command, every line and every hidden character",
                 "[tools][approval][issue-25]") {
  approver.answer = approval_outcome::rejected;
  CHECK(tools.call("bash", escalating("ls\ntouch /var/tmp/HIDDEN \xE2\x80\xAE", "danger-full-access"), context)
            .is_error);
  REQUIRE(approver.asked.size() == 1);
  CHECK(approver.asked[0].command == "ls\ntouch /var/tmp/HIDDEN \xE2\x80\xAE");
  CHECK(approval_text(approver.asked[0]).value_or("").find("2 | touch /var/tmp/HIDDEN \\u{202E}") !=
        std::string::npos);
  CHECK(executor.runs.empty());
}

TEST_CASE_METHOD(approving_session, "a request too long to show a person in full is refused before anyone is asked",
                 "[tools][approval][issue-25]") {
  const std::string refusal =
      "the request to run this command under \"workspace-write\" is too long to show a person for approval (its "
      "command, description and justification shown in full would exceed 65536 bytes, and an approval is never asked "
      "about a cut command); the command did not run. Split the work into shorter commands.";

  std::string zero_width = "true #";
  for (int i = 0; i < 10000; ++i) zero_width += "\xE2\x80\x8B";  // 30000 bytes, each shown as \u{200B}
  // A 1 MiB command; one short in bytes whose escapes make it too long; a long justification.
  for (const json& args : {escalating("true #" + std::string(std::size_t{1} << 20, 'x')), escalating(zero_width),
                           escalating("true", "workspace-write", std::string(70000, 'j'))})
    CHECK(tools.call("bash", args, context) == tool_result{refusal, true});
  CHECK(approver.asked.empty());
  CHECK(executor.runs.empty());
}

TEST_CASE("a request the executor rejects fails before anyone is asked", "[tools][approval]") {
  auto executor = confining();
  bash_tools tools(executor);
  scripted_approver approver;
  auto context = session();
  context.approve = approver.callback();
  auto args = bash_args();
  args["workdir"] = "/nonexistent";
  args["sandbox_permissions"] = "workspace-write";
  args["justification"] = "j";
  CHECK(tools.call("bash", args, context) ==
        tool_result{"invalid request: workdir /nonexistent does not exist", true});
  CHECK(approver.asked.empty());
}

// ---- result text -------------------------------------------------------------

TEST_CASE("contract 20: the bash result is the rendered run, a non-zero exit is not an error", "[tools][contract-20]") {
  auto executor = confining();
  bash_tools tools(executor);
  executor.next_result.exit_code = 1;
  executor.next_result.out = {"partial", false, std::nullopt};
  executor.next_result.err = {"touch: Read-only file system\n", false, std::nullopt};
  executor.next_result.sandbox = sandbox_info{sandbox_mode::read_only, true, enforcement::full, false, {}};
  const auto result = tools.call("bash", bash_args("touch x"), session());
  CHECK_FALSE(result.is_error);
  CHECK(result.text == render_run_result(executor.next_result, true));
  CHECK(result.text ==
        "partial\n[stderr]\ntouch: Read-only file system\n[sandbox: file access denied under read-only mode]\n"
        "[to run this with wider file access, repeat the same command with sandbox_permissions "
        "(\"workspace-write\" or \"danger-full-access\") and a justification; do not work around the sandbox]\n"
        "[exit code: 1]");
}

TEST_CASE("contract 20: stderr, a timeout and truncation show in order through the tool", "[tools][contract-20]") {
  auto executor = unconfined();
  bash_tools tools(executor);
  run_result& scripted = executor.next_result;
  scripted.exit_code.reset();
  scripted.signal = SIGKILL;
  scripted.timed_out = true;
  scripted.timeout = 200ms;
  scripted.out = {"tail", true, fs::path("/spill/out")};
  scripted.err = {"oops", false, std::nullopt};
  CHECK(tools.call("bash", bash_args(), session()) ==
        tool_result{"tail\n[output truncated; full output: /spill/out]\n[stderr]\noops\n[timed out after 200ms]\n"
                    "[killed by signal: SIGKILL]",
                    false});
}

TEST_CASE("contract 20: infrastructure failures and aborts are error results", "[tools][contract-20]") {
  auto executor = confining(sandbox_mode::workspace_write);
  bash_tools tools(executor);
  executor.throw_on_run = [] { throw sandbox_unavailable(sandbox_mode::workspace_write, "bwrap: setting up uid map: Permission denied"); };
  CHECK(tools.call("bash", bash_args(), session()) ==
        tool_result{"sandbox unavailable under workspace-write mode: bwrap: setting up uid map: Permission denied; the "
                    "command did not run",
                    true});
  executor.throw_on_run = [] { throw infrastructure_error("chdir /gone: No such file or directory"); };
  CHECK(tools.call("bash", bash_args(), session()) ==
        tool_result{"the command could not be run: chdir /gone: No such file or directory", true});
  executor.throw_on_run = [] { throw std::logic_error("bug \xFF"); };
  CHECK(tools.call("bash", bash_args(), session()) == tool_result{"internal error: bug \xEF\xBF\xBD", true});

  executor.throw_on_run = nullptr;
  executor.next_result.exit_code.reset();
  executor.next_result.signal = SIGTERM;
  executor.next_result.aborted = true;
  executor.next_result.sandbox = sandbox_info{sandbox_mode::workspace_write, false, enforcement::full, false, {}};
  CHECK(tools.call("bash", bash_args(), session()) ==
        tool_result{"(no output)\n[aborted]\n[killed by signal: SIGTERM]", true});
}

TEST_CASE("the caller's stop token reaches a foreground run only, and a cancelled call leaves no background task running",
          "[tools][background][issue-25]") {
  auto executor = unconfined();
  bash_tools tools(executor);
  std::stop_source stop;
  auto context = session();
  context.stop = stop.get_token();
  auto args = bash_args("sleep 100");
  args["run_in_background"] = true;

  SECTION("the token reaches a foreground run, not a background task") {
    tools.call("bash", bash_args(), context);
    CHECK(executor.requests.back().stop.stop_possible());
    tools.call("bash", args, context);
    CHECK_FALSE(executor.requests.back().stop.stop_possible());
  }
  SECTION("cancelled before the start: nothing starts") {
    stop.request_stop();
    CHECK(tools.call("bash", args, context) ==
          tool_result{"the call was cancelled, so its background task did not start; nothing ran", true});
    CHECK(executor.starts.empty());
  }
  SECTION("cancelled while it starts: the task is killed") {
    executor.during_start = [&] { stop.request_stop(); };
    CHECK(tools.call("bash", args, context) ==
          tool_result{"the call was cancelled as its background task started; task bash-1 was killed", true});
    REQUIRE(executor.starts.size() == 1);
    CHECK(executor.get(task_id("bash-1")).status == task_status::killed);
  }
}

TEST_CASE("invalid UTF-8 printed by a command reaches the model as valid UTF-8", "[tools][utf8]") {
  auto executor = unconfined();
  bash_tools tools(executor);
  executor.next_result.exit_code = 0;
  executor.next_result.out = {"\xA9tail \xFF\xFE", true, fs::path("/spill/o")};
  const auto result = tools.call("bash", bash_args(), session());
  CHECK(result.text == "tail \xEF\xBF\xBD\xEF\xBF\xBD\n[output truncated; full output: /spill/o]");
  CHECK_NOTHROW(json(result.text).dump());
}

// ---- background tasks and the owner fence -----------------------------------

TEST_CASE("contract 20: bash_output reports the delta and status, bash_kill kills or says it was a no-op",
          "[tools][contract-20]") {
  auto executor = confining();
  bash_tools tools(executor);
  auto args = bash_args("make");
  args["run_in_background"] = true;
  REQUIRE(tools.call("bash", args, session()) == tool_result{"started background task bash-1", false});
  const task_id id("bash-1");

  executor.tasks["bash-1"].next_read.delta = "building\n";
  CHECK(tools.call("bash_output", {{"task_id", "bash-1"}}, session()) ==
        tool_result{"building\n[status: running]", false});
  CHECK(tools.call("bash_output", {{"task_id", "bash-1"}}, session()) ==
        tool_result{"(no new output)\n[status: running]", false});

  CHECK(tools.call("bash_kill", {{"task_id", "bash-1"}}, session()) == tool_result{"killed task bash-1", false});
  CHECK(tools.call("bash_kill", {{"task_id", "bash-1"}}, session()) ==
        tool_result{"task bash-1 had already finished; nothing was killed\n[status: killed by SIGTERM]", false});

  tools.call("bash", args, session());
  executor.finish(task_id("bash-2"), 1, sandbox_info{sandbox_mode::read_only, true, enforcement::full, false, {}});
  CHECK(tools.call("bash_output", {{"task_id", "bash-2"}}, session()).text ==
        "(no new output)\n[status: completed, exit code: 1]\n[sandbox: file access denied under read-only mode]\n"
        "[to run this with wider file access, repeat the same command with sandbox_permissions "
        "(\"workspace-write\" or \"danger-full-access\") and a justification; do not work around the sandbox]");
  CHECK(tools.call("bash_kill", {{"task_id", "bash-2"}}, session()) ==
        tool_result{"task bash-2 had already finished; nothing was killed\n[status: completed, exit code: 1]", false});
}

TEST_CASE("contract 19: a task owned by another session is fenced off, both ways", "[tools][contract-19]") {
  auto executor = unconfined();
  bash_tools tools(executor);
  auto args = bash_args("sleep 100");
  args["run_in_background"] = true;
  tools.call("bash", args, session("alice"));
  tools.call("bash", args, session("bob"));

  const tool_result fenced_1{"task bash-1 belongs to another session", true};
  const tool_result fenced_2{"task bash-2 belongs to another session", true};
  CHECK(tools.call("bash_output", {{"task_id", "bash-1"}}, session("bob")) == fenced_1);
  CHECK(tools.call("bash_kill", {{"task_id", "bash-1"}}, session("bob")) == fenced_1);
  CHECK(tools.call("bash_output", {{"task_id", "bash-2"}}, session("alice")) == fenced_2);
  CHECK(tools.call("bash_kill", {{"task_id", "bash-2"}}, session("alice")) == fenced_2);
  // A caller without a session is not the owner either.
  CHECK(tools.call("bash_output", {{"task_id", "bash-1"}}, call_context{}) == fenced_1);
  CHECK(executor.tasks["bash-1"].snapshot.status == task_status::running);
  CHECK(executor.tasks["bash-2"].snapshot.status == task_status::running);

  CHECK_FALSE(tools.call("bash_output", {{"task_id", "bash-1"}}, session("alice")).is_error);
  CHECK(tools.call("bash_kill", {{"task_id", "bash-2"}}, session("bob")) == tool_result{"killed task bash-2", false});
}

TEST_CASE("contract 19: an ownerless task is open to every session", "[tools][contract-19]") {
  auto executor = unconfined();
  bash_tools tools(executor);
  const auto id = executor.add_task(std::nullopt);
  CHECK_FALSE(tools.call("bash_output", {{"task_id", id.value()}}, session("alice")).is_error);
  CHECK_FALSE(tools.call("bash_output", {{"task_id", id.value()}}, call_context{}).is_error);
  CHECK(tools.call("bash_kill", {{"task_id", id.value()}}, session("bob")) ==
        tool_result{fmt::format("killed task {}", id), false});

  // A session-less caller starts ownerless tasks.
  auto args = bash_args();
  args["run_in_background"] = true;
  tools.call("bash", args, call_context{});
  CHECK_FALSE(executor.requests.back().owner.has_value());
}

TEST_CASE("contract 11 and 19: each shipped ownership policy decides access from the stored owner",
          "[tools][contract-19][ownership]") {
  static_assert(ownership_policy<tracked_owners> && ownership_policy<no_owners>);
  const std::optional<owner_token> none;
  const std::optional<owner_token> alice = owner_token("alice");
  const std::optional<owner_token> empty = owner_token("");
  // tracked_owners: an owned task is its owner's only; "" is an owner; ownerless is open.
  CHECK(tracked_owners::may_access(alice, alice));
  CHECK_FALSE(tracked_owners::may_access(alice, owner_token("bob")));
  CHECK_FALSE(tracked_owners::may_access(alice, none));
  CHECK_FALSE(tracked_owners::may_access(alice, empty));
  CHECK_FALSE(tracked_owners::may_access(empty, none));
  CHECK(tracked_owners::may_access(empty, empty));
  CHECK(tracked_owners::may_access(none, alice));
  CHECK(tracked_owners::may_access(none, none));
  // no_owners stores nothing, so every task is open.
  CHECK_FALSE(no_owners::keep(alice).has_value());
  CHECK(no_owners::may_access(no_owners::keep(alice), owner_token("bob")));
  CHECK(no_owners::may_access(none, none));
}

TEST_CASE("a settled task's notice goes to its owner", "[tools][notice]") {
  auto executor = confining();
  std::vector<std::pair<std::optional<owner_token>, std::string>> notices;
  {
    bash_tools tools(executor, [&](const std::optional<owner_token>& owner, const std::string& notice) {
      notices.emplace_back(owner, notice);
    });
    auto args = bash_args("touch x");
    args["run_in_background"] = true;
    tools.call("bash", args, session("alice"));
    tools.call("bash", args, session("bob"));
    CHECK(notices.empty());
    executor.finish(task_id("bash-2"), 1, sandbox_info{sandbox_mode::read_only, true, enforcement::full, false, {}});
    REQUIRE(notices.size() == 1);
    CHECK(notices[0].first == owner_token("bob"));
    CHECK(notices[0].second ==
          "background task bash-2 finished; read its output with bash_output\n"
          "command: touch x\n"
          "[status: completed, exit code: 1]\n"
          "[sandbox: file access denied under read-only mode]\n"
          "[to run this with wider file access, repeat the same command with sandbox_permissions "
          "(\"workspace-write\" or \"danger-full-access\") and a justification; do not work around the sandbox]");
    tools.call("bash_kill", {{"task_id", "bash-1"}}, session("alice"));
    REQUIRE(notices.size() == 2);
    CHECK(notices[1].first == owner_token("alice"));
    CHECK_THAT(notices[1].second, Catch::EndsWith("[status: killed by SIGTERM]"));

    // The owner is the executor's fact, whoever started the task: one
    // bash_tools per executor announces every task to its owner.
    executor.finish(executor.add_task(owner_token("carol")), 0);
    REQUIRE(notices.size() == 3);
    CHECK(notices[2].first == owner_token("carol"));
    CHECK(executor.listener_count() == 1);
  }
  CHECK(executor.listener_count() == 0);
}

TEST_CASE("a task that settles before start returns still gets its notice", "[tools][notice]") {
  auto executor = unconfined();
  executor.settle_during_start = true;
  std::vector<std::pair<std::optional<owner_token>, std::string>> notices;
  bash_tools tools(executor, [&](const std::optional<owner_token>& owner, const std::string& notice) {
    notices.emplace_back(owner, notice);
  });
  auto args = bash_args("true");
  args["run_in_background"] = true;
  CHECK(tools.call("bash", args, session("alice")) == tool_result{"started background task bash-1", false});
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].first == owner_token("alice"));
  CHECK_THAT(notices[0].second, Catch::EndsWith("[status: completed, exit code: 0]"));
}

TEST_CASE("a throwing notice callback breaks neither the task nor the call", "[tools][notice]") {
  auto executor = unconfined();
  bash_tools tools(executor, [](const std::optional<owner_token>&, const std::string&) { throw std::runtime_error("harness"); });
  auto args = bash_args();
  args["run_in_background"] = true;
  CHECK_FALSE(tools.call("bash", args, session()).is_error);
  CHECK_NOTHROW(executor.finish(task_id("bash-1"), 0));
  CHECK(tools.call("bash_output", {{"task_id", "bash-1"}}, session()).text ==
        "(no new output)\n[status: completed, exit code: 0]");
}

TEST_CASE("contract 18: a blank description and an empty task_id are rejected naming the field",
          "[tools][validation]") {
  auto executor = unconfined();
  bash_tools tools(executor);
  const auto context = session();
  for (const char* blank : {"", " ", "\t\n "}) {
    INFO("description \"" << blank << "\"");
    CHECK(tools.call("bash", {{"command", "ls"}, {"description", blank}}, context) ==
          tool_result{"field \"description\" must not be empty", true});
  }
  for (const char* tool : {"bash_output", "bash_kill"})
    for (const char* blank : {"", "  "}) {
      INFO(tool << " task_id \"" << blank << "\"");
      CHECK(tools.call(tool, {{"task_id", blank}}, context) ==
            tool_result{"field \"task_id\" must not be empty", true});
    }
  CHECK(executor.requests.empty());
}

TEST_CASE("contract 11/19: an empty session id is an owner like any other", "[tools][contract-19][contract-11]") {
  auto executor = unconfined();
  bash_tools tools(executor);
  auto args = bash_args("sleep 100");
  args["run_in_background"] = true;
  CHECK(tools.call("bash", args, session("")) == tool_result{"started background task bash-1", false});
  REQUIRE(executor.requests.back().owner.has_value());
  CHECK(executor.requests.back().owner == owner_token(""));

  const tool_result fenced{"task bash-1 belongs to another session", true};
  CHECK(tools.call("bash_output", {{"task_id", "bash-1"}}, session("s1")) == fenced);
  CHECK(tools.call("bash_kill", {{"task_id", "bash-1"}}, session("s1")) == fenced);
  // The ownerless caller is not the "" session either.
  CHECK(tools.call("bash_output", {{"task_id", "bash-1"}}, call_context{}) == fenced);
  CHECK(tools.call("bash_kill", {{"task_id", "bash-1"}}, call_context{}) == fenced);
  CHECK(executor.tasks["bash-1"].snapshot.status == task_status::running);

  // The "" session reaches its own task, and its notice goes to "".
  CHECK_FALSE(tools.call("bash_output", {{"task_id", "bash-1"}}, session("")).is_error);
  CHECK(tools.call("bash_kill", {{"task_id", "bash-1"}}, session("")) == tool_result{"killed task bash-1", false});

  // ... while a task of "s1" is fenced off from "".
  tools.call("bash", args, session("s1"));
  CHECK(tools.call("bash_output", {{"task_id", "bash-2"}}, session("")) ==
        tool_result{"task bash-2 belongs to another session", true});

  // Ownerless is its own spelling: no session at all.
  tools.call("bash", args, call_context{});
  CHECK_FALSE(executor.requests.back().owner.has_value());
  CHECK(tools.call("bash_kill", {{"task_id", "bash-3"}}, session("")) == tool_result{"killed task bash-3", false});
}

TEST_CASE("contract 11: notices go to the empty session as to any other, and say when a task is ownerless",
          "[tools][notice][contract-11]") {
  auto executor = unconfined();
  std::vector<std::optional<owner_token>> owners;
  bash_tools tools(executor, [&](const std::optional<owner_token>& owner, const std::string&) {
    owners.push_back(owner);
  });
  auto args = bash_args("true");
  args["run_in_background"] = true;
  tools.call("bash", args, session(""));
  tools.call("bash", args, call_context{});
  tools.call("bash", args, session("s1"));
  executor.finish(task_id("bash-1"), 0);
  executor.finish(task_id("bash-2"), 0);
  executor.finish(task_id("bash-3"), 0);
  CHECK(owners == std::vector<std::optional<owner_token>>{owner_token(""), std::nullopt, owner_token("s1")});
}

TEST_CASE("the caller's progress counters reach a foreground run only", "[tools][progress]") {
  auto executor = unconfined();
  bash_tools tools(executor);
  auto context = session();
  context.progress = std::make_shared<run_progress>();
  tools.call("bash", bash_args(), context);
  CHECK(executor.requests.back().progress == context.progress);
  auto args = bash_args();
  args["run_in_background"] = true;
  tools.call("bash", args, context);
  CHECK(executor.requests.back().progress == nullptr);
}

namespace {

/// The JSON Schema type name of `value`, as tool_facts_schema spells them.
std::string schema_type(const json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return "boolean";
  if (value.is_number_integer()) return "integer";
  if (value.is_string()) return "string";
  if (value.is_object()) return "object";
  return value.type_name();
}

/// `facts` holds exactly the schema's keys, each of a type it allows.
void check_against_schema(const json& facts) {
  const json schema = tool_facts_schema();
  CHECK(schema["required"].size() == schema["properties"].size());
  for (const auto& [key, property] : schema["properties"].items()) {
    INFO(key);
    REQUIRE(facts.contains(key));
    const json& allowed = property["type"];
    const std::string type = schema_type(facts[key]);
    CHECK((allowed.is_array() ? std::find(allowed.begin(), allowed.end(), type) != allowed.end() : allowed == type));
  }
  CHECK(facts.size() == schema["properties"].size());
}

}  // namespace

TEST_CASE("contract 20: tool results carry their facts as JSON beside the byte-exact text, in one shape the "
          "schema declares",
          "[tools][facts]") {
  auto executor = confining();
  bash_tools tools(executor);
  executor.next_result.exit_code = 1;
  executor.next_result.sandbox = sandbox_info{sandbox_mode::read_only, true, enforcement::full, false, {}};
  executor.next_result.out.truncated = true;
  executor.next_result.out.spill_path = "/spill/out";
  const auto foreground = tools.call("bash", bash_args("touch x"), session());
  REQUIRE(foreground.facts);
  check_against_schema(*foreground.facts);
  CHECK((*foreground.facts)["exit_code"] == 1);
  CHECK((*foreground.facts)["signal"].is_null());
  CHECK((*foreground.facts)["signal_name"].is_null());
  CHECK((*foreground.facts)["denied"] == true);
  CHECK((*foreground.facts)["mode"] == "read-only");
  CHECK((*foreground.facts)["enforcement"] == "full");
  CHECK((*foreground.facts)["timed_out"] == false);
  CHECK((*foreground.facts)["aborted"] == false);
  CHECK((*foreground.facts)["stdout_truncated"] == true);
  CHECK((*foreground.facts)["stdout_spill_path"] == "/spill/out");
  CHECK((*foreground.facts)["stderr_spill_path"].is_null());
  CHECK((*foreground.facts)["task_id"].is_null());
  // The meaning of run --json: the same keys say the same thing.
  const json as_run_json = to_json(executor.next_result);
  CHECK((*foreground.facts)["exit_code"] == as_run_json["exit_code"]);
  CHECK((*foreground.facts)["stdout_spill_path"] == as_run_json["stdout"]["spill_path"]);
  CHECK((*foreground.facts)["enforcement"] == as_run_json["sandbox"]["enforcement"]);
  // Equality is what the model sees: the facts only restate the text.
  CHECK(foreground == tool_result{foreground.text, false});

  auto args = bash_args("make");
  args["run_in_background"] = true;
  const auto started = tools.call("bash", args, session());
  REQUIRE(started.facts);
  check_against_schema(*started.facts);
  CHECK((*started.facts)["task_id"] == "bash-1");
  CHECK((*started.facts)["status"] == "running");
  CHECK((*started.facts)["exit_code"].is_null());
  const auto read = tools.call("bash_output", {{"task_id", "bash-1"}}, session());
  REQUIRE(read.facts);
  check_against_schema(*read.facts);
  CHECK((*read.facts)["task_id"] == "bash-1");
  CHECK((*read.facts)["status"] == "running");
  CHECK((*read.facts)["lossy"] == false);
  CHECK((*read.facts)["killed"].is_null());
  const auto killed = tools.call("bash_kill", {{"task_id", "bash-1"}}, session());
  REQUIRE(killed.facts);
  check_against_schema(*killed.facts);
  CHECK((*killed.facts)["killed"] == true);
  const auto again = tools.call("bash_kill", {{"task_id", "bash-1"}}, session());
  REQUIRE(again.facts);
  check_against_schema(*again.facts);
  CHECK((*again.facts)["killed"] == false);
  CHECK((*again.facts)["status"] == "killed");
  CHECK((*again.facts)["lossy"].is_null());

  const auto bad = tools.call("bash", {{"command", "ls"}}, session());
  CHECK(bad.is_error);
  CHECK_FALSE(bad.facts);
}

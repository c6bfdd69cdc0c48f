// The model-facing tools over the real executors: real processes, the real
// sandbox, real spill files (docs/contract.md item 18-21). Compiles to nothing
// until the executors exist.
#if __has_include(<bashexec/bashexec.hpp>)

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "executor_test_support.hpp"

#include <bashexec/bashexec.hpp>
#include <bashexec/tools/bash_tools.hpp>

using namespace bashexec;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// Scratch directories live under test_support::scratch_root() (/var/tmp),
/// whatever the working directory: `workspace-write` gives a bwrap-sandboxed
/// command a private /tmp, and a write there would not land where the test
/// looks (a build tree under /tmp made this test fail).
struct scratch_dir : test_support::temp_dir {
  scratch_dir() : test_support::temp_dir(test_support::scratch_root(), "bashexec-live-") {}
};

/// A spawn policy that records what every child was really given, then
/// spawns it with posix_spawn.
struct recording_spawn {
  static constexpr std::string_view name = "recording";

  struct record {
    std::vector<std::string> argv;
    std::vector<std::string> env;
    bool stdin_is_pipe = false;
  };
  static inline std::mutex mutex;
  static inline std::vector<record> records;

  process_handle spawn(const launch_plan& plan) const {
    struct stat st {};
    const bool pipe = plan.stdin_fd >= 0 && ::fstat(plan.stdin_fd, &st) == 0 && S_ISFIFO(st.st_mode);
    {
      std::lock_guard lock(mutex);
      records.push_back({plan.argv, plan.env, pipe});
    }
    return posix_spawner{}.spawn(plan);
  }
};

using recording_executor = basic_executor<policies<spawn_with<recording_spawn>>>;

json bash_args(std::string command) { return {{"command", std::move(command)}, {"description", "live test"}}; }

call_context session(std::string id, const fs::path& cwd) {
  call_context context;
  context.session = owner_token(std::move(id));
  context.cwd = cwd;
  return context;
}

/// Collects background notices from the executor's thread.
struct notice_box {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::pair<std::optional<owner_token>, std::string>> notices;

  notice_callback callback() {
    return [this](const std::optional<owner_token>& owner, const std::string& notice) {
      std::lock_guard lock(mutex);
      notices.emplace_back(owner, notice);
      changed.notify_all();
    };
  }
  bool wait_for(std::size_t count) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, 10s, [&] { return notices.size() >= count; });
  }
};

/// True when this machine can confine at all; otherwise the sandbox tests
/// have nothing to prove here.
bool sandbox_usable(sandbox_executor& executor) {
  try {
    exec_request probe;
    probe.command = "true";
    executor.run(executor.resolve(probe));
    return true;
  } catch (const sandbox_unavailable& e) {
    WARN("no usable sandbox on this machine: " << e.what());
    return false;
  }
}

}  // namespace

TEST_CASE("live, contract 20: stderr, a timeout and truncation all show in order, the signal last",
          "[tools][live][contract-20]") {
  scratch_dir work;
  executor_config config;
  config.cwd = work.path();
  config.output_cap = 8;
  config.kill_grace = 500ms;
  local_executor executor(config);
  bash_tools tools(executor);
  auto args = bash_args("printf 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\n'; echo warn >&2; sleep 30");
  args["timeoutMs"] = 300;
  const auto result = tools.call("bash", args, session("s1", work.path()));
  INFO(result.text);
  CHECK_FALSE(result.is_error);
  CHECK_THAT(result.text, Catch::StartsWith("aaaaaaa\n\n[output truncated; full output: /"));
  CHECK_THAT(result.text, Catch::EndsWith("]\n[stderr]\nwarn\n[timed out after 300ms]\n[killed by signal: SIGTERM]"));
  // The named spill file holds the whole stream.
  const auto start = result.text.find("full output: ") + 13;
  const fs::path spill = result.text.substr(start, result.text.find(']', start) - start);
  std::ifstream in(spill);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(all == "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n");
}

TEST_CASE("live, contract 20: a non-zero exit ends with the exit marker and is not an error", "[tools][live]") {
  scratch_dir work;
  executor_config config;
  config.cwd = work.path();
  local_executor executor(config);
  bash_tools tools(executor);
  CHECK(tools.call("bash", bash_args("echo out; echo err >&2; exit 3"), session("s1", work.path())) ==
        tool_result{"out\n[stderr]\nerr\n[exit code: 3]", false});
  CHECK(tools.call("bash", bash_args("true"), session("s1", work.path())) == tool_result{"(no output)", false});
}

TEST_CASE("live: no shell state persists, workdir is resolved against the session cwd", "[tools][live]") {
  scratch_dir work;
  fs::create_directory(work.path() / "sub");
  executor_config config;
  config.cwd = "/";
  local_executor executor(config);
  bash_tools tools(executor);
  const auto context = session("s1", work.path());
  CHECK(tools.call("bash", bash_args("pwd"), context).text == work.path().string() + "\n");
  auto args = bash_args("cd sub && export X=1 && pwd");
  CHECK(tools.call("bash", args, context).text == (work.path() / "sub").string() + "\n");
  args = bash_args("pwd; echo \"${X-unset}\"");
  args["workdir"] = "sub";
  CHECK(tools.call("bash", args, context).text == (work.path() / "sub").string() + "\nunset\n");
}

TEST_CASE("live, contract 21: model-supplied stdin and env never reach the child", "[tools][live][contract-21]") {
  scratch_dir work;
  executor_config config;
  config.cwd = work.path();
  recording_executor executor(config);
  bash_tools tools(executor);
  {
    std::lock_guard lock(recording_spawn::mutex);
    recording_spawn::records.clear();
  }
  auto args = bash_args("cat; echo \"[${MODEL_VAR-unset}]\"");
  args["stdin"] = "typed by the model\n";
  args["env"] = {{"MODEL_VAR", "set by the model"}};
  CHECK(tools.call("bash", args, session("s1", work.path())) == tool_result{"[unset]\n", false});

  std::lock_guard lock(recording_spawn::mutex);
  REQUIRE(recording_spawn::records.size() == 1);
  const auto& child = recording_spawn::records[0];
  CHECK_FALSE(child.stdin_is_pipe);
  for (const auto& entry : child.env) CHECK_THAT(entry, !Catch::StartsWith("MODEL_VAR="));
}

TEST_CASE("live: invalid UTF-8 printed by a command renders as valid UTF-8", "[tools][live][utf8]") {
  scratch_dir work;
  executor_config config;
  config.cwd = work.path();
  local_executor executor(config);
  bash_tools tools(executor);
  const auto result = tools.call("bash", bash_args("printf 'a\\377b\\342\\202'"), session("s1", work.path()));
  CHECK(result.text == "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  CHECK_NOTHROW(json(result.text).dump());
}

TEST_CASE("live, contract 19-20: background tasks, the owner fence and the completion notice",
          "[tools][live][contract-19]") {
  scratch_dir work;
  executor_config config;
  config.cwd = work.path();
  config.kill_grace = 500ms;
  local_executor executor(config);
  notice_box box;
  bash_tools tools(executor, box.callback());
  const auto alice = session("alice", work.path());
  const auto bob = session("bob", work.path());

  auto args = bash_args("echo hi; echo oops >&2; exit 3");
  args["run_in_background"] = true;
  const auto started = tools.call("bash", args, alice);
  REQUIRE(started == tool_result{"started background task bash-1", false});
  REQUIRE(box.wait_for(1));
  {
    std::lock_guard lock(box.mutex);
    CHECK(box.notices[0].first == owner_token("alice"));
    CHECK(box.notices[0].second ==
          "background task bash-1 finished; read its output with bash_output\n"
          "command: echo hi; echo oops >&2; exit 3\n"
          "[status: completed, exit code: 3]");
  }
  CHECK(tools.call("bash_output", {{"task_id", "bash-1"}}, bob) ==
        tool_result{"task bash-1 belongs to another session", true});
  CHECK(tools.call("bash_output", {{"task_id", "bash-1"}}, alice) ==
        tool_result{"hi\n[stderr]\noops\n[status: completed, exit code: 3]", false});
  CHECK(tools.call("bash_output", {{"task_id", "bash-1"}}, alice) ==
        tool_result{"(no new output)\n[status: completed, exit code: 3]", false});

  args = bash_args("sleep 100");
  args["run_in_background"] = true;
  REQUIRE(tools.call("bash", args, bob).text == "started background task bash-2");
  CHECK(tools.call("bash_kill", {{"task_id", "bash-2"}}, alice) ==
        tool_result{"task bash-2 belongs to another session", true});
  CHECK(tools.call("bash_kill", {{"task_id", "bash-2"}}, bob) == tool_result{"killed task bash-2", false});
  executor.wait(task_id("bash-2"));
  CHECK(tools.call("bash_kill", {{"task_id", "bash-2"}}, bob) ==
        tool_result{"task bash-2 had already finished; nothing was killed\n[status: killed by SIGTERM]", false});
  REQUIRE(box.wait_for(2));
  std::lock_guard lock(box.mutex);
  CHECK(box.notices[1].first == owner_token("bob"));
  CHECK_THAT(box.notices[1].second, Catch::EndsWith("[status: killed by SIGTERM]"));
}

TEST_CASE("live, contract 9: bash_output and bash_kill of a task the retention policy forgot say it was forgotten",
          "[tools][live][retention]") {
  scratch_dir work;
  executor_config config;
  config.cwd = work.path();
  config.retention.max_tasks = 1;  // the second task to settle pushes the first out
  local_executor executor(config);
  notice_box box;
  bash_tools tools(executor, box.callback());
  const auto alice = session("alice", work.path());
  for (int i = 1; i <= 2; ++i) {
    auto args = bash_args("echo task " + std::to_string(i));
    args["run_in_background"] = true;
    REQUIRE(tools.call("bash", args, alice).text == "started background task bash-" + std::to_string(i));
    REQUIRE(box.wait_for(static_cast<std::size_t>(i)));  // settled: the next one settles after it
  }
  // The notice goes out just before the settled task joins the retention queue.
  REQUIRE(test_support::eventually([&] {
    try {
      executor.get(task_id("bash-1"));
      return false;
    } catch (const task_forgotten&) {
      return true;
    }
  }));
  const std::string limits =
      "settled tasks are kept for at most 1 h, at most the 1 that settled last, and at most 16 MiB of their output "
      "in memory";
  // Not "unknown task" (the model did start it) and not the owner fence.
  CHECK(tools.call("bash_output", {{"task_id", "bash-1"}}, alice) ==
        tool_result{"task bash-1 finished and was forgotten; its output is no longer available (" + limits + ")", true});
  CHECK(tools.call("bash_kill", {{"task_id", "bash-1"}}, alice) ==
        tool_result{"task bash-1 had already finished and was forgotten; nothing was killed (" + limits + ")", false});
  // The newest settled task is kept, and an id never issued is still unknown.
  CHECK(tools.call("bash_output", {{"task_id", "bash-2"}}, alice) ==
        tool_result{"task 2\n[status: completed, exit code: 0]", false});
  CHECK(tools.call("bash_output", {{"task_id", "bash-3"}}, alice) == tool_result{"unknown task bash-3", true});
}

TEST_CASE("live, contract 19: a read or kill racing the start of the same id never gets past the owner fence",
          "[tools][live][contract-19][race]") {
  // The fence asks the executor, which holds a task's owner from the moment
  // its id is issued: there is no window in which the id answers without it.
  scratch_dir work;
  executor_config config;
  config.cwd = work.path();
  local_executor executor(config);
  notice_box box;
  bash_tools tools(executor, box.callback());
  const auto alice = session("alice", work.path());
  const auto mallory = session("mallory", work.path());
  constexpr int tasks = 40;

  std::atomic<bool> done{false};
  std::vector<std::string> breaches;
  std::thread prober([&] {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    for (int k = 1; k <= tasks && std::chrono::steady_clock::now() < deadline;) {
      const std::string id = "bash-" + std::to_string(k);
      const char* tool = k % 2 ? "bash_output" : "bash_kill";
      const tool_result r = tools.call(tool, {{"task_id", id}}, mallory);
      if (r == tool_result{"unknown task " + id, true}) {
        if (done.load()) break;
        std::this_thread::yield();  // not issued yet: ask again, racing the start
        continue;
      }
      if (r != tool_result{"task " + id + " belongs to another session", true}) breaches.push_back(id + ": " + r.text);
      ++k;
    }
  });
  auto args = bash_args("true");
  args["run_in_background"] = true;
  for (int k = 1; k <= tasks; ++k)
    CHECK(tools.call("bash", args, alice).text == "started background task bash-" + std::to_string(k));
  done.store(true);
  prober.join();
  CHECK(breaches.empty());
  for (const auto& breach : breaches) UNSCOPED_INFO(breach);
  // Each task, however fast it settled (before `start` returned, even), is
  // announced once, to its owner.
  REQUIRE(box.wait_for(tasks));
  std::lock_guard lock(box.mutex);
  CHECK(box.notices.size() == static_cast<std::size_t>(tasks));
  for (const auto& [owner, notice] : box.notices) CHECK(owner == owner_token("alice"));
}

TEST_CASE("live, contract 19: the executor's ownership policy decides the fence, no_owners opening every task",
          "[tools][live][contract-19][ownership]") {
  scratch_dir work;
  executor_config config;
  config.cwd = work.path();
  basic_executor<policies<own_with<no_owners>>> executor(config);
  notice_box box;
  bash_tools tools(executor, box.callback());
  auto args = bash_args("echo shared");
  args["run_in_background"] = true;
  REQUIRE(tools.call("bash", args, session("alice", work.path())).text == "started background task bash-1");
  REQUIRE(box.wait_for(1));
  CHECK(tools.call("bash_output", {{"task_id", "bash-1"}}, session("bob", work.path())) ==
        tool_result{"shared\n[status: completed, exit code: 0]", false});
  std::lock_guard lock(box.mutex);
  CHECK_FALSE(box.notices[0].first.has_value());  // nothing stored: the notice is ownerless
}

TEST_CASE("live, contract 10 and 19: a notice goes to its owner even when retention forgot the task before delivery",
          "[tools][live][retention][race]") {
  scratch_dir work;
  executor_config config;
  config.cwd = work.path();
  config.retention.max_tasks = 1;  // each task that settles pushes the one before it out
  local_executor executor(config);

  // The first notice holds the notifier thread until the others have settled
  // and all but the last task are forgotten.
  std::mutex mutex;
  std::condition_variable changed;
  bool released = false;
  std::vector<std::pair<std::optional<owner_token>, std::string>> notices;
  bash_tools tools(executor, [&](const std::optional<owner_token>& owner, const std::string& notice) {
    std::unique_lock lock(mutex);
    if (notices.empty()) changed.wait_for(lock, 20s, [&] { return released; });
    notices.emplace_back(owner, notice);
    changed.notify_all();
  });
  const std::vector<std::optional<owner_token>> owners{owner_token("alice"), owner_token("bob"), std::nullopt,
                                                       owner_token(""), owner_token("erin")};
  auto args = bash_args("true");
  args["run_in_background"] = true;
  for (std::size_t k = 0; k < owners.size(); ++k) {
    call_context context;
    context.session = owners[k];
    context.cwd = work.path();
    REQUIRE(tools.call("bash", args, context).text == "started background task bash-" + std::to_string(k + 1));
    // One at a time, so that the tasks settle (and are forgotten) in order.
    REQUIRE(test_support::eventually([&] {
      try {
        return executor.get(task_id("bash-" + std::to_string(k + 1))).status != task_status::running;
      } catch (const task_forgotten&) {
        return true;
      }
    }));
  }
  for (std::size_t k = 1; k < owners.size(); ++k) {
    const task_id id("bash-" + std::to_string(k));
    REQUIRE(test_support::eventually([&] {
      try {
        executor.get(id);
        return false;
      } catch (const task_forgotten&) {
        return true;
      }
    }));
    CHECK_FALSE(executor.owner_of(id).has_value());  // the executor has forgotten it
  }
  {
    std::unique_lock lock(mutex);
    released = true;
    changed.notify_all();
    REQUIRE(changed.wait_for(lock, 10s, [&] { return notices.size() == owners.size(); }));
  }
  for (std::size_t k = 0; k < owners.size(); ++k) {
    INFO("bash-" << k + 1);
    CHECK(notices[k].first == owners[k]);
    CHECK_THAT(notices[k].second, Catch::StartsWith("background task bash-" + std::to_string(k + 1) + " finished"));
  }
}

TEST_CASE("live, contract 18: an approved escalation's write lands, and the next call is back under the session's mode",
          "[tools][live][contract-18][sandbox]") {
  scratch_dir root;
  const fs::path workspace = root.path() / "workspace";
  const fs::path outside = root.path() / "outside";
  fs::create_directories(workspace);
  fs::create_directories(outside);
  executor_config config;
  config.cwd = workspace;
  config.sandbox.workspace_root = workspace;
  sandbox_executor executor(config);
  if (!sandbox_usable(executor)) return;
  bash_tools tools(executor);

  session_log log;
  set_sandbox_mode(log, sandbox_mode::workspace_write);
  std::vector<approval_request> asked;
  auto context = session("s1", workspace);
  context.log = &log;
  context.approve = [&](const approval_request& request) {
    asked.push_back(request);
    return approval_outcome::allowed_once;
  };

  // The session's mode lets the workspace be written, not the outside.
  CHECK(tools.call("bash", bash_args("touch inside"), context) == tool_result{"(no output)", false});
  CHECK(fs::exists(workspace / "inside"));
  const std::string touch_outside = fmt::format("touch {}/first", outside.string());
  auto denied = tools.call("bash", bash_args(touch_outside), context);
  INFO(denied.text);
  CHECK_FALSE(denied.is_error);
  CHECK_THAT(denied.text, Catch::Contains("[sandbox: file access denied under workspace-write mode]\n"
                                          "[to run this with wider file access, repeat the same command with "
                                          "sandbox_permissions (\"danger-full-access\") and a justification"));
  CHECK_THAT(denied.text, Catch::EndsWith("\n[exit code: 1]"));
  CHECK_FALSE(fs::exists(outside / "first"));

  // The sanctioned retry: the same command, escalated and approved once.
  auto args = bash_args(touch_outside);
  args["sandbox_permissions"] = "danger-full-access";
  args["justification"] = "the user asked for a file outside the workspace";
  CHECK(tools.call("bash", args, context) == tool_result{"(no output)", false});
  CHECK(fs::exists(outside / "first"));
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].current_mode == sandbox_mode::workspace_write);
  CHECK(asked[0].requested_mode == sandbox_mode::danger_full_access);

  // The grant was for that call only.
  const auto after = tools.call("bash", bash_args(fmt::format("touch {}/second", outside.string())), context);
  CHECK_THAT(after.text, Catch::Contains("[sandbox: file access denied under workspace-write mode]"));
  CHECK_FALSE(fs::exists(outside / "second"));
  CHECK(asked.size() == 1);
}

TEST_CASE("live, contract 18: without the override the executor default (read-only) denies the workspace write",
          "[tools][live][contract-18][sandbox]") {
  scratch_dir root;
  executor_config config;
  config.cwd = root.path();
  sandbox_executor executor(config);
  if (!sandbox_usable(executor)) return;
  bash_tools tools(executor);
  auto context = session("s1", root.path());
  const auto result = tools.call("bash", bash_args("touch x"), context);
  CHECK_THAT(result.text, Catch::Contains("[sandbox: file access denied under read-only mode]"));
  CHECK_FALSE(fs::exists(root.path() / "x"));

  session_log log;
  set_sandbox_mode(log, sandbox_mode::workspace_write);
  context.log = &log;
  CHECK(tools.call("bash", bash_args("touch x"), context) == tool_result{"(no output)", false});
  CHECK(fs::exists(root.path() / "x"));
}

#endif  // __has_include(<bashexec/bashexec.hpp>)

TEST_CASE("live, contract 20: the lossy line lists the spill paths joined with a comma and nothing else",
          "[tools][live][contract-20][contract-6]") {
  scratch_dir work;
  executor_config config;
  config.cwd = work.path();
  config.output_cap = 16;
  local_executor executor(config);
  bash_tools tools(executor);
  const auto alice = session("alice", work.path());
  auto args = bash_args("seq 1000; seq 2000 >&2");
  args["run_in_background"] = true;
  REQUIRE(tools.call("bash", args, alice).text == "started background task bash-1");
  executor.wait(task_id("bash-1"));
  const std::string text = tools.call("bash_output", {{"task_id", "bash-1"}}, alice).text;
  const std::string head = "[some output was dropped from memory; full output: ";
  const auto at = text.find(head);
  REQUIRE(at != std::string::npos);
  const auto end = text.find("]\n", at);
  REQUIRE(end != std::string::npos);
  const std::string listed = text.substr(at + head.size(), end - at - head.size());
  const auto comma = listed.find(", ");
  REQUIRE(comma != std::string::npos);
  const fs::path out_path = listed.substr(0, comma);
  const fs::path err_path = listed.substr(comma + 2);
  // Each is a path and only a path: the whole stream is in it.
  std::string expected_out, expected_err;
  for (int i = 1; i <= 1000; ++i) expected_out += std::to_string(i) + "\n";
  for (int i = 1; i <= 2000; ++i) expected_err += std::to_string(i) + "\n";
  CHECK(test_support::slurp(out_path) == expected_out);
  CHECK(test_support::slurp(err_path) == expected_err);
  CHECK_THAT(out_path.filename().string(), Catch::EndsWith("-stdout"));
  CHECK_THAT(err_path.filename().string(), Catch::EndsWith("-stderr"));
  CHECK(text.substr(end + 2) == "[status: completed, exit code: 0]");
}

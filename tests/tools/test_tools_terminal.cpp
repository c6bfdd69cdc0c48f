// The model-facing terminal: `bash` with `tty`, the `bash_input` tool, and
// the waiting marker of bash_output (docs/contract.md items 26-27), over the
// real executors and real interactive programs — a `read -p` prompt,
// `python3 -i`, a password prompt on /dev/tty, `git add -p` and a
// full-screen program in raw mode.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include <bashexec/bashexec.hpp>
#include <bashexec/tools/bash_tools.hpp>

#include "executor_test_support.hpp"
#include "sandbox_test_support.hpp"

using namespace bashexec;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

template <class Executor>
executor_config live_config(const std::filesystem::path& workspace) {
  executor_config config = test_support::fast_config();
  config.cwd = workspace;
  if constexpr (Executor::confines) config.sandbox.default_mode = sandbox_mode::workspace_write;
  return config;
}

/// The task id a waiting marker names: `… answer with bash_input on bash-N]`.
std::string waiting_task(const std::string& text) {
  const std::string mark = "answer with bash_input on ";
  const auto at = text.rfind(mark);
  if (at == std::string::npos) return {};
  const auto end = text.find(']', at);
  return text.substr(at + mark.size(), end - at - mark.size());
}

/// One executor on a scratch workspace, its tools, and the calling session.
template <class Executor>
struct live_session {
  test_support::temp_dir workspace;
  Executor exec{live_config<Executor>(workspace.path())};
  bash_tools<Executor> tools{exec};
  call_context me = [] {
    call_context context;
    context.session = owner_token("me");
    return context;
  }();
};

bool has_program(const char* name) {
  return std::system(fmt::format("command -v {} >/dev/null 2>&1", name).c_str()) == 0;
}

}  // namespace

#define LIVE_EXECUTORS local_executor, test_support::bwrap_executor, test_support::landlock_executor

TEMPLATE_TEST_CASE("bash offers tty and bash_input over an executor that takes input", "[terminal][tools]",
                   LIVE_EXECUTORS) {
  test_support::temp_dir workspace;
  TestType exec(live_config<TestType>(workspace.path()));
  bash_tools tools(exec);
  const json schemas = tools.schemas();
  REQUIRE(schemas.size() == 4);
  CHECK(schemas[3]["name"] == "bash_input");
  CHECK(schemas[0]["input_schema"]["properties"].contains("tty"));
  const std::string description = schemas[0]["description"];
  CHECK(description.find("interactive programs do not work") == std::string::npos);
  CHECK(description.find("bash_input") != std::string::npos);
}

TEMPLATE_TEST_CASE("a prompt in a tty call is answered with bash_input", "[terminal][tools]", LIVE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  live_session<TestType> live;
  auto& [workspace, exec, tools, me] = live;
  auto first = tools.call("bash",
                          {{"command", "echo installing; read -p 'Proceed? [Y/n] ' a; echo \"answer=$a\"; exit 4"},
                           {"description", "asks a question"},
                           {"tty", true}},
                          me);
  INFO(first.text);
  CHECK_FALSE(first.is_error);
  CHECK(first.text.find("installing\n") != std::string::npos);
  CHECK(first.text.find("[waiting for input: \"Proceed? [Y/n] \"; answer with bash_input on bash-") !=
        std::string::npos);
  const std::string id = waiting_task(first.text);
  REQUIRE_FALSE(id.empty());
  CHECK(first.facts->at("input_wait").at("prompt") == "Proceed? [Y/n] ");
  CHECK(first.facts->at("task_id") == id);

  SECTION("another session may not answer it") {
    call_context other;
    other.session = owner_token("other");
    auto refused = tools.call("bash_input", {{"task_id", id}, {"input", "y\n"}}, other);
    CHECK(refused.is_error);
    CHECK(refused.text == fmt::format("task {} belongs to another session", id));
  }
  SECTION("its owner answers and sees the rest") {
    auto answered = tools.call("bash_input", {{"task_id", id}, {"input", "y\n"}}, me);
    INFO(answered.text);
    CHECK_FALSE(answered.is_error);
    CHECK(answered.text.find("answer=y") != std::string::npos);
    CHECK(answered.text.find("[status: completed, exit code: 4]") != std::string::npos);
    CHECK(answered.facts->at("input_written") == 2);
    auto late = tools.call("bash_input", {{"task_id", id}, {"input", "y\n"}}, me);
    CHECK(late.is_error);
    CHECK(late.text.find("settled") != std::string::npos);
  }
}

TEMPLATE_TEST_CASE("real interactive programs are driven through bash_input", "[terminal][tools]", LIVE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  live_session<TestType> live;
  auto& [workspace, exec, tools, me] = live;
  auto tty = [&](std::string command) {
    return tools.call("bash", {{"command", command}, {"description", "interactive"}, {"tty", true}}, me);
  };
  auto type = [&](const std::string& id, std::string input) {
    return tools.call("bash_input", {{"task_id", id}, {"input", input}}, me);
  };

  SECTION("python3 -i, a REPL") {
    if (!has_program("python3")) SKIP_UNLESS(std::optional<std::string>("python3 is not installed"));
    auto started = tty("python3 -i -q");
    INFO(started.text);
    const std::string id = waiting_task(started.text);
    REQUIRE_FALSE(id.empty());
    CHECK(started.facts->at("input_wait").at("prompt") == ">>> ");
    auto answered = type(id, "print(6 * 7)\n");
    INFO(answered.text);
    CHECK(answered.text.find("42") != std::string::npos);
    CHECK(answered.text.find("[waiting for input: \">>> \"]") != std::string::npos);
    auto ended = type(id, "\x04");
    INFO(ended.text);
    CHECK(ended.text.find("[status: completed, exit code: 0]") != std::string::npos);
  }
  SECTION("a password prompt read from /dev/tty without echo") {
    auto started = tty("exec 3<>/dev/tty; stty -echo <&3; printf 'Password: ' >&3; read -r secret <&3; "
                       "stty echo <&3; echo; echo \"length ${#secret}\"");
    INFO(started.text);
    const std::string id = waiting_task(started.text);
    REQUIRE_FALSE(id.empty());
    auto answered = type(id, "hunter2\n");
    INFO(answered.text);
    CHECK(answered.text.find("length 7") != std::string::npos);
    CHECK(answered.text.find("hunter2") == std::string::npos);  // not echoed
  }
  SECTION("git add -p") {
    if (!has_program("git")) SKIP_UNLESS(std::optional<std::string>("git is not installed"));
    // .git stays read-only under workspace-write (protected paths): this
    // executor lets the command stage.
    executor_config config = live_config<TestType>(workspace.path());
    config.sandbox.protected_paths.clear();
    TestType git_exec(config);
    bash_tools git_tools(git_exec);
    const auto repo = workspace.path() / "repo";
    std::filesystem::create_directory(repo);
    REQUIRE(std::system(fmt::format("cd {} && git init -q && git config user.email t@e && git config user.name t && "
                                    "printf 'a\\nb\\n' > f && git add f && git commit -qm one && printf 'a\\nc\\n' > f",
                                    repo.string())
                            .c_str()) == 0);
    auto started = git_tools.call(
        "bash",
        {{"command", "git -c core.pager=cat add -p"}, {"description", "stage"}, {"tty", true}, {"workdir", repo.string()}},
        me);
    INFO(started.text);
    const std::string id = waiting_task(started.text);
    REQUIRE_FALSE(id.empty());
    CHECK(started.text.find("Stage this hunk") != std::string::npos);
    auto answered = git_tools.call("bash_input", {{"task_id", id}, {"input", "y\n"}}, me);
    INFO(answered.text);
    CHECK(answered.text.find("[status: completed, exit code: 0]") != std::string::npos);
    auto staged = git_tools.call("bash", {{"command", "git diff --cached --stat"}, {"description", "staged"},
                                      {"workdir", repo.string()}}, me);
    CHECK(staged.text.find("1 file changed") != std::string::npos);
  }
  SECTION("a full-screen program waiting on a key in raw mode") {
    auto started = tty("stty raw -echo; printf '\\033[2J\\033[HPress any key'; k=$(dd bs=1 count=1 2>/dev/null); "
                       "stty sane; echo; echo \"key=$k\"");
    INFO(started.text);
    const std::string id = waiting_task(started.text);
    REQUIRE_FALSE(id.empty());
    CHECK(started.facts->at("input_wait").at("raw") == true);
    auto answered = type(id, "q");
    INFO(answered.text);
    CHECK(answered.text.find("key=q") != std::string::npos);
  }
}

TEMPLATE_TEST_CASE("^C through bash_input interrupts a running command and bash_output shows the wait",
                   "[terminal][tools]", LIVE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  live_session<TestType> live;
  auto& [workspace, exec, tools, me] = live;
  auto started = tools.call("bash",
                            {{"command", "while read -p 'cmd> ' c; do sleep 30; echo ran; done"},
                             {"description", "a loop"},
                             {"tty", true},
                             {"run_in_background", true}},
                            me);
  REQUIRE_FALSE(started.is_error);
  const std::string id = started.facts->at("task_id");
  REQUIRE(exec.wait_for_input(task_id(id), 10s));
  auto shown = tools.call("bash_output", {{"task_id", id}}, me);
  CHECK(shown.text.find("[waiting for input: \"cmd> \"]\n[status: running]") != std::string::npos);
  // An answer starts the 30 s sleep; ^C ends it and the whole loop.
  auto busy = tools.call("bash_input", {{"task_id", id}, {"input", "go\n"}, {"wait_ms", 300}}, me);
  CHECK(busy.text.find("[waiting for input") == std::string::npos);
  auto stopped = tools.call("bash_input", {{"task_id", id}, {"input", "\x03"}}, me);
  INFO(stopped.text);
  CHECK(stopped.text.find("[status: running]") == std::string::npos);
}

// Carried shell state at the tool layer (docs/contract.md item 29): a
// session made to carry its working directory and exported environment
// starts each `bash` call where the last one ended, over the real
// executors — unconfined, bwrap and Landlock — root and (rerun) nobody.
// The state lives in the session's log: replayed after a restart, never
// seen by another session, dropped by a killed call, withheld from a wider
// call where a loader variable could change what an approval means.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <bashexec/bashexec.hpp>
#include <bashexec/tools/bash_tools.hpp>
#include <bashexec/tools/approval_text.hpp>

#include "executor_test_support.hpp"
#include "sandbox_test_support.hpp"

using namespace bashexec;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr state_carry both{.cwd = true, .env = true};

template <class Executor>
executor_config live_config(const fs::path& workspace) {
  executor_config config = test_support::fast_config();
  config.cwd = workspace;
  if constexpr (Executor::confines) config.sandbox.default_mode = sandbox_mode::read_only;
  return config;
}

/// One executor on a scratch workspace, tools that carry `carry`, and a
/// session with a log of its own.
template <class Executor>
struct carrying_session {
  explicit carrying_session(state_carry carry = both) : tools(exec, {}, carry) {
    fs::create_directories(workspace.path() / "sub" / "deeper");
  }

  test_support::temp_dir workspace;
  Executor exec{live_config<Executor>(workspace.path())};
  bash_tools<Executor> tools;
  session_log log;
  call_context context(const char* session = "me") {
    call_context c;
    c.session = owner_token(session);
    c.cwd = workspace.path();
    c.log = &log;
    c.grant_log = &log;
    return c;
  }
  tool_result bash(const std::string& command, json extra = json::object()) {
    json args{{"command", command}, {"description", "test"}};
    args.update(extra);
    return tools.call("bash", args, context());
  }
};

}  // namespace

#define LIVE_EXECUTORS local_executor, test_support::bwrap_executor, test_support::landlock_executor

TEMPLATE_TEST_CASE("Contract 29: without --carry every call is a fresh shell, as before", "[shell-state][tools]",
                   LIVE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  carrying_session<TestType> s(state_carry{});
  const std::string description = s.tools.schemas()[0]["description"];
  CHECK(description.find("No shell state persists between calls") != std::string::npos);
  CHECK_FALSE(s.tools.schemas()[0]["input_schema"]["properties"].contains("reset"));
  CHECK_FALSE(s.bash("cd sub && export CARRIED=yes").is_error);
  const auto next = s.bash("pwd; echo \"[${CARRIED-}]\"");
  CHECK(next.text == s.workspace.str() + "\n[]\n");
  CHECK(s.log.events().empty());
  const auto reset = s.bash("true", {{"reset", true}});
  CHECK(reset.is_error);
  CHECK(reset.text == "field \"reset\": this session carries no shell state");
}

TEMPLATE_TEST_CASE("Contract 29: cd and export carry to the session's next call, and only to that session",
                   "[shell-state][tools]", LIVE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  carrying_session<TestType> s;
  const std::string description = s.tools.schemas()[0]["description"];
  CHECK(description.find("No shell state persists") == std::string::npos);
  CHECK(description.find("carry over to the next call") != std::string::npos);
  CHECK(s.tools.schemas()[0]["input_schema"]["properties"].contains("reset"));

  const auto first = s.bash("cd sub/deeper && export GREETING='hello world' MULTI=$'a\\nb'; echo moved");
  CHECK(first.text == "moved\n");
  CHECK(first.facts->at("cwd") == ".");
  const auto second = s.bash("pwd; echo \"$GREETING\"; echo \"$MULTI\"");
  CHECK(second.text == "[cwd: sub/deeper]\n" + s.workspace.str() + "/sub/deeper\nhello world\na\nb\n");
  CHECK(second.facts->at("cwd") == "sub/deeper");

  SECTION("a relative workdir resolves against the carried directory") {
    const auto up = s.bash("pwd", {{"workdir", ".."}});
    CHECK(up.text.ends_with(s.workspace.str() + "/sub\n"));
  }
  SECTION("another session starts fresh") {
    json args{{"command", "pwd; echo \"[${GREETING-}]\""}, {"description", "other"}};
    session_log other_log;
    call_context other = s.context("other");
    other.log = other.grant_log = &other_log;
    CHECK(s.tools.call("bash", args, other).text == s.workspace.str() + "\n[]\n");
  }
  SECTION("reset goes back to the root and the starting environment") {
    const auto reset = s.bash("pwd; echo \"[${GREETING-}]\"", {{"reset", true}});
    CHECK(reset.text == s.workspace.str() + "\n[]\n");
    CHECK(s.bash("pwd").text == s.workspace.str() + "\n");
  }
  SECTION("unset takes a starting variable away, and reset brings it back") {
    REQUIRE(s.bash("echo \"[${HOME-none}]\"").text != "[none]\n");
    s.bash("unset HOME");
    CHECK(s.bash("echo \"[${HOME-none}]\"").text == "[cwd: sub/deeper]\n[none]\n");
    CHECK(s.bash("echo \"[${HOME-none}]\"", {{"reset", true}}).text != "[none]\n");
  }
}

TEMPLATE_TEST_CASE("Contract 29: --carry cwd carries the directory only, --carry env the environment only",
                   "[shell-state][tools]", LIVE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  {
    carrying_session<TestType> s(state_carry{.cwd = true});
    s.bash("cd sub; export ONLY=x");
    CHECK(s.bash("pwd; echo \"[${ONLY-}]\"").text ==
          "[cwd: sub]\n" + s.workspace.str() + "/sub\n[]\n");
  }
  {
    carrying_session<TestType> s(state_carry{.env = true});
    s.bash("cd sub; export ONLY=x");
    CHECK(s.bash("pwd; echo \"[${ONLY-}]\"").text == s.workspace.str() + "\n[x]\n");
  }
}

TEMPLATE_TEST_CASE("Contract 29: a killed, timed-out or state-breaking call carries nothing forward, and says so",
                   "[shell-state][tools]", LIVE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  carrying_session<TestType> s;
  s.bash("cd sub; export KEPT=1");
  const auto events_before = s.log.events().size();
  SECTION("timed out") {
    const auto late = s.bash("cd deeper; export KEPT=2; sleep 5", {{"timeoutMs", 200}});
    CHECK(late.text.find("[shell state: the command did not exit by itself") != std::string::npos);
    CHECK(late.text.find("the next call starts where this one did]") != std::string::npos);
  }
  SECTION("killed by a signal of its own") {
    const auto killed = s.bash("cd deeper; export KEPT=2; kill -9 $$");
    CHECK(killed.text.find("[shell state: ") != std::string::npos);
  }
  SECTION("its state grew past the limit") {
    const auto big = s.bash("cd deeper; export KEPT=2 HUGE=$(head -c 1200000 /dev/zero | tr '\\0' x)");
    CHECK(big.text.find("[shell state: ") != std::string::npos);
  }
  SECTION("it replaced the exit trap") {
    const auto trapped = s.bash("trap - EXIT; cd deeper; export KEPT=2");
    CHECK(trapped.text.find("[shell state: ") != std::string::npos);
  }
  CHECK(s.log.events().size() == events_before);
  CHECK(s.bash("pwd; echo $KEPT").text == "[cwd: sub]\n" + s.workspace.str() + "/sub\n1\n");
}

TEMPLATE_TEST_CASE("Contract 29: a carried directory that is gone or outside the root falls back to the root",
                   "[shell-state][tools]", LIVE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  carrying_session<TestType> s;
  SECTION("deleted after the call that entered it") {
    s.bash("cd sub/deeper");
    fs::remove(s.workspace.path() / "sub" / "deeper");
    const auto next = s.bash("pwd");
    CHECK(next.text == fmt::format("[cwd: {}/sub/deeper no longer exists; this call runs in the session root]\n{}\n",
                                   s.workspace.str(), s.workspace.str()));
  }
  SECTION("deleted by the call itself") {
    // bash's `pwd -P` fails in a deleted directory: the state says where it was.
    set_sandbox_mode(s.log, sandbox_mode::workspace_write);
    const auto gone = s.bash("mkdir doomed && cd doomed && rmdir ../doomed; echo ok");
    INFO(gone.text);
    CHECK(gone.text.ends_with("ok\n"));
    const auto next = s.bash("pwd");
    CHECK(next.text.ends_with(s.workspace.str() + "\n"));
  }
  SECTION("outside the session root") {
    s.bash("cd /");
    const auto next = s.bash("pwd");
    CHECK(next.text == fmt::format("[cwd: / lies outside the session root; this call runs in the root]\n{}\n",
                                   s.workspace.str()));
  }
}

TEMPLATE_TEST_CASE("Contract 29: credentials, the executor's own variables and invalid UTF-8 are never carried",
                   "[shell-state][tools]", LIVE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  carrying_session<TestType> s;
  const auto set = s.bash(
      "export GITHUB_TOKEN=ghp_secret AWS_SECRET_ACCESS_KEY=k TERM=evil PAGER=evil BASHEXEC_X=1 PLAIN=ok "
      "BYTES=$'\\xff\\xfe'");
  CHECK(set.text == "[shell state: 1 variable not carried (not valid UTF-8): BYTES]\n(no output)");
  const auto next = s.bash("echo \"${GITHUB_TOKEN-}|${AWS_SECRET_ACCESS_KEY-}|${TERM-}|${PAGER-}|${BASHEXEC_X-}|"
                           "${PLAIN-}|${BYTES-}\"");
  CHECK(next.text.find("ghp_secret") == std::string::npos);
  CHECK(next.text.find("evil") == std::string::npos);
  CHECK(next.text.ends_with("|ok|\n"));
  const auto state = current_shell_state(s.log);
  CHECK(state.env == std::map<std::string, std::string>{{"PLAIN", "ok"}});
}

TEMPLATE_TEST_CASE("Contract 29: a restarted server replays the session's state from its log",
                   "[shell-state][tools]", LIVE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  fs::create_directories(workspace.path() / "sub");
  test_support::temp_dir logs;
  const fs::path file = session_log_path(logs.path(), "me");
  const auto call = [&](const std::string& command) {
    TestType exec(live_config<TestType>(workspace.path()));
    bash_tools<TestType> tools(exec, {}, both);
    session_log log(file);  // a new server: the log replayed from its file
    call_context context;
    context.session = owner_token("me");
    context.cwd = workspace.path();
    context.log = context.grant_log = &log;
    return tools.call("bash", {{"command", command}, {"description", "test"}}, context).text;
  };
  CHECK(call("cd sub && export VENV=active") == "(no output)");
  CHECK(call("pwd; echo $VENV") == "[cwd: sub]\n" + workspace.str() + "/sub\nactive\n");
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  CHECK(json::parse(line) == json{{"type", "shell-state"}, {"cwd", workspace.str() + "/sub"}, {"env", {{"VENV", "active"}}}});
}

TEMPLATE_TEST_CASE("Contract 29: a background call starts from the carried state and carries nothing back",
                   "[shell-state][tools]", LIVE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  carrying_session<TestType> s;
  s.bash("cd sub; export FROM=call");
  const auto started = s.bash("pwd; echo $FROM; cd deeper; export FROM=task", {{"run_in_background", true}});
  CHECK(started.text.starts_with("[cwd: sub]\n"));
  const std::string id = started.facts->at("task_id");
  s.exec.wait(task_id(id));
  const auto read = s.tools.call("bash_output", {{"task_id", id}}, s.context());
  CHECK(read.text.starts_with(s.workspace.str() + "/sub\ncall\n"));
  CHECK(s.bash("pwd; echo $FROM").text == "[cwd: sub]\n" + s.workspace.str() + "/sub\ncall\n");
}

TEMPLATE_TEST_CASE("Contract 29: a tty call starts from the carried state", "[shell-state][tools][terminal]",
                   LIVE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  carrying_session<TestType> s;
  s.bash("cd sub; export FROM=call");
  const auto tty = s.bash("pwd; echo $FROM; test -t 0 && echo terminal", {{"tty", true}});
  CHECK(tty.text == "[cwd: sub]\n" + s.workspace.str() + "/sub\ncall\nterminal\n");
}

TEMPLATE_TEST_CASE("Contract 29: a wider call's question shows the carried state, and loader variables stay behind",
                   "[shell-state][tools][escalation]", test_support::bwrap_executor, test_support::landlock_executor) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  carrying_session<TestType> s;
  std::optional<approval_request> asked;
  const auto context = [&] {
    call_context c = s.context();
    c.approve = [&](const approval_request& request) {
      asked = request;
      return approval_outcome::allowed_once;
    };
    return c;
  };
  const auto call = [&](const std::string& command, json extra = json::object()) {
    json args{{"command", command}, {"description", "test"}};
    args.update(extra);
    return s.tools.call("bash", args, context());
  };
  call("cd sub; export PLAIN=1 LD_LIBRARY_PATH=/opt/evil BASH_ENV=/opt/evil.sh");
  const json wider{{"sandbox_permissions", "workspace-write"}, {"justification", "writes a file"}};
  const auto escalated = call("echo \"$PLAIN|${LD_LIBRARY_PATH-}|${BASH_ENV-}\"; pwd", wider);
  REQUIRE(asked);
  CHECK(asked->carried_cwd == s.workspace.str() + "/sub");
  CHECK(asked->carried_env == std::map<std::string, std::string>{{"PLAIN", "1"}});
  CHECK(asked->withheld_env == std::vector<std::string>{"BASH_ENV", "LD_LIBRARY_PATH"});
  const std::string question = approval_text(*asked).value();
  CHECK_THAT(question, Catch::Contains("Starts in (carried from the session's earlier calls): " + s.workspace.str() +
                                       "/sub"));
  CHECK_THAT(question, Catch::Contains("Environment carried from the session's earlier calls (1 variable):\n  PLAIN=1"));
  CHECK_THAT(question,
             Catch::Contains("Not carried into this wider call (set under a narrower mode): BASH_ENV LD_LIBRARY_PATH"));
  CHECK(escalated.text == "[cwd: sub]\n1||\n" + s.workspace.str() + "/sub\n");
  // The wider call did not take them away: the session's next call has them.
  CHECK(call("echo \"${LD_LIBRARY_PATH-}|${BASH_ENV-}\"").text == "[cwd: sub]\n/opt/evil|/opt/evil.sh\n");
  SECTION("a variable set by a wider call is the wider mode's") {
    call("export LD_PRELOAD_HINT=x LD_AUDIT=/opt/audit.so", wider);
    const auto state = current_shell_state(s.log);
    CHECK(state.set_under.at("LD_AUDIT") == sandbox_mode::workspace_write);
    CHECK(state.set_under.at("LD_LIBRARY_PATH") == sandbox_mode::read_only);
    // A narrower call takes it (ld.so complains that it is not there).
    CHECK(call("echo \"[${LD_AUDIT-}]\"").text.starts_with("[cwd: sub]\n[/opt/audit.so]\n"));
  }
}

TEMPLATE_TEST_CASE("Contract 29: a call that provably changes nothing keeps the state without capturing it",
                   "[shell-state][tools]", LIVE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  carrying_session<TestType> s;
  REQUIRE_FALSE(s.bash("cd sub && export KEPT=1").is_error);
  const auto recorded = s.log.events().size();
  for (const char* inert : {"true", "ls -a >/dev/null", "ls 2>&1 | head -1 >/dev/null; echo done >/dev/null",
                            "./missing-program 2>/dev/null || true"}) {
    INFO(inert);
    REQUIRE(may_change_shell_state(inert) == false);
    s.bash(inert);
  }
  CHECK(s.log.events().size() == recorded);  // nothing new to record
  CHECK(s.bash("pwd; echo $KEPT").text == "[cwd: sub]\n" + s.workspace.str() + "/sub\n1\n");
  SECTION("a glob or a variable that expands to cd is captured") {
    std::ofstream(s.workspace.path() / "sub" / "cd").put('\n');
    CHECK(may_change_shell_state("c? deeper"));
    s.bash("c? deeper");
    CHECK(s.bash("pwd").text == "[cwd: sub/deeper]\n" + s.workspace.str() + "/sub/deeper\n");
    s.bash("export GO=cd");
    s.bash("$GO ..");
    CHECK(s.bash("pwd").text == "[cwd: sub]\n" + s.workspace.str() + "/sub\n");
  }
  SECTION("a startup file named by BASH_ENV runs in every shell: its calls are captured") {
    std::ofstream(s.workspace.path() / "sub" / "startup.sh") << "export FROM_STARTUP=yes\n";
    REQUIRE_FALSE(s.bash("export BASH_ENV=$PWD/startup.sh").is_error);
    s.bash("true");
    CHECK(current_shell_state(s.log).env.at("FROM_STARTUP") == "yes");
  }
}

TEST_CASE("Contract 29: may_change_shell_state is false only for plain words naming programs", "[shell-state][tools]") {
  for (const char* inert :
       {"", "true", "ls -la", "git status --short", "npm test 2>&1 | tail -20", "make -j2 && ./a.out; echo done",
        "pytest -k=fast tests/ > out.txt 2>&1", "grep -r foo src/*.cpp", "sleep 1 &", "[ -d sub ] && echo yes",
        "cat file.txt | sort | uniq -c", "exit 3", "./configure --prefix=/usr", "/usr/bin/env", "echo a\necho b",
        "cmake --build build -j2 &>log"}) {
    INFO(inert);
    CHECK_FALSE(may_change_shell_state(inert));
  }
  for (const char* changing :
       {"cd sub", "ls && cd sub", "ls; export A=1", "A=1", "A=1 true", "source venv/bin/activate", ". ./env.sh",
        "echo \"$(cd /)\"", "echo $HOME", "echo ${A:=1}", "eval ls", "exec ls", "builtin cd /", "command cd /",
        "pushd /tmp", "popd", "read LINE", "printf -v A x", "set -a", "shopt -s extglob", "unset A", "declare -x A",
        "f() { cd /; }; f", "{ cd /; }", "(cd /)", "'cd' /", "c\\d /", "c? /", "~ /", "*", "%1", "ls # cd",
        "time cd /", "! cd /", "if true; then cd /; fi", ">out cd /", "2>err cd /", "for x in a; do :; done",
        "let x=1", "mapfile A", "trap 'cd /' EXIT", "alias x=cd", "hash -r", "umask 077", "ls `cd /`",
        "ls\tcd_ok\ncd /"}) {
    INFO(changing);
    CHECK(may_change_shell_state(changing));
  }
}

TEST_CASE("Contract 29: --carry spells cwd, env, cwd,env or none", "[shell-state][tools]") {
  CHECK(parse_state_carry("cwd") == state_carry{.cwd = true});
  CHECK(parse_state_carry("env") == state_carry{.env = true});
  CHECK(parse_state_carry("cwd,env") == both);
  CHECK(parse_state_carry("env,cwd") == both);
  CHECK(parse_state_carry("none") == state_carry{});
  for (const char* bad : {"", "cwd,", ",env", "cwd,cwd", "CWD", "all", "cwd env"}) {
    INFO(bad);
    CHECK_FALSE(parse_state_carry(bad));
  }
  for (const state_carry carry : {state_carry{}, state_carry{.cwd = true}, state_carry{.env = true}, both})
    CHECK(parse_state_carry(to_string(carry)) == carry);
}

TEST_CASE("Contract 29: shell-state events are written by record_shell_state only and read back as written",
          "[shell-state][session]") {
  session_log log;
  CHECK_THROWS_WITH(log.append("shell-state", {{"cwd", "/"}}),
                    "shell-state events are written only by record_shell_state");
  shell_state_event state{.cwd = "/work/sub", .env = {{"A", "1"}, {"LD_PRELOAD", "/x.so"}}, .unset = {"HOME"},
                          .set_under = {{"LD_PRELOAD", sandbox_mode::workspace_write}}};
  record_shell_state(log, state);
  CHECK(current_shell_state(log) == state);
  CHECK(event_from_json(event_to_json(state)) == session_event{state});
  CHECK_THROWS_AS(record_shell_state(log, shell_state_event{.env = {{"BAD", "\xff"}}}), std::invalid_argument);
  CHECK_THROWS_AS(record_shell_state(log, shell_state_event{.env = {{"A=B", "1"}}}), std::invalid_argument);
  CHECK_THROWS_AS(record_shell_state(log, shell_state_event{.cwd = "relative"}), std::invalid_argument);
  CHECK(current_shell_state(log) == state);
  record_shell_state(log, {});
  CHECK(current_shell_state(log).empty());

  for (const char* corrupt : {R"({"type":"shell-state","cwd":7})", R"({"type":"shell-state","env":{"A":1}})",
                              R"({"type":"shell-state","unset":[""]})",
                              R"({"type":"shell-state","env":{"A":"1"},"set_under":{"A":"everything"}})",
                              R"({"type":"shell-state","set_under":{"A":"read-only"}})",
                              R"({"type":"shell-state","changes":"yes"})", R"({"type":"shell-state","drop":["A"]})",
                              R"({"type":"shell-state","changes":true,"drop":[""]})",
                              R"({"type":"shell-state","changes":true,"cwd":"relative"})",
                              R"({"type":"shell-state","changes":true,"set_under":{"A":"read-only"}})"}) {
    INFO(corrupt);
    CHECK_THROWS_AS(replay_session_log(std::string(corrupt) + "\n{}\n", "test"), session_log_error);
  }
}

TEST_CASE("Contract 29: a log stores each state as what changed from the one before, and replays the same states",
          "[shell-state][session]") {
  test_support::temp_dir dir;
  const fs::path file = dir.path() / "s.jsonl";
  std::vector<shell_state_event> recorded;
  shell_state_event state{.cwd = "/w/a"};
  for (int i = 0; i < 20; ++i) state.env.emplace(fmt::format("CARRIED_{:02}", i), fmt::format("/opt/venv/{}", i));
  recorded.push_back(state);
  state.cwd = "/w/b";  // a cd
  recorded.push_back(state);
  state.env["NEW"] = "1";  // an export, an unset of a carried name, of a host name
  state.env.erase("CARRIED_03");
  state.unset = {"HOME"};
  recorded.push_back(state);
  state.env["LD_PRELOAD"] = "/x.so";  // a loader variable, and the mode that set it
  state.set_under = {{"LD_PRELOAD", sandbox_mode::read_only}};
  recorded.push_back(state);
  state.cwd.clear();  // back to the root; the loader variable and the unset go
  state.env.erase("LD_PRELOAD");
  state.set_under.clear();
  state.unset.clear();
  recorded.push_back(state);
  recorded.push_back({});  // the reset
  recorded.push_back({.env = {{"A", "1"}}});
  {
    session_log log(file);
    for (const auto& each : recorded) record_shell_state(log, each);
  }
  std::vector<std::string> lines;
  {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  REQUIRE(lines.size() == recorded.size());
  CHECK(lines[0] == event_to_json(recorded[0]).dump());  // nothing before it: the whole state
  CHECK(lines[1] == R"({"changes":true,"cwd":"/w/b","type":"shell-state"})");
  for (std::size_t i = 1; i <= 4; ++i) {
    INFO("line " << i + 1 << ": " << lines[i]);
    CHECK(lines[i].find(R"("changes":true)") != std::string::npos);
    CHECK(lines[i].size() < event_to_json(recorded[i]).dump().size());
  }
  CHECK(lines[4].find(R"("cwd":null)") != std::string::npos);
  CHECK(lines[5] == R"({"type":"shell-state"})");  // the reset is whole
  CHECK(lines[6] == event_to_json(recorded[6]).dump());

  session_log replayed(file);
  std::vector<session_event> expected(recorded.begin(), recorded.end());
  CHECK(replayed.events() == expected);
  // A line of changes with no state before it changes the empty state.
  const auto alone = replay_session_log(R"({"type":"shell-state","changes":true,"env":{"A":"1"}})" "\n", "test");
  REQUIRE(alone.events.size() == 1);
  CHECK(alone.events[0] == session_event{shell_state_event{.env = {{"A", "1"}}}});
}

TEST_CASE("Contract 29: a log of 10,000 state changes replays to its last state", "[shell-state][session]") {
  test_support::temp_dir dir;
  const fs::path file = dir.path() / "s.jsonl";
  {
    std::ofstream out(file);
    for (int i = 0; i < 10000; ++i)
      out << event_to_json(shell_state_event{.cwd = fmt::format("/w/{}", i), .env = {{"N", std::to_string(i)}}}).dump()
          << '\n';
  }
  session_log log(file);
  CHECK(log.events().size() == 10000);
  CHECK(current_shell_state(log).cwd == "/w/9999");
  CHECK(current_shell_state(log).env.at("N") == "9999");
}

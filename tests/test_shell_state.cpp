// A shell that remembers (docs/contract.md item 28): the executor captures a
// shell's final working directory and exported environment from the shell
// itself, through a file of its own — never from its output — and takes a
// carried state back as request data (workdir, env, env_unset). Under the
// unconfined executor and both confining backends.
#include <chrono>
#include <filesystem>
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include <bashexec/bashexec.hpp>
#include <bashexec/detail/engine/shell_state_capture.hpp>

#include "executor_test_support.hpp"
#include "sandbox_test_support.hpp"

using namespace bashexec;
using namespace std::chrono_literals;

namespace {

template <class Executor>
executor_config state_config(const std::filesystem::path& workspace) {
  executor_config config = test_support::fast_config();
  config.cwd = workspace;
  if constexpr (Executor::confines) config.sandbox.default_mode = sandbox_mode::workspace_write;
  return config;
}

exec_request capturing(std::string command) {
  exec_request request{.command = std::move(command)};
  request.capture_state = true;
  return request;
}

}  // namespace

#define STATE_EXECUTORS local_executor, test_support::bwrap_executor, test_support::landlock_executor

TEMPLATE_TEST_CASE("a shell's final directory and exports are captured from the shell, not its output",
                   "[shell_state]", STATE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  std::filesystem::create_directories(workspace.path() / "sub" / "dir");
  TestType exec(state_config<TestType>(workspace.path()));
  SECTION("cd, export and unset, and the exit status kept") {
    auto result = exec.run(exec.resolve(capturing(
        "cd sub/dir && export GREETING='hello world' MULTI=$'a\\nb' && unset HOME; "
        "echo 'bashexec-state-2 PWD=/etc'; exit 3")));
    CHECK(result.exit_code == 3);
    CHECK(result.out.text == "bashexec-state-2 PWD=/etc\n");  // the output is the command's, untouched
    REQUIRE(result.final_state);
    CHECK(result.final_state->cwd == std::filesystem::canonical(workspace.path() / "sub" / "dir"));
    CHECK(result.final_state->env.at("GREETING") == "hello world");
    CHECK(result.final_state->env.at("MULTI") == "a\nb");
    CHECK(std::find(result.final_state->unset.begin(), result.final_state->unset.end(), "HOME") !=
          result.final_state->unset.end());
    // Never carried: the executor's own, the shell's bookkeeping.
    for (const char* name : {"TERM", "PAGER", "NO_COLOR", "PWD", "OLDPWD", "SHLVL", "_"})
      CHECK_FALSE(result.final_state->env.count(name));
  }
  SECTION("a carried state is request data: the next call starts from it") {
    auto first = exec.run(exec.resolve(capturing("cd sub && export STEP=one && unset HOME")));
    REQUIRE(first.final_state);
    exec_request next = capturing("echo \"$PWD $STEP ${HOME-unset}\"");
    next.workdir = first.final_state->cwd;
    next.env = first.final_state->env;
    next.env_unset = first.final_state->unset;
    auto second = exec.run(exec.resolve(std::move(next)));
    CHECK(second.out.text == std::filesystem::canonical(workspace.path() / "sub").string() + " one unset\n");
    REQUIRE(second.final_state);
    CHECK(second.final_state->env == first.final_state->env);  // unchanged, still carried
  }
  SECTION("credential-shaped names are never carried") {
    auto result = exec.run(exec.resolve(capturing("export API_TOKEN=s3cret GITHUB_KEY=x PLAIN=y")));
    REQUIRE(result.final_state);
    CHECK_FALSE(result.final_state->env.count("API_TOKEN"));
    CHECK_FALSE(result.final_state->env.count("GITHUB_KEY"));
    CHECK(result.final_state->env.at("PLAIN") == "y");
  }
}

TEMPLATE_TEST_CASE("a shell that did not exit by itself, or spoiled its record, carries nothing and says why",
                   "[shell_state][hostile]", STATE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  executor_config config = state_config<TestType>(workspace.path());
  config.shell_state_limit = 64 << 10;
  TestType exec(config);
  auto expect_dropped = [&](const std::string& command, const std::string& why,
                            const std::string& or_why = "(none)") {
    INFO(command);
    exec_request request = capturing(command);
    request.timeout = 1500ms;
    auto result = exec.run(exec.resolve(std::move(request)));
    CHECK_FALSE(result.final_state);
    REQUIRE(result.state_notice);
    CHECK_THAT(*result.state_notice, Catch::Contains(why) || Catch::Contains(or_why));
  };
  expect_dropped("export X=1; sleep 30", "did not exit by itself");  // the 1.5 s timeout
  // 100,000 exported variables: bash itself needs minutes to list them (its
  // export table is rebuilt per variable), so the call's timeout bounds it.
  expect_dropped("for i in $(seq 100000); do export V$i=$i; done", "did not exit by itself");
  expect_dropped("trap 'echo mine' EXIT; export X=1", "wrote no state");
  expect_dropped("export BIG=$(head -c 200000 /dev/zero | tr '\\0' x)", "exceeds the limit");
  expect_dropped("for i in $(seq 3000); do export V$i=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa; done", "exceeds the limit");
  // Its descriptor closed, or written to by the command (a forged record).
  expect_dropped("exec 3>&-", "wrote no state");
  expect_dropped("printf 'bashexec-state-2\\0/etc\\0declare -x FORGED=\"1\"\\n\\0end\\0' >&3", "more than once");
}

TEMPLATE_TEST_CASE("a child that writes to the state descriptor after the shell exits changes nothing",
                   "[shell_state][hostile]", STATE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  TestType exec(state_config<TestType>(workspace.path()));
  auto result = exec.run(exec.resolve(capturing(
      "( sleep 0.3; printf 'bashexec-state-2\\0/etc\\0declare -x FORGED=\"1\"\\n\\0end\\0' >&3 ) >/dev/null 2>&1 & export HONEST=1")));
  REQUIRE(result.final_state);
  CHECK(result.final_state->env.at("HONEST") == "1");
  CHECK_FALSE(result.final_state->env.contains("FORGED"));
  CHECK(result.final_state->cwd == std::filesystem::canonical(workspace.path()));
}

TEMPLATE_TEST_CASE("a shell that deleted its own directory still reports its exports", "[shell_state][hostile]",
                   STATE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  TestType exec(state_config<TestType>(workspace.path()));
  std::filesystem::create_directory(workspace.path() / "gone");
  auto result = exec.run(exec.resolve(capturing("cd gone && rmdir ../gone; export AFTER=1")));
  REQUIRE(result.final_state);
  CHECK(result.final_state->env.at("AFTER") == "1");
  CHECK_FALSE(std::filesystem::exists(result.final_state->cwd));  // the carrier falls back (issue 42's next step)
}

TEMPLATE_TEST_CASE("every byte a variable can hold comes back as the shell had it", "[shell_state][hostile]",
                   STATE_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  TestType exec(state_config<TestType>(workspace.path()));
  const std::map<std::string, std::string> expected{
      {"QUOTES", "say \"hi\" 'there' \\ $HOME `id`"},
      {"CONTROL", "tab\there\nnewline\x1b[0m\x7f\x01"},
      {"BYTES", "caf\xc3\xa9 \xff\xfe"},  // valid UTF-8 and not
      {"EMPTY", ""},
      {"NAMEREF", "QUOTES"},
  };
  const std::string assignments =
      "export QUOTES='say \"hi\" '\\''there'\\'' \\ $HOME `id`' CONTROL=$'tab\\there\\nnewline\\e[0m\\x7f\\x01' "
      "BYTES=$'caf\\xc3\\xa9 \\xff\\xfe' EMPTY=; declare -nx NAMEREF=QUOTES; "
      "declare -ax ARRAY=(1 ')' $'\\ndeclare -x FORGED=1'); export NEVER_SET";
  for (const std::string& mode : {std::string(), std::string("set -o posix; ")}) {
    INFO(mode);
    auto result = exec.run(exec.resolve(capturing(mode + assignments)));
    REQUIRE(result.final_state);
    for (const auto& [name, value] : expected) {
      INFO(name);
      REQUIRE(result.final_state->env.count(name));
      CHECK(result.final_state->env.at(name) == value);
    }
    for (const char* name : {"ARRAY", "FORGED", "NEVER_SET"}) CHECK_FALSE(result.final_state->env.count(name));
  }
}

TEST_CASE("the state record parser takes bash's quoting and refuses what is truncated, malformed or repeated",
          "[shell_state]") {
  using bashexec::detail::parse_state_record;
  std::string why;
  auto bytes = [](const auto& literal) { return std::string(literal, sizeof literal - 1); };
  const std::string good = bytes(
      "bashexec-state-2\0/w\n\0"
      "declare -x A=\"1\"\n"
      "declare -ax ARR=([0]=\"x\" [1]=$'\\n')\n"
      "declare -x B=\"x=\\\"y\\\" \\\\ \\$ \\`\"\n"
      "declare -x C=$'\\a\\b\\e\\E\\f\\n\\r\\t\\v\\\\\\'\\\"\\?\\101\\x42\\u00e9\\U0001F600\\cA'\n"
      "declare -x UNSET\n"
      "export -r D=\"posix\"\n"
      "export E=\"\"\n"
      "\0end\0");
  auto record = parse_state_record(good, why);
  INFO(why);
  REQUIRE(record);
  CHECK(record->cwd == "/w");
  const std::vector<std::pair<std::string, std::string>> env{
      {"A", "1"},
      {"B", "x=\"y\" \\ $ `"},
      {"C", "\a\b\x1b\x1b\f\n\r\t\v\\'\"?AB\xc3\xa9\xf0\x9f\x98\x80\x01"},
      {"D", "posix"},
      {"E", ""},
  };
  CHECK(record->env == env);
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    INFO(cut);
    CHECK_FALSE(parse_state_record(good.substr(0, cut), why));
  }
  CHECK_FALSE(parse_state_record(good + good, why));
  auto one = [&](const std::string& line) {
    return parse_state_record(bytes("bashexec-state-2\0/w\0") + line + bytes("\0end\0"), why);
  };
  CHECK(one("declare -x A=\"1\"\n"));
  for (const char* line : {"declare -x A=1\n", "declare -x A=\"1\"", "declare -x =\"1\"\n", "declare -x 1A=\"1\"\n",
                           "declare -x A-B=\"1\"\n", "declare -x A=\"1\"x\n", "declare -x A=\"1\"\"\n",
                           "declare -x A=$'1\n", "declare -x A=$'\\q'\n", "declare -x A=$'\\x'\n",
                           "declare -x A=$'\\U110000'\n", "declare A=\"1\"\n", "declare -x\n", "typeset -x A=\"1\"\n",
                           "A=1\n", "\n"}) {
    INFO(line);
    CHECK_FALSE(one(line));
    CHECK_THAT(why, Catch::Contains("malformed"));
  }
  CHECK_FALSE(parse_state_record(bytes("other\0/w\0\0end\0"), why));
}

TEST_CASE("a request's env_unset removes names, and a bad name is refused naming the field", "[shell_state]") {
  local_executor exec(test_support::fast_config());
  exec_request request{.command = "echo \"${HOME-none} ${KEEP-none}\""};
  request.env_unset = {"HOME", "KEEP"};
  request.env = std::map<std::string, std::string>{{"KEEP", "kept"}};
  CHECK(exec.run(exec.resolve(std::move(request))).out.text == "none kept\n");
  exec_request bad{.command = "true"};
  bad.env_unset = {"A=B"};
  CHECK_THROWS_WITH(exec.resolve(std::move(bad)), Catch::Contains("env_unset[0]"));
}

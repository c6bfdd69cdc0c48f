// Talking to a running command (docs/contract.md items 22-27,
// docs/terminals.md): a terminal of the command's own, input to a running
// task, and "waiting for input" as a fact read from the kernel — through
// the unconfined executor and both confining backends (bwrap, Landlock),
// each over fork_exec; the unconfined ones over posix_spawn and the
// prespawned pool too.
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <bashexec/bashexec.hpp>
#include <bashexec/signal_name.hpp>

#include "executor_test_support.hpp"
#include "sandbox_test_support.hpp"

using namespace bashexec;
using namespace std::chrono_literals;
using test_support::eventually;
using test_support::fast_config;

namespace {

using posix_spawn_terminal_executor = basic_executor<policies<spawn_with<posix_spawner>>>;
using prespawned_local_executor =
    test_support::warm_executor<policies<spawn_with<prespawned>>>;

template <class Executor>
executor_config terminal_config(const std::filesystem::path& workspace) {
  executor_config config = fast_config();
  config.cwd = workspace;
  if constexpr (Executor::confines) config.sandbox.default_mode = sandbox_mode::workspace_write;
  return config;
}

exec_request on_terminal(std::string command, terminal_size size = {}) {
  exec_request request{.command = std::move(command)};
  request.terminal = size;
  return request;
}

/// Starts `command` on a terminal and waits until it waits for input.
template <class Executor>
task_id start_waiting(Executor& exec, std::string command) {
  const task_id id = exec.start(exec.resolve(on_terminal(std::move(command))));
  auto facts = exec.wait_for_input(id, 10s);
  REQUIRE(facts);
  REQUIRE(facts->input_wait);
  return id;
}

/// Everything a task printed from now until `until` holds or 10 s pass.
template <class Executor, class Pred>
std::string read_until(Executor& exec, const task_id& id, Pred until) {
  std::string seen;
  eventually([&] {
    seen += exec.read_output(id).delta;
    return until(seen);
  });
  return seen;
}

}  // namespace

#define TERMINAL_EXECUTORS                                                                             \
  local_executor, posix_spawn_terminal_executor, prespawned_local_executor, test_support::bwrap_executor, \
      test_support::landlock_executor

TEMPLATE_TEST_CASE("a command on a terminal has it as stdin, stdout, stderr and controlling terminal",
                   "[terminal]", TERMINAL_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  TestType exec(terminal_config<TestType>(workspace.path()));
  auto result = exec.run(exec.resolve(on_terminal(
      "test -t 0 && test -t 1 && test -t 2 && echo all-ttys; echo to-stderr >&2; "
      "exec 3</dev/tty && echo has-ctty; stty size; echo \"TERM=$TERM\"",
      {.rows = 33, .columns = 101})));
  CHECK(result.exit_code == 0);
  CHECK(result.terminal);
  CHECK(result.err.text.empty());
  CHECK(result.out.text.find("all-ttys\n") != std::string::npos);
  CHECK(result.out.text.find("to-stderr\n") != std::string::npos);  // merged, as on any terminal
  CHECK(result.out.text.find("has-ctty\n") != std::string::npos);
  CHECK(result.out.text.find("33 101\n") != std::string::npos);
  CHECK(result.out.text.find("TERM=xterm-256color\n") != std::string::npos);
  CHECK_FALSE(result.continued_as);
}

TEMPLATE_TEST_CASE("a foreground run that waits for input returns as such and goes on as a task",
                   "[terminal]", TERMINAL_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  TestType exec(terminal_config<TestType>(workspace.path()));
  exec_request request = on_terminal("echo before; read -p 'Continue? [Y/n] ' answer; echo \"got:$answer\"; exit 7");
  request.owner = owner_token("session-a");
  const auto started = test_support::steady::now();
  auto result = exec.run(exec.resolve(std::move(request)));
  CHECK(test_support::ms_since(started) < 5000);
  REQUIRE(result.continued_as);
  REQUIRE(result.input_wait);
  CHECK_FALSE(result.timed_out);
  CHECK_FALSE(result.exit_code);
  CHECK(result.input_wait->prompt == "Continue? [Y/n] ");
  CHECK(result.input_wait->call == "read");
  CHECK(result.out.text.find("before\n") != std::string::npos);
  const task_id id = *result.continued_as;
  CHECK(exec.owner_of(id) == owner_token("session-a"));
  CHECK(exec.get(id).status == task_status::running);
  CHECK(exec.write_input(id, "yes\n") == 4);
  auto done = exec.wait(id);
  CHECK(done.status == task_status::completed);
  CHECK(done.exit_code == 7);
  const std::string rest = exec.read_output(id).delta;
  CHECK(rest.find("got:yes") != std::string::npos);
  CHECK(rest.find("before") == std::string::npos);  // the run returned that part already
}

TEMPLATE_TEST_CASE("^C at a terminal interrupts the foreground of a running task", "[terminal]",
                   TERMINAL_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  TestType exec(terminal_config<TestType>(workspace.path()));
  SECTION("as a keystroke") {
    const task_id id = exec.start(exec.resolve(on_terminal("trap 'echo caught; exit 3' INT; echo ready; sleep 30 & wait")));
    read_until(exec, id, [](const std::string& s) { return s.find("ready") != std::string::npos; });
    CHECK(exec.write_input(id, "\x03") == 1);
    auto done = exec.wait(id);
    CHECK(done.exit_code == 3);
  }
  SECTION("as interrupt()") {
    const task_id id = exec.start(exec.resolve(on_terminal("echo ready; exec sleep 30")));
    read_until(exec, id, [](const std::string& s) { return s.find("ready") != std::string::npos; });
    CHECK(exec.interrupt(id));
    auto done = exec.wait(id);
    if constexpr (test_support::confined_by<TestType, bwrap>) {
      // bwrap's pid-namespace init reports a signal death as 128 + N.
      CHECK(done.exit_code == 128 + SIGINT);
    } else {
      CHECK(done.status == task_status::killed);
      CHECK(done.signal == SIGINT);
    }
  }
}

TEMPLATE_TEST_CASE("quiet work is never reported as waiting for input", "[terminal]", TERMINAL_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  TestType exec(terminal_config<TestType>(workspace.path()));
  const char* quiet_work[] = {
      "sleep 2",
      "timeout 2 sh -c 'while :; do :; done'",
      "sleep 2 | cat",
      "head -c 1 /dev/zero >/dev/null; sleep 2",
      "cat <&0 >/dev/null & sleep 2; kill $!",
  };
  for (const char* command : quiet_work) {
    INFO(command);
    const task_id id = exec.start(exec.resolve(on_terminal(command)));
    auto facts = exec.wait_for_input(id, 10s);
    REQUIRE(facts);
    CHECK_FALSE(facts->input_wait);
    CHECK(facts->status != task_status::running);
  }
}

TEMPLATE_TEST_CASE("a kept stdin pipe takes input, reports its waits and reads end of file on close",
                   "[terminal]", TERMINAL_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  TestType exec(terminal_config<TestType>(workspace.path()));
  exec_request request{.command = "while read line; do echo \"line:$line\"; done; echo eof"};
  request.keep_stdin_open = true;
  const task_id id = exec.start(exec.resolve(std::move(request)));
  auto facts = exec.wait_for_input(id, 10s);
  REQUIRE(facts);
  CHECK(facts->input_wait);
  CHECK_FALSE(facts->terminal);
  CHECK(exec.write_input(id, "one\n") == 4);
  read_until(exec, id, [](const std::string& s) { return s.find("line:one") != std::string::npos; });
  exec.close_input(id);
  auto done = exec.wait(id);
  CHECK(done.exit_code == 0);
  CHECK(exec.read_output(id).delta.find("eof") != std::string::npos);
  CHECK_THROWS_AS(exec.write_input(id, "late\n"), input_closed);
}

TEMPLATE_TEST_CASE("a flood through a terminal is bounded like a pipe's, the spill file holding it all",
                   "[terminal][hostile]", TERMINAL_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  executor_config config = terminal_config<TestType>(workspace.path());
  config.output_cap = 4096;
  TestType exec(config);
  auto result = exec.run(exec.resolve(on_terminal("head -c 20000000 /dev/zero | tr '\\0' x")));
  CHECK(result.exit_code == 0);
  CHECK(result.out.truncated);
  CHECK(result.out.text.size() <= 4096);
  REQUIRE(result.out.spill_path);
  CHECK(std::filesystem::file_size(*result.out.spill_path) == 20000000);
}

TEMPLATE_TEST_CASE("a command that closes, resizes or types into its own terminal hurts only itself",
                   "[terminal][hostile]", TERMINAL_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  TestType exec(terminal_config<TestType>(workspace.path()));
  SECTION("it closes every descriptor of its terminal and goes on quietly") {
    const task_id id = exec.start(exec.resolve(on_terminal("echo bye; exec </dev/null >/dev/null 2>&1; sleep 1; exit 5")));
    auto done = exec.wait(id);
    CHECK(done.exit_code == 5);
    CHECK(exec.read_output(id).delta == "bye\n");
    CHECK_THROWS_AS(exec.write_input(id, "x"), input_closed);
  }
  SECTION("it resizes its terminal") {
    const task_id id = start_waiting(exec, "stty rows 9999 cols 9999; stty size; read -p 'next? ' x; stty size");
    exec.resize(id, {.rows = 40, .columns = 120});
    CHECK(exec.write_input(id, "\n") == 1);
    auto done = exec.wait(id);
    CHECK(done.exit_code == 0);
    const std::string out = exec.read_output(id).delta;
    CHECK(out.find("9999 9999\n") != std::string::npos);
    CHECK(out.find("40 120\n") != std::string::npos);
  }
  SECTION("TIOCSTI types only into its own input, if the kernel allows it at all") {
    auto result = exec.run(exec.resolve(on_terminal(
        "if perl -e 'require \"sys/ioctl.ph\"; ioctl(STDIN, &TIOCSTI, $_) or exit 1 for split //, \"typed\\n\"'; "
        "then read -t 2 line; echo \"own input: $line\"; else echo refused; fi; ls /proc/self/fd | sort -n | tr '\\n' ' '")));
    INFO(result.out.text);
    CHECK(result.exit_code == 0);
    const bool typed = result.out.text.find("own input: typed") != std::string::npos;
    const bool refused = result.out.text.find("refused") != std::string::npos;
    CHECK((typed || refused));
    // Nothing but its own terminal (0-2) and the listing's own descriptor.
    CHECK(result.out.text.find("0 1 2 3 ") != std::string::npos);
    CHECK(result.out.text.find("0 1 2 3 4") == std::string::npos);
  }
  SECTION("an input write to a task that settled, or that takes none, is a clear error") {
    const task_id none = exec.start(exec.resolve({.command = "sleep 5"}));
    CHECK_THROWS_WITH(exec.write_input(none, "x"), Catch::Contains("takes no input") && Catch::Contains(none.value()));
    CHECK_THROWS_AS(exec.resize(none, {}), input_closed);
    exec.kill(none);
    CHECK_THROWS_AS(exec.write_input(task_id("bash-999"), "x"), unknown_task);
  }
}

TEMPLATE_TEST_CASE("an input wait is told to listeners once per wait, and a kept pipe reports partial writes",
                   "[terminal]", TERMINAL_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  executor_config config = terminal_config<TestType>(workspace.path());
  config.terminal.write_timeout = 300ms;
  TestType exec(config);
  std::atomic<int> waits{0};
  auto subscription = exec.on_input_wait([&](const task_snapshot& task) {
    if (task.input_wait) ++waits;
  });
  SECTION("two questions, two notices") {
    const task_id id = exec.start(exec.resolve(on_terminal("read -p 'one? ' a; read -p 'two? ' b; echo $a$b")));
    REQUIRE(eventually([&] { return waits.load() == 1; }));
    std::this_thread::sleep_for(500ms);
    CHECK(waits.load() == 1);  // once per wait, not once per look
    exec.write_input(id, "x\n");
    REQUIRE(eventually([&] { return waits.load() == 2; }));
    exec.write_input(id, "y\n");
    CHECK(exec.wait(id).exit_code == 0);
    CHECK(waits.load() == 2);
  }
  SECTION("a pipe nobody reads takes what fits and says how much") {
    exec_request request{.command = "sleep 30"};
    request.keep_stdin_open = true;
    const task_id id = exec.start(exec.resolve(std::move(request)));
    const std::string big(4 << 20, 'x');
    const auto started = test_support::steady::now();
    const std::size_t taken = exec.write_input(id, big);
    CHECK(taken > 0);
    CHECK(taken < big.size());
    CHECK(test_support::ms_since(started) < 3000);
    exec.kill(id);
  }
}

namespace {
double process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}
}  // namespace

TEMPLATE_TEST_CASE("a task whose input was fed or whose terminal closed costs the executor no CPU while it runs on",
                   "[terminal][hostile]", TERMINAL_EXECUTORS) {
  SKIP_UNLESS(test_support::executor_missing<TestType>());
  test_support::temp_dir workspace;
  TestType exec(terminal_config<TestType>(workspace.path()));
  exec_request fed{.command = "read line; echo \"got $line\"; sleep 30"};
  fed.stdin_data = "first\n";
  fed.keep_stdin_open = true;
  const task_id fed_id = exec.start(exec.resolve(std::move(fed)));
  const task_id closed_id =
      exec.start(exec.resolve(on_terminal("echo bye; exec </dev/null >/dev/null 2>&1; sleep 30")));
  REQUIRE(eventually([&] { return exec.read_output(fed_id).delta.find("got first") != std::string::npos; }));
  std::this_thread::sleep_for(500ms);
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(1s);
  // A descriptor left in the reactor's epoll set after its stream ended
  // would be reported ready in a loop: a core's worth of CPU.
  CHECK(process_cpu_seconds() - before < 0.2);
  CHECK(exec.get(fed_id).input_open);
  CHECK(exec.write_input(fed_id, "more\n") == 5);
  exec.kill(fed_id);
  exec.kill(closed_id);
}

TEST_CASE("a terminal request with stdin_data is refused naming the field", "[terminal]") {
  local_executor exec(fast_config());
  exec_request request = on_terminal("cat");
  request.stdin_data = "typed ahead";
  CHECK_THROWS_WITH(exec.resolve(std::move(request)), Catch::Contains("stdin_data"));
  exec_request zero = on_terminal("true", {.rows = 0, .columns = 80});
  CHECK_THROWS_WITH(exec.resolve(std::move(zero)), Catch::Contains("terminal"));
}

TEST_CASE("a foreground run on a terminal or a kept stdin that settles before it is watched reports its own end",
          "[terminal]") {
  // A spawn that fails settles the run's task before `start` returns, as a
  // quick command does on a loaded machine: the run must still answer with
  // what happened, not that its task was forgotten.
  const test_support::unexecutable_shell shell;
  local_executor exec(shell.apply(fast_config()));
  CHECK_THROWS_AS(exec.run(exec.resolve(on_terminal("true"))), infrastructure_error);
  CHECK_THROWS_WITH(exec.run(exec.resolve(on_terminal("true"))), Catch::Contains(shell.name()));
  exec_request kept{.command = "true"};
  kept.keep_stdin_open = true;
  CHECK_THROWS_WITH(exec.run(exec.resolve(std::move(kept))), Catch::Contains(shell.name()));
  CHECK(exec.list().empty());
}

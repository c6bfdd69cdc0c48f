// The foreground path: `run` with real processes, pipes and signals
// (docs/contract.md item 2–8 and "no hang on a backgrounded grandchild"),
// through local_executor and, built again as test_foreground_prespawned,
// over the prespawned warm pool (tests/unconfined_test_support.hpp).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <bashexec/signal_name.hpp>

#include "executor_test_support.hpp"
#include "unconfined_test_support.hpp"

using namespace bashexec;
using namespace std::chrono_literals;
using test_support::unconfined_executor;
using test_support::fast_config;
using test_support::ms_since;
using test_support::steady;

namespace {

run_result run(unconfined_executor& executor, std::string command, std::chrono::milliseconds timeout = 20s) {
  return executor.run(executor.resolve({.command = std::move(command), .timeout = timeout}));
}

std::set<std::string> lines_of(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.insert(line);
  return out;
}

}  // namespace

TEST_CASE("contract 2: exit codes 0, 1 and 42 are results, not errors", "[foreground][contract-2]") {
  unconfined_executor executor(fast_config());
  for (int code : {0, 1, 42}) {
    CAPTURE(code);
    auto result = run(executor, "echo out; echo err >&2; exit " + std::to_string(code));
    CHECK(result.exit_code == code);
    CHECK_FALSE(result.signal.has_value());
    CHECK_FALSE(result.timed_out);
    CHECK_FALSE(result.aborted);
    CHECK_FALSE(result.leftovers_killed);
    CHECK(result.out.text == "out\n");
    CHECK(result.err.text == "err\n");
    CHECK_FALSE(result.out.truncated);
    CHECK_FALSE(result.out.spill_path.has_value());
    CHECK_FALSE(result.sandbox.has_value());
  }
}

TEST_CASE("contract 2: a shell that kills itself with SIGTERM is reported by signal", "[foreground][contract-2]") {
  unconfined_executor executor(fast_config());
  auto result = run(executor, "echo before; kill -TERM $$; echo after");
  REQUIRE(result.signal.has_value());
  CHECK(signal_name(*result.signal) == "SIGTERM");
  CHECK_FALSE(result.exit_code.has_value());
  CHECK_FALSE(result.timed_out);
  CHECK(result.out.text == "before\n");
}

TEST_CASE("contract 3/4: sleep 30 with a 200 ms timeout is timed out and ends well within the grace",
          "[foreground][contract-3][contract-4]") {
  unconfined_executor executor;  // the default 3000 ms grace: SIGTERM alone must do it
  const auto start = steady::now();
  auto result = run(executor, "sleep 30", 200ms);
  const auto elapsed = ms_since(start);
  CHECK(result.timed_out);
  CHECK_FALSE(result.aborted);
  CHECK(result.timeout == 200ms);
  REQUIRE(result.signal.has_value());
  CHECK(*result.signal == SIGTERM);
  CHECK(elapsed >= 190);
  CHECK(elapsed < 2500);
}

TEST_CASE("contract 4: a TERM-trapping command is SIGKILLed after the grace period",
          "[foreground][contract-4]") {
  unconfined_executor executor(fast_config());  // grace 300 ms
  const auto start = steady::now();
  auto result = run(executor, "trap '' TERM; echo $$; sleep 30; echo survived", 200ms);
  const auto elapsed = ms_since(start);
  CHECK(result.timed_out);
  REQUIRE(result.signal.has_value());
  CHECK(*result.signal == SIGKILL);
  CHECK(result.out.text.find("survived") == std::string::npos);
  CHECK(elapsed >= 200 + 300 - 20);  // it did wait the grace before SIGKILL
  CHECK(elapsed < 5000);
  const long pgid = test_support::first_pid(result.out.text);
  REQUIRE(pgid > 1);
  CHECK(test_support::live_group_members(pgid).empty());
}

TEST_CASE("contract 4: a TERM-ignoring group member that redirected its output away still dies",
          "[foreground][contract-4]") {
  unconfined_executor executor(fast_config());
  // The shell dies of SIGTERM and the pipes reach EOF at once; the member
  // ignoring TERM holds no pipe, so only "escalate until the group is empty"
  // kills it.
  // The shell waits until the member has ignored TERM (a marker file), so a
  // loaded machine cannot deliver the TERM before the trap is in place.
  test_support::temp_dir scratch;
  const auto trapped = scratch.path() / "trapped";
  const auto start = steady::now();
  auto result = run(executor,
                    "echo $$; (trap '' TERM; : > " + trapped.string() +
                        "; sleep 30; sleep 30) </dev/null >/dev/null 2>&1 & echo $!; until [ -e " + trapped.string() +
                        " ]; do sleep 0.01; done; sleep 30",
                    1000ms);
  const auto elapsed = ms_since(start);
  CHECK(result.timed_out);
  std::istringstream pids(result.out.text);
  long pgid = 0, member = 0;
  pids >> pgid >> member;
  REQUIRE(pgid > 1);
  REQUIRE(member > 1);
  CHECK_FALSE(test_support::pid_alive(member));
  CHECK(test_support::live_group_members(pgid).empty());
  if (std::filesystem::exists(trapped))
    CHECK(elapsed >= 1000 + 300 - 20);  // the member outlived the TERM: only the KILL after the grace ended it
  else
    WARN("the member had not ignored TERM within the 1 s timeout (loaded machine): the grace is not checked");
  CHECK(elapsed < 6000);
}

TEST_CASE("contract 4: a grandchild in a pipeline dies with the group", "[foreground][contract-4]") {
  unconfined_executor executor(fast_config());
  auto result = run(executor, "echo $$; sleep 30 | sleep 31 | cat", 300ms);
  CHECK(result.timed_out);
  const long pgid = test_support::first_pid(result.out.text);
  REQUIRE(pgid > 1);
  CHECK(test_support::live_group_members(pgid).empty());
}

TEST_CASE("contract 3: a stop request mid-run reports aborted, not timed out", "[foreground][contract-3]") {
  unconfined_executor executor(fast_config());
  std::stop_source stop;
  auto spec = executor.resolve({.command = "sleep 30", .timeout = 20s, .stop = stop.get_token()});
  std::thread stopper([&] {
    std::this_thread::sleep_for(200ms);
    stop.request_stop();
  });
  const auto start = steady::now();
  auto result = executor.run(spec);
  const auto elapsed = ms_since(start);
  stopper.join();
  CHECK(result.aborted);
  CHECK_FALSE(result.timed_out);
  CHECK(result.signal == SIGTERM);
  CHECK(elapsed >= 190);
  CHECK(elapsed < 5000);
}

TEST_CASE("contract 3: the first cause wins: a stop after the timeout fired is still timed out",
          "[foreground][contract-3]") {
  unconfined_executor executor(fast_config());
  std::stop_source stop;
  auto spec = executor.resolve({.command = "trap '' TERM; sleep 30", .timeout = 100ms, .stop = stop.get_token()});
  std::thread stopper([&] {
    std::this_thread::sleep_for(250ms);  // inside the 300 ms grace
    stop.request_stop();
  });
  auto result = executor.run(spec);
  stopper.join();
  CHECK(result.timed_out);
  CHECK_FALSE(result.aborted);
}

TEST_CASE("contract 3/4: an aborted run waits out the grace without spinning the CPU",
          "[foreground][contract-3][contract-4]") {
  executor_config config = fast_config();
  config.kill_grace = 1000ms;
  unconfined_executor executor(config);
  std::stop_source stop;
  auto spec = executor.resolve({.command = "trap '' TERM; sleep 30", .timeout = 20s, .stop = stop.get_token()});
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    stop.request_stop();
  });
  rusage before{}, after{};
  ::getrusage(RUSAGE_THREAD, &before);
  auto result = executor.run(spec);
  ::getrusage(RUSAGE_THREAD, &after);
  stopper.join();
  auto cpu_ms = [](const rusage& u) {
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000;
  };
  CHECK(result.aborted);
  CHECK(result.signal == SIGKILL);
  // About 1 s of wall time in the grace; a poll loop over a stop eventfd
  // that is never drained burns all of it.
  CHECK(cpu_ms(after) - cpu_ms(before) < 250);
}

TEST_CASE("contract 2: a stop requested before spawn throws infrastructure_error", "[foreground][contract-2]") {
  unconfined_executor executor(fast_config());
  test_support::temp_dir dir;
  std::stop_source stop;
  stop.request_stop();
  const auto marker = dir.path() / "ran";
  auto spec = executor.resolve({.command = "touch " + marker.string(), .stop = stop.get_token()});
  CHECK_THROWS_AS(executor.run(spec), infrastructure_error);
  CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("contract 5: 1 MB of output under a 64000 cap keeps exactly the last 64000 bytes and spills it all",
          "[foreground][contract-5]") {
  test_support::temp_dir dir;
  const std::string data = test_support::random_bytes(1'000'000, 42);
  {
    std::ofstream(dir.path() / "data", std::ios::binary) << data;
  }
  unconfined_executor executor(fast_config());
  auto in_dir = executor.run(executor.resolve({.command = "cat data", .workdir = dir.path()}));
  CHECK(in_dir.exit_code == 0);
  CHECK(in_dir.out.truncated);
  CHECK(in_dir.out.text.size() == 64000u);
  CHECK((in_dir.out.text == data.substr(data.size() - 64000)));
  REQUIRE(in_dir.out.spill_path.has_value());
  CHECK((test_support::slurp(*in_dir.out.spill_path) == data));
  struct stat file {}, parent {};
  REQUIRE(::stat(in_dir.out.spill_path->c_str(), &file) == 0);
  REQUIRE(::stat(in_dir.out.spill_path->parent_path().c_str(), &parent) == 0);
  CHECK((file.st_mode & 07777) == 0600);
  CHECK((parent.st_mode & 07777) == 0700);
  CHECK(in_dir.out.spill_path->parent_path() == executor.spill_directory());
  CHECK_FALSE(in_dir.err.truncated);
  CHECK_FALSE(in_dir.err.spill_path.has_value());
}

TEST_CASE("contract 7: credential-shaped variables are scrubbed, HOME stays, non-interactive settings are set",
          "[foreground][contract-7]") {
  // Marker values no runner sets (ASAN_OPTIONS=detect_leaks=1 holds "leak"):
  // the test looks for its own values, not a word the environment may have.
  ::setenv("MY_API_KEY", "bashexec-c7-marker-1", 1);
  ::setenv("aws_secret", "bashexec-c7-marker-2", 1);
  ::setenv("GH_TOKEN", "bashexec-c7-marker-3", 1);
  ::setenv("PAGER", "less", 1);
  ::setenv("BASHEXEC_TEST_PLAIN", "kept", 1);
  if (!std::getenv("HOME")) ::setenv("HOME", "/root", 1);
  unconfined_executor executor(fast_config());
  auto env = lines_of(run(executor, "env").out.text);
  CHECK(env.count(std::string("HOME=") + std::getenv("HOME")) == 1);
  CHECK(env.count("BASHEXEC_TEST_PLAIN=kept") == 1);
  for (const auto& line : env) {
    CHECK(line.find("bashexec-c7-marker-") == std::string::npos);
    CHECK(line.rfind("MY_API_KEY=", 0) != 0);
    CHECK(line.rfind("aws_secret=", 0) != 0);
    CHECK(line.rfind("GH_TOKEN=", 0) != 0);
  }
  CHECK(env.count("NO_COLOR=1") == 1);
  CHECK(env.count("TERM=dumb") == 1);
  CHECK(env.count("PAGER=cat") == 1);
  CHECK(env.count("GIT_PAGER=cat") == 1);

  SECTION("an explicit entry wins, even on a credential-shaped name") {
    auto spec = executor.resolve(
        {.command = "env", .env = std::map<std::string, std::string>{{"MY_API_KEY", "x"}, {"PAGER", "more"}}});
    auto explicit_env = lines_of(executor.run(spec).out.text);
    CHECK(explicit_env.count("MY_API_KEY=x") == 1);
    CHECK(explicit_env.count("PAGER=more") == 1);
    CHECK(explicit_env.count("PAGER=cat") == 0);
    CHECK(explicit_env.count("GH_TOKEN=bashexec-c7-marker-3") == 0);
  }
  ::unsetenv("MY_API_KEY");
  ::unsetenv("aws_secret");
  ::unsetenv("GH_TOKEN");
  ::unsetenv("PAGER");
  ::unsetenv("BASHEXEC_TEST_PLAIN");
}

TEST_CASE("contract 7, widened: the password, credential and auth families are scrubbed too",
          "[foreground][contract-7]") {
  const std::map<std::string, std::string> leaked{
      {"PGPASSWORD", "bashexec-c7w-1"},   {"MYSQL_PWD", "bashexec-c7w-2"},
      {"GH_PAT", "bashexec-c7w-3"},       {"NPM_AUTH", "bashexec-c7w-4"},
      {"DOCKER_PASS", "bashexec-c7w-5"},  {"AZURE_CLIENT_CREDENTIALS", "bashexec-c7w-6"},
      {"npm_config__auth", "bashexec-c7w-7"}};
  for (const auto& [name, value] : leaked) ::setenv(name.c_str(), value.c_str(), 1);
  ::setenv("DATABASE_URL", "postgres://app:bashexec-c7w-pw@db:5432/x?sslmode=off", 1);
  ::setenv("GIT_AUTHOR_NAME", "kept author", 1);
  ::setenv("BASHEXEC_TEST_PATHS", "a:b", 1);
  auto env_of = [](const executor_config& config) {
    unconfined_executor executor(config);
    return lines_of(run(executor, "env").out.text);
  };

  SECTION("by default") {
    const auto env = env_of(fast_config());
    for (const auto& line : env) {
      CAPTURE(line);
      CHECK(line.find("bashexec-c7w-") == std::string::npos);
    }
    CHECK(env.count("DATABASE_URL=postgres://app@db:5432/x?sslmode=off") == 1);
    CHECK(env.count("GIT_AUTHOR_NAME=kept author") == 1);
    CHECK(env.count("BASHEXEC_TEST_PATHS=a:b") == 1);
    CHECK(std::ranges::count_if(env, [](const std::string& l) { return l.rfind("PATH=", 0) == 0; }) == 1);
  }
  SECTION("configurable: a name kept on purpose, a rule added, URLs left alone") {
    executor_config config = fast_config();
    config.scrub.keep.push_back("GH_PAT");
    config.scrub.name_words.push_back("AUTHOR");
    config.scrub.strip_url_passwords = false;
    const auto env = env_of(config);
    CHECK(env.count("GH_PAT=bashexec-c7w-3") == 1);
    CHECK(env.count("GIT_AUTHOR_NAME=kept author") == 0);
    CHECK(env.count("DATABASE_URL=postgres://app:bashexec-c7w-pw@db:5432/x?sslmode=off") == 1);
  }
  SECTION("an empty rule is refused, naming the field") {
    executor_config config = fast_config();
    config.scrub.name_fragments.emplace_back();
    CHECK_THROWS_WITH(unconfined_executor(config), Catch::Contains("scrub.name_fragments"));
  }
  for (const auto& [name, value] : leaked) ::unsetenv(name.c_str());
  for (const char* name : {"DATABASE_URL", "GIT_AUTHOR_NAME", "BASHEXEC_TEST_PATHS"}) ::unsetenv(name);
}

TEST_CASE("contract 7, widened: URL passwords are removed wherever they stand in a value",
          "[foreground][contract-7]") {
  using bashexec::detail::without_url_passwords;
  CHECK(without_url_passwords("postgres://u:pw@host/db") == "postgres://u@host/db");
  CHECK(without_url_passwords("redis://:pw@cache:6379") == "redis://@cache:6379");
  CHECK(without_url_passwords("a=https://x:y@h1/p,https://z:w@h2") == "a=https://x@h1/p,https://z@h2");
  CHECK(without_url_passwords("https://user@host/a:b@c") == "https://user@host/a:b@c");
  CHECK(without_url_passwords("https://host:8080/x") == "https://host:8080/x");
  CHECK(without_url_passwords("no url here") == "no url here");
  CHECK(without_url_passwords("trailing://") == "trailing://");
}

TEST_CASE("contract 8: 1 MB of stdin round-trips through cat", "[foreground][contract-8]") {
  unconfined_executor executor(fast_config());
  const std::string data = test_support::random_bytes(1 << 20, 7);
  auto result = executor.run(executor.resolve({.command = "cat", .stdout_max_bytes = 2u << 20, .stdin_data = data}));
  CHECK(result.exit_code == 0);
  CHECK(result.out.text.size() == data.size());
  CHECK((result.out.text == data));
}

TEST_CASE("contract 8: without stdin_data stdin is /dev/null, an empty one is an empty pipe",
          "[foreground][contract-8]") {
  unconfined_executor executor(fast_config());
  CHECK(run(executor, "readlink /proc/self/fd/0").out.text == "/dev/null\n");
  auto empty = executor.run(executor.resolve({.command = "wc -c; readlink /proc/$$/fd/0", .stdin_data = ""}));
  CHECK(empty.out.text.rfind("0\npipe:", 0) == 0);
}

TEST_CASE("contract 8: a command that exits without reading 1 MB of stdin does not signal the host",
          "[foreground][contract-8]") {
  // The host keeps the default SIGPIPE disposition: a leaked SIGPIPE would
  // kill this test process.
  REQUIRE(std::signal(SIGPIPE, SIG_DFL) != SIG_ERR);
  unconfined_executor executor(fast_config());
  const std::string data(1 << 20, 'z');
  for (const char* command : {"exit 3", "head -c 1 >/dev/null; exit 4", "exec 0<&-; sleep 0.1; exit 5"}) {
    CAPTURE(command);
    auto result = executor.run(executor.resolve({.command = command, .stdin_data = data}));
    CHECK(result.exit_code.has_value());
    CHECK_FALSE(result.signal.has_value());
  }
  sigset_t pending;
  ::sigpending(&pending);
  CHECK_FALSE(::sigismember(&pending, SIGPIPE));
}

TEST_CASE("contract 8: no host descriptor leaks into the child, not even an inheritable one",
          "[foreground][contract-8]") {
  const int plain = ::open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  REQUIRE(plain >= 0);
  const int high = ::dup2(plain, 200);  // dup2 never sets FD_CLOEXEC
  REQUIRE(high == 200);
  REQUIRE((::fcntl(plain, F_GETFD) & FD_CLOEXEC) == 0);
  unconfined_executor executor(fast_config());
  // `; true` keeps bash from exec'ing ls, so /proc/$$/fd lists the shell's
  // own table; /proc/$!/fd lists what a grandchild inherited.
  auto shell = run(executor, "ls /proc/$$/fd; true");
  // Wait until the grandchild has exec'd sleep: before that, bash may still
  // hold /dev/null on fd 3 while it redirects the background job's stdin.
  auto grandchild = run(executor,
                        "sleep 5 & s=$(readlink -f \"$(command -v sleep)\"); "
                        "until [ \"$(readlink -f /proc/$!/exe)\" = \"$s\" ]; do :; done; "
                        "ls /proc/$!/fd; kill $!");
  ::close(plain);
  ::close(high);
  CHECK(shell.out.text == "0\n1\n2\n");
  CHECK(grandchild.out.text == "0\n1\n2\n");
  CHECK(shell.err.text.empty());
}

TEST_CASE("contract 8: the child starts with default signal dispositions and an empty mask",
          "[foreground][contract-8]") {
  // The host ignores SIGPIPE and blocks SIGTERM in the calling thread.
  std::string yes_out, yes_err, mask;
  std::optional<int> timed_out_signal;
  bool timed_out = false;
  auto previous = std::signal(SIGPIPE, SIG_IGN);
  std::thread host([&] {
    sigset_t term;
    ::sigemptyset(&term);
    ::sigaddset(&term, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &term, nullptr);
    unconfined_executor executor(fast_config());
    auto yes = run(executor, "yes | head -1");
    yes_out = yes.out.text;
    yes_err = yes.err.text;
    mask = run(executor, "grep -E '^Sig(Blk|Ign)' /proc/self/status").out.text;
    auto slow = run(executor, "sleep 30", 200ms);
    timed_out = slow.timed_out;
    timed_out_signal = slow.signal;
  });
  host.join();
  std::signal(SIGPIPE, previous);
  CHECK(yes_out == "y\n");
  CHECK(yes_err.empty());
  CHECK(mask == "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
  CHECK(timed_out);
  CHECK(timed_out_signal == SIGTERM);
}

TEST_CASE("contract 2: an unusable workdir throws infrastructure_error naming it", "[foreground][contract-2]") {
  unconfined_executor executor(fast_config());
  test_support::temp_dir dir;
  const auto file = dir.path() / "a-file";
  std::ofstream(file) << "x";
  for (const auto& bad : {dir.path() / "does-not-exist", file}) {
    CAPTURE(bad);
    try {
      executor.run(executor.resolve({.command = "true", .workdir = bad}));
      FAIL("run did not throw");
    } catch (const infrastructure_error& e) {
      CHECK_THAT(e.what(), Catch::Contains(bad.string()));
    }
  }
}

TEST_CASE("contract 2: a missing or non-executable shell throws infrastructure_error", "[foreground][contract-2]") {
  executor_config config = fast_config();
  config.shell = GENERATE(as<std::filesystem::path>{}, "/nonexistent/bash", "/etc/hostname", "/tmp");
  CAPTURE(config.shell);
  unconfined_executor executor(config);
  CHECK_THROWS_AS(executor.run(executor.resolve({.command = "true"})), infrastructure_error);
}

TEST_CASE("a backgrounded grandchild holding the pipes does not hang run: it is killed after the drain",
          "[foreground][no-hang]") {
  unconfined_executor executor(fast_config());  // drain 300 ms
  const auto start = steady::now();
  auto result = run(executor, "sleep 30 & echo $!", 20s);
  const auto elapsed = ms_since(start);
  CHECK(result.exit_code == 0);
  CHECK(result.leftovers_killed);
  CHECK_FALSE(result.timed_out);
  CHECK(elapsed >= 280);
  CHECK(elapsed < 5000);
  const long sleeper = test_support::first_pid(result.out.text);
  REQUIRE(sleeper > 1);
  CHECK_FALSE(test_support::pid_alive(sleeper));
}

TEST_CASE("a grandchild that closes its copies of the pipes does not delay run and does not outlive it",
          "[foreground][no-hang]") {
  unconfined_executor executor(fast_config());
  const auto start = steady::now();
  auto result = run(executor, "sleep 20 >/dev/null 2>&1 </dev/null & echo $!; echo done", 20s);
  CHECK(ms_since(start) < 1500);
  CHECK(result.exit_code == 0);
  CHECK(result.leftovers_killed);
  CHECK(result.out.text.ends_with("done\n"));
  const long sleeper = test_support::first_pid(result.out.text);
  REQUIRE(sleeper > 1);
  CHECK_FALSE(test_support::pid_alive(sleeper));
}

// Not in the remote/ lane: the commands are the server's children there,
// and this process's only child is the server (reaped with the executor).
#ifndef BASHEXEC_TEST_REMOTE
TEST_CASE("no zombie or live child of the test process remains after runs", "[foreground][contract-4]") {
  {
    unconfined_executor executor(fast_config());
    run(executor, "true");
    run(executor, "exit 7");
    run(executor, "sleep 30", 100ms);
    run(executor, "trap '' TERM; sleep 30", 100ms);
    run(executor, "sleep 30 & true");
    run(executor, "kill -KILL $$");
    if constexpr (test_support::spawns_from_pool<unconfined_executor>) {
      // The pool's waiting processes (and, under its default cgroup
      // containment, the guardian) are this process's children by design
      // while the executor lives; none of them is a command or a zombie.
      for (long pid : test_support::children_of_self()) {
        CAPTURE(pid);
        CHECK(test_support::kept_by_pool_executor(pid));
      }
    } else {
      // Under the default cgroup containment the executor's guardian is
      // this process's child while the executor lives; nothing else is.
      for (long pid : test_support::children_of_self()) {
        CAPTURE(pid);
        CHECK(test_support::read_proc("/proc/" + std::to_string(pid) + "/cmdline").find("bashexec-guardian") !=
              std::string::npos);
      }
      // No zombie: a guardian, if any, is alive and not waitable.
      errno = 0;
      const pid_t waited = ::waitpid(-1, nullptr, WNOHANG);
      CHECK((waited == 0 || (waited == -1 && errno == ECHILD)));
    }
  }
  CHECK(test_support::children_of_self().empty());
  errno = 0;
  CHECK(::waitpid(-1, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}
#endif

TEST_CASE("contract 1/5: stdout_max_bytes caps stdout only, stderr keeps the executor's output cap",
          "[foreground][contract-1][contract-5]") {
  executor_config config = fast_config();
  config.output_cap = 100;
  unconfined_executor executor(config);
  const std::string command = "head -c 1000 /dev/zero | tr '\\0' o; head -c 1000 /dev/zero | tr '\\0' e >&2";
  auto spec = executor.resolve({.command = command, .stdout_max_bytes = 500});
  CHECK(spec.stdout_max_bytes == 500u);

  SECTION("a foreground run") {
    auto result = executor.run(spec);
    CHECK(result.exit_code == 0);
    CHECK(result.out.text == std::string(500, 'o'));
    CHECK(result.err.text == std::string(100, 'e'));
    CHECK(result.out.truncated);
    CHECK(result.err.truncated);
  }
  SECTION("a background task") {
    auto id = executor.start(spec);
    executor.wait(id);
    auto read = executor.read_output(id);
    CHECK(read.delta == std::string(500, 'o') + "\n[stderr]\n" + std::string(100, 'e'));
    CHECK(read.lossy);
  }
}

TEST_CASE("contract 5: spill files are named by their stream, unpredictably, 0600 in the private directory",
          "[foreground][contract-5]") {
  executor_config config = fast_config();
  config.output_cap = 10;
  unconfined_executor executor(config);
  auto run_once = [&] {
    return executor.run(executor.resolve({.command = "seq 100; seq 100 >&2"}));
  };
  auto first = run_once();
  auto second = run_once();
  for (const auto* result : {&first, &second}) {
    REQUIRE(result->out.spill_path.has_value());
    REQUIRE(result->err.spill_path.has_value());
    const std::string out_name = result->out.spill_path->filename().string();
    const std::string err_name = result->err.spill_path->filename().string();
    CHECK_THAT(out_name, Catch::EndsWith("-stdout"));
    CHECK_THAT(err_name, Catch::EndsWith("-stderr"));
    CHECK(result->out.spill_path->parent_path() == executor.spill_directory());
    CHECK(result->err.spill_path->parent_path() == executor.spill_directory());
    struct stat file {};
    REQUIRE(::stat(result->out.spill_path->c_str(), &file) == 0);
    CHECK((file.st_mode & 07777) == 0600);
    CHECK(test_support::slurp(*result->out.spill_path) == test_support::slurp(*result->err.spill_path));
  }
  // The random part differs from file to file: a name is never guessable
  // from another one.
  CHECK(first.out.spill_path != second.out.spill_path);
  CHECK(first.out.spill_path->filename().string().size() > std::string("spill--stdout").size() + 16);
}

TEST_CASE("a foreground run keeps its byte counts in run_progress while it runs", "[foreground][progress]") {
  unconfined_executor executor;
  auto progress = std::make_shared<run_progress>();
  exec_request request{.command = "printf 12345; sleep 1; printf 678 >&2", .timeout = 20s};
  request.progress = progress;
  std::atomic<bool> seen_midway{false};
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    // Generous: the five stdout bytes arrive long before the sleep ends.
    while (!done.load()) {
      if (progress->stdout_bytes.load() == 5 && progress->stderr_bytes.load() == 0) seen_midway = true;
      std::this_thread::sleep_for(10ms);
    }
  });
  const run_result result = executor.run(executor.resolve(std::move(request)));
  done = true;
  watcher.join();
  CHECK(result.out.text == "12345");
  CHECK(seen_midway.load());
  CHECK(progress->stdout_bytes.load() == 5);
  CHECK(progress->stderr_bytes.load() == 3);
}

#ifdef BASHEXEC_TEST_DECORATED
TEST_CASE("decorated: this build's runs and starts pass through the decorator, one audit each",
          "[foreground][decorated]") {
  unconfined_executor executor(fast_config());
  CHECK(run(executor, "echo through").out.text == "through\n");
  CHECK(executor.wait(executor.start(executor.resolve({.command = "exit 5"}))).exit_code == 5);
  CHECK(executor.calls_audited() == 2);
}
#endif

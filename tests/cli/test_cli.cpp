// The bashexec command-line program, spawned as a real process: `run`'s exit
// status mapping and JSON, and `serve` end to end over pipes (issue 6).
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <bashexec/detail/kernel/process_group.hpp>

#include "cli_test_support.hpp"

using namespace cli_test;

TEST_CASE("bashexec run exits with the command's own status", "[cli]") {
  CHECK(cli_run("run --unconfined -- 'exit 0'").exit_code == 0);
  CHECK(cli_run("run --unconfined -- 'exit 3'").exit_code == 3);
  auto three = cli_run("run --unconfined -- 'echo out; exit 3'");
  CHECK(three.out.text == "out\n[exit code: 3]\n");
}

TEST_CASE("bashexec run exits 128+N when a signal N killed the command", "[cli]") {
  CHECK(cli_run("run --unconfined -- 'kill -TERM $$'").exit_code == 128 + SIGTERM);
  CHECK(cli_run("run --unconfined -- 'kill -KILL $$'").exit_code == 128 + SIGKILL);
}

TEST_CASE("bashexec run exits 125 with a one-line reason when the command cannot run", "[cli]") {
  auto missing = cli_run("run --unconfined --workdir /nonexistent/dir -- true");
  CHECK(missing.exit_code == 125);
  CHECK(missing.err.text.find("/nonexistent/dir") != std::string::npos);
  CHECK(std::count(missing.err.text.begin(), missing.err.text.end(), '\n') == 1);
}

TEST_CASE("bashexec run --json prints the whole run result as one JSON object", "[cli]") {
  auto result = cli_run("run --unconfined --json -- 'echo hi; echo oops >&2; exit 4'");
  REQUIRE(result.exit_code == 4);
  auto j = json::parse(result.out.text);
  CHECK(j["exit_code"] == 4);
  CHECK(j["signal"].is_null());
  CHECK(j["timed_out"] == false);
  CHECK(j["aborted"] == false);
  CHECK(j["stdout"]["text"] == "hi\n");
  CHECK(j["stderr"]["text"] == "oops\n");
  CHECK(j["stdout"]["truncated"] == false);
  CHECK(j["timeout_ms"] == 120000);
  CHECK(j["sandbox"].is_null());
}

TEST_CASE("bashexec run under --mode read-only prints the denial marker for a denied write", "[cli][sandbox]") {
  test_support::temp_dir workspace;
  auto result = cli_run("run --mode read-only -- 'cat /etc/hostname >/dev/null; echo x > f'", workspace.path());
  if (result.exit_code == 125) {
    WARN("skipped: no sandbox backend usable on this machine: " << result.err.text);
    return;
  }
  CHECK(result.exit_code == 1);
  CHECK(result.out.text.find("[sandbox: file access denied under read-only mode]\n[exit code: 1]\n") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(workspace.path() / "f"));
}

TEST_CASE("bashexec run --network none keeps a confined command off the network", "[cli][sandbox]") {
  // A listener in the test process: the kernel completes connections to it
  // (the backlog) without an accept().
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(listener, 16) == 0);
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  const std::string connect =
      "'exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(ntohs(address.sin_port)) + " && echo connected'";

  auto open = cli_run("run --mode read-only -- " + connect);
  if (open.exit_code == 125) {
    WARN("skipped: no sandbox backend usable on this machine: " << open.err.text);
    ::close(listener);
    return;
  }
  CHECK(open.out.text == "connected\n");
  auto closed = cli_run("run --mode read-only --network none -- " + connect);
  CHECK(closed.exit_code != 0);
  CHECK(closed.out.text.find("connected") == std::string::npos);
  ::close(listener);

  auto bad = cli_run("run --network sometimes -- true");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.text.find("--network") != std::string::npos);
}

TEST_CASE("bashexec run --network allowlist refuses what is not allowed, with the marker and the JSON report",
          "[cli][sandbox][allowlist]") {
  // Nothing is reached: the one name asked for is refused by the proxy
  // before any connection, so no remote host is needed here
  // (tests/test_network_allowlist.cpp has one).
  auto result = cli_run(
      "run --mode read-only --network allowlist --allow-domain files.test --host files.test=192.0.2.1 -- "
      "'curl -sS -o /dev/null -w \"%{http_code}\\n\" http://pypi.org/simple/'");
  if (result.exit_code == 125) {
    WARN("skipped: no sandbox backend usable on this machine: " << result.err.text);
    return;
  }
  CHECK(result.out.text == "403\n[network: blocked pypi.org:80 (not in allowed domains)]\n");
  auto report = cli_run(
      "run --mode read-only --network allowlist --allow-domain files.test --json -- "
      "'curl -s -o /dev/null http://pypi.org/'");
  auto j = json::parse(report.out.text);
  REQUIRE(j["network"]["attempts"].size() == 1);
  CHECK(j["network"]["attempts"][0]["host"] == "pypi.org");
  CHECK(j["network"]["attempts"][0]["method"] == "GET");
  CHECK(j["network"]["attempts"][0]["decision"] == "blocked");
  CHECK(j["network"]["attempts"][0]["reason"] == "not_allowed");
  CHECK(j["network"]["attempts_dropped"] == 0);

  auto wildcard = cli_run("run --network allowlist --allow-domain '*' -- true");
  CHECK(wildcard.exit_code == 2);
  CHECK(wildcard.err.text.find("network.allowed_domains[0]") != std::string::npos);
  auto host = cli_run("run --network allowlist --host files.test -- true");
  CHECK(host.exit_code == 2);
  CHECK(host.err.text.find("--host") != std::string::npos);
}

TEST_CASE("bashexec rejects unknown flags and prints help and version", "[cli]") {
  auto bad = cli_run("run --frobnicate -- true");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.text.find("--frobnicate") != std::string::npos);
  for (auto sub : {"", "run ", "serve ", "mcp ", "tools "}) {
    auto help = cli_run(std::string(sub) + "--help");
    CHECK(help.exit_code == 0);
    CHECK(help.out.text.find("Usage") != std::string::npos);
    auto version = cli_run(std::string(sub) + "--version");
    CHECK(version.exit_code == 0);
    CHECK(version.out.text.find("bashexec 0.") == 0);
  }
}

TEST_CASE("bashexec run and serve and mcp take the containment and resource-limit flags", "[cli][limits]") {
  auto limited = cli_run("run --unconfined --max-open-files 17 --max-file-size 4096 -- 'ulimit -n; ulimit -f'");
  CHECK(limited.exit_code == 0);
  CHECK(limited.out.text == "17\n4\n");  // bash's ulimit -f counts 1024-byte blocks
  auto grouped = cli_run("run --unconfined --containment process-group -- 'echo contained'");
  CHECK(grouped.exit_code == 0);
  CHECK(grouped.out.text == "contained\n");
  for (auto bad : {"--containment sometimes", "--max-processes 0", "--max-memory lots", "--max-cpu-time -1"}) {
    auto refused = cli_run(std::string("run ") + bad + " -- true");
    CHECK(refused.exit_code == 2);
    CHECK(refused.err.text.find(std::string(bad).substr(0, std::string(bad).find(' '))) != std::string::npos);
  }
  for (auto sub : {"run", "serve", "mcp"}) {
    auto help = cli_run(std::string(sub) + " --help");
    CHECK(help.out.text.find("--containment HOW") != std::string::npos);
    CHECK(help.out.text.find("--max-open-files N") != std::string::npos);
  }
  CHECK(cli_run("mcp --help").out.text.find("elicitation/create") != std::string::npos);
  CHECK(cli_run("mcp --session '' --unconfined").exit_code == 2);
}

TEST_CASE("bashexec mcp --http refuses an address it cannot serve, naming the flag", "[cli][http]") {
  CHECK(cli_run("--help").out.text.find("--http ADDR:PORT") != std::string::npos);
  CHECK(cli_run("mcp --help").out.text.find("--token-file FILE") != std::string::npos);
  for (auto bad :
       {"--http 127.0.0.1", "--http :8080", "--http 127.0.0.1:65536", "--http [::1:80", "--http 1.2.3.4:x"}) {
    const auto refused = cli_run(std::string("mcp --unconfined ") + bad);
    CHECK(refused.exit_code == 2);
    CHECK(refused.err.text.find("--http") != std::string::npos);
  }
  // Off the loopback a token is required; a token file needs --http.
  const auto open = cli_run("mcp --unconfined --http 0.0.0.0:0");
  CHECK(open.exit_code == 2);
  CHECK(open.err.text.find("--token-file") != std::string::npos);
  CHECK(cli_run("mcp --unconfined --token-file /nonexistent").exit_code == 2);
  CHECK(cli_run("mcp --unconfined --http 127.0.0.1:0 --token-file /nonexistent").exit_code == 2);
  // The executor protocol is served beside MCP over HTTP only.
  const auto api = cli_run("mcp --unconfined --executor-api");
  CHECK(api.exit_code == 2);
  CHECK(api.err.text.find("--executor-api") != std::string::npos);
  CHECK(cli_run("mcp --help").out.text.find("--executor-api") != std::string::npos);
}

TEST_CASE("bashexec tools prints the schemas, with escalation fields only under a sandbox", "[cli]") {
  auto confined = json::parse(cli_run("tools").out.text);
  auto open = json::parse(cli_run("tools --unconfined").out.text);
  REQUIRE(confined.size() == 4);  // bash_input too: the CLI's executors take input
  CHECK(confined[3]["name"] == "bash_input");
  CHECK(confined[0]["input_schema"]["properties"].contains("tty"));
  CHECK(confined[0]["name"] == "bash");
  CHECK(confined[0].dump().find("sandbox_permissions") != std::string::npos);
  CHECK(open[0].dump().find("sandbox_permissions") == std::string::npos);
}

TEST_CASE("bashexec serve answers every request line, concurrently, and shuts down cleanly at EOF", "[cli][serve]") {
  test_support::temp_dir workspace;
  server_process server({"--unconfined", "--workdir", workspace.path().string()});

  SECTION("the tools listing, a foreground call and a malformed line") {
    server.send({{"id", 1}, {"op", "tools"}});
    auto tools = server.reply_to(1);
    CHECK(tools["tools"].size() == 4);

    server.send(bash_call(2, "s1", "echo hello"));
    auto hello = server.reply_to(2);
    CHECK(hello["text"] == "hello\n");
    CHECK(hello["is_error"] == false);

    server.send_raw("this is not json");
    auto malformed = server.next([](const json& j) { return j.contains("id") && j["id"].is_null(); });
    CHECK(malformed["is_error"] == true);
    CHECK(malformed["text"].get<std::string>().find("malformed") != std::string::npos);

    server.send({{"id", 3}, {"op", "frobnicate"}});
    CHECK(server.reply_to(3)["is_error"] == true);

    server.send(bash_call(4, "s1", "echo still alive"));
    CHECK(server.reply_to(4)["text"] == "still alive\n");

    // A line past the 16 MiB limit is refused without being kept.
    server.send_raw(std::string((std::size_t{16} << 20) + 10, 'x'));
    auto huge = server.next([](const json& j) { return j.contains("id") && j["id"].is_null(); });
    CHECK(huge["is_error"] == true);
    CHECK(huge["text"].get<std::string>().find("longer than") != std::string::npos);
    server.send(bash_call(5, "s1", "echo after"));
    CHECK(server.reply_to(5)["text"] == "after\n");
  }

  SECTION("a long foreground call does not block a call on a later line") {
    server.send(bash_call(1, "s1", "sleep 2; echo slow"));
    server.send(bash_call(2, "s1", "echo fast"));
    auto first = server.next([](const json& j) { return j.contains("id") && !j["id"].is_null(); });
    CHECK(first["id"] == 2);
    CHECK(server.reply_to(1)["text"] == "slow\n");
  }

  SECTION("a background start, bash_output polled until completion, and the notice line") {
    server.send(bash_call(1, "s1", "echo one; sleep 0.3; echo two", true));
    auto started = server.reply_to(1);
    CHECK(started["text"] == "started background task bash-1");
    std::string seen;
    for (int i = 2; i < 200; ++i) {
      server.send({{"id", i}, {"session", "s1"}, {"tool", "bash_output"}, {"args", {{"task_id", "bash-1"}}}});
      std::string text = server.reply_to(i)["text"];
      seen += text;
      if (text.find("[status: completed") != std::string::npos) break;
      std::this_thread::sleep_for(50ms);
    }
    CHECK(seen.find("one\n") != std::string::npos);
    CHECK(seen.find("two\n") != std::string::npos);
    CHECK(seen.find("[status: completed, exit code: 0]") != std::string::npos);
    auto notice = server.next([](const json& j) { return j.contains("notice"); });
    CHECK(notice["session"] == "s1");
    CHECK(notice["notice"].get<std::string>().find("bash-1") != std::string::npos);
  }

  SECTION("the owner fence holds across two sessions") {
    server.send(bash_call(1, "alice", "sleep 5", true));
    CHECK(server.reply_to(1)["text"] == "started background task bash-1");
    server.send({{"id", 2}, {"session", "bob"}, {"tool", "bash_output"}, {"args", {{"task_id", "bash-1"}}}});
    auto fenced = server.reply_to(2);
    CHECK(fenced["is_error"] == true);
    CHECK(fenced["text"] == "task bash-1 belongs to another session");
    server.send({{"id", 3}, {"session", "bob"}, {"tool", "bash_kill"}, {"args", {{"task_id", "bash-1"}}}});
    CHECK(server.reply_to(3)["text"] == "task bash-1 belongs to another session");
    server.send({{"id", 4}, {"session", "alice"}, {"tool", "bash_kill"}, {"args", {{"task_id", "bash-1"}}}});
    CHECK(server.reply_to(4)["text"] == "killed task bash-1");
  }

  SECTION("end of input kills running tasks and leaves no child process") {
    server.send(bash_call(1, "s1", "trap '' TERM; sleep 60", true));
    CHECK(server.reply_to(1)["is_error"] == false);
    server.close_input();
    CHECK(server.wait_exit() == 0);
    CHECK_FALSE(bashexec::detail::group_has_live_members(server.pgid()));
  }
}

TEST_CASE("bashexec serve set_mode changes the next call's sandbox mode", "[cli][serve][sandbox]") {
  test_support::temp_dir workspace;
  test_support::temp_dir sessions;
  server_process server({"--workdir", workspace.path().string(), "--session-dir", sessions.path().string()});
  server.send(bash_call(1, "s1", "echo x > before.txt"));
  auto before = server.reply_to(1);
  if (before["text"].get<std::string>().find("sandbox unavailable") != std::string::npos) {
    WARN("skipped: no sandbox backend usable on this machine: " << before["text"]);
    return;
  }
  CHECK(before["text"].get<std::string>().find("[sandbox: file access denied under read-only mode]") !=
        std::string::npos);
  server.send({{"id", 2}, {"op", "set_mode"}, {"session", "s1"}, {"mode", "workspace-write"}});
  CHECK(server.reply_to(2)["is_error"] == false);
  server.send(bash_call(3, "s1", "echo x > after.txt && echo wrote"));
  CHECK(server.reply_to(3)["text"] == "wrote\n");
  CHECK(std::filesystem::exists(workspace.path() / "after.txt"));
  // Another session is not affected by s1's override.
  server.send(bash_call(4, "s2", "echo x > other.txt"));
  CHECK(server.reply_to(4)["text"].get<std::string>().find("denied") != std::string::npos);
}

TEST_CASE("bashexec serve --approve ask asks on its output and waits for the answer", "[cli][serve][sandbox]") {
  test_support::temp_dir workspace;
  server_process server({"--workdir", workspace.path().string(), "--approve", "ask"});
  json args{{"command", "echo x > granted.txt && echo wrote"},
            {"description", "write a file"},
            {"sandbox_permissions", "workspace-write"},
            {"justification", "the test needs it"}};
  server.send({{"id", 1}, {"session", "s1"}, {"tool", "bash"}, {"args", args}});
  auto question = server.next([](const json& j) { return j.contains("approval"); });
  CHECK(question["approval"]["requested_mode"] == "workspace-write");
  CHECK(question["approval"]["justification"] == "the test needs it");
  server.send({{"id", 2}, {"op", "approve"}, {"approval", question["approval"]["id"]}, {"outcome", "allowed-once"}});
  CHECK(server.reply_to(2)["is_error"] == false);
  auto ran = server.reply_to(1);
  if (ran["text"].get<std::string>().find("sandbox unavailable") != std::string::npos) {
    WARN("skipped: no sandbox backend usable on this machine: " << ran["text"]);
    return;
  }
  CHECK(ran["text"] == "wrote\n");
  CHECK(std::filesystem::exists(workspace.path() / "granted.txt"));
}

TEST_CASE("bashexec serve --approve ask shows the whole command, hidden characters escaped, and never a cut one",
          "[cli][serve][approval][issue-25]") {
  test_support::temp_dir workspace;
  server_process server({"--workdir", workspace.path().string(), "--approve", "ask"});
  const std::string command = "ls\ntouch /var/tmp/HIDDEN \xE2\x80\xAE\xE2\x80\x8B\x01";
  json args{{"command", command},
            {"description", "list"},
            {"sandbox_permissions", "danger-full-access"},
            {"justification", "j"}};
  server.send({{"id", 1}, {"session", "s1"}, {"tool", "bash"}, {"args", args}});
  auto question = server.next([](const json& j) { return j.contains("approval"); });
  CHECK(question["approval"]["command"] == command);
  const std::string text = question["approval"].value("text", "");
  CHECK(text.find("Command (2 lines, shown in full; \\ starts an escape):\n1 | ls\n"
                  "2 | touch /var/tmp/HIDDEN \\u{202E}\\u{200B}\\x01\n") != std::string::npos);
  server.send({{"id", 2}, {"op", "approve"}, {"approval", question["approval"]["id"]}, {"outcome", "rejected"}});
  CHECK(server.reply_to(1)["is_error"] == true);

  args["command"] = "true #" + std::string(std::size_t{1} << 20, 'x');
  server.send({{"id", 3}, {"session", "s1"}, {"tool", "bash"}, {"args", args}});
  const auto refused = server.reply_to(3);
  CHECK(refused["text"].get<std::string>().find("too long to show a person for approval") != std::string::npos);
  CHECK_FALSE(server.arrives([](const json& j) { return j.contains("approval"); }, 200ms));
}

TEST_CASE("bashexec serve rejects a blank description and an empty task_id, naming the field",
          "[cli][serve][contract-18]") {
  test_support::temp_dir workspace;
  server_process server({"--unconfined", "--workdir", workspace.path().string()});
  server.send({{"id", 1},
               {"session", "s1"},
               {"tool", "bash"},
               {"args", {{"command", "touch ran"}, {"description", "  "}}}});
  CHECK(server.reply_to(1) == json{{"id", 1}, {"text", "field \"description\" must not be empty"}, {"is_error", true}});
  CHECK_FALSE(std::filesystem::exists(workspace.path() / "ran"));
  server.send({{"id", 2}, {"session", "s1"}, {"tool", "bash_output"}, {"args", {{"task_id", ""}}}});
  CHECK(server.reply_to(2) == json{{"id", 2}, {"text", "field \"task_id\" must not be empty"}, {"is_error", true}});
  server.send({{"id", 3}, {"session", "s1"}, {"tool", "bash_kill"}, {"args", {{"task_id", ""}}}});
  CHECK(server.reply_to(3) == json{{"id", 3}, {"text", "field \"task_id\" must not be empty"}, {"is_error", true}});
}

TEST_CASE("bashexec serve: the empty session id is an owner like any other, an absent or null session is ownerless",
          "[cli][serve][contract-11][contract-19]") {
  test_support::temp_dir workspace;
  server_process server({"--unconfined", "--workdir", workspace.path().string()});
  const json fenced = "task bash-1 belongs to another session";

  server.send(bash_call(1, "", "sleep 30", true));
  CHECK(server.reply_to(1)["text"] == "started background task bash-1");
  server.send({{"id", 2}, {"session", "s1"}, {"tool", "bash_output"}, {"args", {{"task_id", "bash-1"}}}});
  CHECK(server.reply_to(2)["text"] == fenced);
  server.send({{"id", 3}, {"tool", "bash_kill"}, {"args", {{"task_id", "bash-1"}}}});
  CHECK(server.reply_to(3)["text"] == fenced);
  server.send({{"id", 4}, {"session", nullptr}, {"tool", "bash_kill"}, {"args", {{"task_id", "bash-1"}}}});
  CHECK(server.reply_to(4)["text"] == fenced);
  server.send({{"id", 5}, {"session", ""}, {"tool", "bash_kill"}, {"args", {{"task_id", "bash-1"}}}});
  CHECK(server.reply_to(5)["text"] == "killed task bash-1");
  auto owned_notice = server.next([](const json& j) { return j.contains("notice"); });
  CHECK(owned_notice["session"] == "");

  // No session member (or null): the task is ownerless and open to all.
  json args{{"command", "sleep 30"}, {"description", "test"}, {"run_in_background", true}};
  server.send({{"id", 6}, {"tool", "bash"}, {"args", args}});
  CHECK(server.reply_to(6)["text"] == "started background task bash-2");
  server.send({{"id", 7}, {"session", "s1"}, {"tool", "bash_kill"}, {"args", {{"task_id", "bash-2"}}}});
  CHECK(server.reply_to(7)["text"] == "killed task bash-2");
  auto ownerless_notice = server.next([](const json& j) { return j.contains("notice"); });
  REQUIRE(ownerless_notice.contains("session"));
  CHECK(ownerless_notice["session"].is_null());

  server.send({{"id", 8}, {"session", 5}, {"tool", "bash"}, {"args", args}});
  CHECK(server.reply_to(8)["is_error"] == true);
}

TEST_CASE("bashexec serve: the lossy line lists the spill paths, each usable as it stands",
          "[cli][serve][contract-20][contract-6]") {
  test_support::temp_dir workspace;
  server_process server({"--unconfined", "--workdir", workspace.path().string()});
  server.send(bash_call(1, "s1", "seq 20000; seq 30000 >&2", true));
  CHECK(server.reply_to(1)["text"] == "started background task bash-1");
  server.next([](const json& j) { return j.contains("notice"); });
  server.send({{"id", 2}, {"session", "s1"}, {"tool", "bash_output"}, {"args", {{"task_id", "bash-1"}}}});
  const std::string text = server.reply_to(2)["text"];
  const std::string head = "[some output was dropped from memory; full output: ";
  const auto at = text.find(head);
  REQUIRE(at != std::string::npos);
  const auto end = text.find("]\n", at);
  REQUIRE(end != std::string::npos);
  const std::string listed = text.substr(at + head.size(), end - at - head.size());
  const auto comma = listed.find(", ");
  REQUIRE(comma != std::string::npos);
  const std::filesystem::path out = listed.substr(0, comma), err = listed.substr(comma + 2);
  CHECK_THAT(out.filename().string(), Catch::EndsWith("-stdout"));
  CHECK_THAT(err.filename().string(), Catch::EndsWith("-stderr"));
  REQUIRE(std::filesystem::exists(out));
  REQUIRE(std::filesystem::exists(err));
  CHECK(std::filesystem::file_size(out) == 108894u);  // seq 20000 | wc -c
  CHECK(std::filesystem::file_size(err) == 168894u);  // seq 30000 | wc -c
}

// --prespawn N (issue 14): the same compositions over spawn_with<prespawned>.

TEST_CASE("bashexec run --prespawn prints the same result and exit status as a cold run, unconfined and read-only",
          "[cli][prespawn][contract-2][contract-16]") {
  test_support::temp_dir workspace;
  const std::string command =
      "-- 'echo \"$0|$BASH_EXECUTION_STRING|$(pwd)|$(umask)\"; echo oops >&2; no_such_command_x; exit 3'";
  const auto cold = cli_run("run --unconfined " + command, workspace.path());
  const auto warm = cli_run("run --unconfined --prespawn 2 " + command, workspace.path());
  CHECK(cold.exit_code == 3);
  CHECK(cold.out.text.find("no_such_command_x: command not found") != std::string::npos);
  CHECK(warm.exit_code == cold.exit_code);
  CHECK(warm.out.text == cold.out.text);
  CHECK(warm.err.text == cold.err.text);

  const std::string denied = "-- 'cat /etc/hostname >/dev/null; echo x > f'";
  const auto cold_denied = cli_run("run --mode read-only " + denied, workspace.path());
  if (cold_denied.exit_code == 125) {
    WARN("skipped the read-only half: no sandbox backend usable on this machine: " << cold_denied.err.text);
    return;
  }
  const auto warm_denied = cli_run("run --mode read-only --prespawn 2 " + denied, workspace.path());
  CHECK(cold_denied.out.text.find("[sandbox: file access denied under read-only mode]") != std::string::npos);
  CHECK(warm_denied.exit_code == cold_denied.exit_code);
  CHECK(warm_denied.out.text == cold_denied.out.text);
  CHECK_FALSE(std::filesystem::exists(workspace.path() / "f"));
}

TEST_CASE("bashexec serve --prespawn serves calls from its warm pool and leaves no process behind at end of input",
          "[cli][serve][prespawn][contract-12]") {
  for (const std::string mode : {"danger-full-access", "read-only"}) {
    INFO("mode " << mode);
    // The workspace path is on the server's command line, so on its waiting
    // processes' too (clones of the server that have not exec'd yet), and on
    // no command's: the marker that finds them.
    test_support::temp_dir workspace;
    const std::string marker = workspace.path().string();
    server_process server({"--mode", mode, "--prespawn", "2", "--workdir", marker});
    // The first call of a key is served cold and makes the key known; the
    // pool then fills to 2 in the background.
    server.send(bash_call(1, "s1", "echo first"));
    const std::string first = server.reply_to(1)["text"];
    if (first.find("sandbox unavailable") != std::string::npos) {
      WARN("skipped read-only: no sandbox backend usable on this machine: " << first);
      break;
    }
    CHECK(first == "first\n");
    REQUIRE(wait_for_processes(marker, 3));  // the server and 2 waiting processes
    for (int id = 2; id <= 4; ++id) {
      auto waiting = processes_with(marker);
      std::erase(waiting, static_cast<long>(server.pid()));
      server.send(bash_call(id, "s1", "echo $((" + std::to_string(id) + " * 7)); pwd"));
      CHECK(server.reply_to(id)["text"] == std::to_string(id * 7) + "\n" + marker + "\n");
      // Served warm: one of the processes that waited before the call ran it
      // (exec'd bash and exited); a cold call would leave them all waiting.
      CHECK(std::ranges::any_of(waiting, [](long pid) { return !test_support::pid_alive(pid); }));
      REQUIRE(wait_for_processes(marker, 3));  // refilled
    }
    const auto pool = processes_with(marker);
    server.close_input();
    CHECK(server.wait_exit() == 0);
    CHECK(processes_with(marker).empty());
    CHECK(std::ranges::none_of(pool, test_support::pid_alive));
  }
}

TEST_CASE("bashexec run, serve and mcp refuse a --prespawn that is not a number from 1 to 64, naming the flag",
          "[cli][prespawn]") {
  for (auto sub : {"run", "serve", "mcp"}) {
    for (auto bad : {"0", "65", "abc", "-1", "2x"}) {
      INFO(sub << " --prespawn " << bad);
      const auto refused = cli_run(std::string(sub) + " --unconfined --prespawn " + bad + " -- true");
      CHECK(refused.exit_code == 2);
      CHECK(refused.err.text.find("--prespawn") != std::string::npos);
    }
    CHECK(cli_run(std::string(sub) + " --help").out.text.find("--prespawn N") != std::string::npos);
  }
  CHECK(cli_run("--help").out.text.find("[--prespawn N]") != std::string::npos);
}

TEST_CASE("bashexec run --prespawn starts no pool: its one command is served cold and no waiter is left idle",
          "[cli][prespawn]") {
  using namespace cli_test;
  // Unconfined, so /proc shows bashexec's children: the command's shell and,
  // under cgroup containment, the guardian — never 64 waiting processes.
  const auto result =
      cli_run("run --unconfined --prespawn 64 -- 'sleep 0.5; grep -l \"^PPid:[[:space:]]*$PPID$\" /proc/[0-9]*/status | wc -l'");
  REQUIRE(result.exit_code == 0);
  CAPTURE(result.out.text);
  CHECK(std::stoi(result.out.text) <= 3);
}

TEST_CASE("bashexec serve --carry cwd,env carries a session's cd and export, through a restart", "[cli][serve]") {
  test_support::temp_dir workspace;
  test_support::temp_dir sessions;
  std::filesystem::create_directory(workspace.path() / "sub");
  const std::vector<std::string> flags{"--unconfined", "--carry", "cwd,env", "--workdir", workspace.path().string(),
                                       "--session-dir", sessions.path().string()};
  {
    server_process server(flags);
    server.send(bash_call(1, "s1", "cd sub && export VENV=on"));
    CHECK(server.reply_to(1)["is_error"] == false);
    server.send(bash_call(2, "s1", "pwd; echo $VENV"));
    CHECK(server.reply_to(2)["text"] == "[cwd: sub]\n" + workspace.str() + "/sub\non\n");
    server.send(bash_call(3, "s2", "pwd; echo \"[${VENV-}]\""));
    CHECK(server.reply_to(3)["text"] == workspace.str() + "\n[]\n");
  }
  server_process restarted(flags);
  restarted.send(bash_call(4, "s1", "pwd; echo $VENV"));
  CHECK(restarted.reply_to(4)["text"] == "[cwd: sub]\n" + workspace.str() + "/sub\non\n");
}

TEST_CASE("an egress-policy flag without --network allowlist is refused, never ignored", "[cli][allowlist]") {
  // Ignored, it would leave every command the full network while the person
  // who wrote --allow-domain believes egress restricted (issue 43).
  for (const char* sub : {"run", "serve", "mcp", "tools"}) {
    for (const char* flags : {"--allow-domain pypi.org", "--deny-domain evil.test", "--allow-range 10.0.0.0/8",
                              "--host files.test=192.0.2.1", "--network-methods read-only",
                              "--network full --allow-domain pypi.org", "--network none --allow-domain pypi.org"}) {
      const std::string line = fmt::format("{} {}{}", sub, flags, std::string_view(sub) == "run" ? " -- true" : "");
      INFO(line);
      auto refused = cli_run(line);
      CHECK(refused.exit_code == 2);
      CHECK(refused.out.text.empty());
      CHECK(refused.err.text.find("only with --network allowlist") != std::string::npos);
      const std::string policy_flag(std::string_view(flags).substr(std::string_view(flags).rfind("--")));
      CHECK(refused.err.text.find(policy_flag.substr(0, policy_flag.find(' ')) + ": ") != std::string::npos);
    }
  }
  auto both = cli_run("run --allow-domain a.test --deny-domain b.test -- true");
  CHECK(both.err.text.find("--allow-domain, --deny-domain: apply only with --network allowlist") != std::string::npos);
  CHECK(both.err.text.find("the network \"full\"") != std::string::npos);
  // With it, the same flags are taken.
  CHECK(cli_run("tools --network allowlist --allow-domain pypi.org --host files.test=192.0.2.1").exit_code == 0);
}

TEST_CASE("bashexec serve, mcp and tools refuse a --carry they cannot read, naming the flag", "[cli][serve]") {
  for (const char* sub : {"serve", "mcp", "tools"}) {
    INFO(sub);
    auto bad = cli_run(fmt::format("{} --carry everything", sub));
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.text.find("--carry: expected cwd, env, cwd,env or none, got \"everything\"") != std::string::npos);
  }
  auto carried = json::parse(cli_run("tools --carry cwd").out.text);
  CHECK(carried[0]["input_schema"]["properties"].contains("reset"));
  CHECK(json::parse(cli_run("tools").out.text)[0]["input_schema"]["properties"].contains("reset") == false);
}

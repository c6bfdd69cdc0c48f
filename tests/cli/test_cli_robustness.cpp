// The bashexec program under faults and hostile input (issue 11), through
// the real binary: request lines that would crash or confuse the server,
// signals, end of input, the in-flight limit, and texts that must agree with
// the facts they report.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <bashexec/signal_name.hpp>

#include "cli_test_support.hpp"

using namespace cli_test;
namespace fs = std::filesystem;

namespace {

std::string text_of(const json& response) { return response.at("text").get<std::string>(); }

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

/// What processes_with sees for `exec -a NAME sleep 300` once the exec
/// happened: argv "NAME", "300" (NULs read as spaces) — unlike the shell
/// before it ("NAME sleep 300"), or bashexec's own argv.
std::string execd_sleep(const std::string& name) { return name + " 300"; }

/// Waits until `dir` has an entry (the executor creates its spill directory
/// when the output it reads first overflows, a moment after the command wrote it).
bool has_entries_soon(const fs::path& dir) {
  for (int i = 0; i < 1000 && entries(dir).empty(); ++i) std::this_thread::sleep_for(20ms);
  return !entries(dir).empty();
}

/// A server whose spill files and private session directory land in
/// directories of this test, so that the test can see them go.
struct isolated_server {
  test_support::temp_dir tmp;      // TMPDIR: nothing of bashexec's may land here
  test_support::temp_dir runtime;  // XDG_RUNTIME_DIR: the session directory, and spills under bashexec/
  test_support::temp_dir workspace;
  server_process server;

  explicit isolated_server(std::vector<std::string> extra = {})
      : server(args(workspace, std::move(extra)), {{"TMPDIR", tmp.str()}, {"XDG_RUNTIME_DIR", runtime.str()}}) {}

  static std::vector<std::string> args(const test_support::temp_dir& workspace, std::vector<std::string> extra) {
    std::vector<std::string> all{"--unconfined", "--workdir", workspace.str()};
    all.insert(all.end(), extra.begin(), extra.end());
    return all;
  }
};

}  // namespace

TEST_CASE("serve answers a request nested 150000 levels deep with an error that keeps its id, and keeps serving",
          "[cli][serve][robustness]") {
  // Issue 11: such lines killed the server with SIGSEGV, orphaning every task.
  isolated_server s;
  auto& server = s.server;
  const std::string marker = unique_marker("deep");
  server.send(bash_call("bg", "s1", "sleep 300; : " + marker, true));
  CHECK(server.reply_to("bg")["is_error"] == false);

  const std::string deep_args = "{\"id\": 7, \"tool\": \"bash\", \"args\": " + std::string(150000, '[') +
                                std::string(150000, ']') + "}";
  server.send_raw(deep_args);
  auto args_reply = server.reply_to(7);
  CHECK(args_reply["is_error"] == true);
  CHECK(contains(text_of(args_reply), "at most 64 are allowed"));

  // An id after the deep part is still read; an id that is itself too deep cannot be echoed.
  server.send_raw("{\"args\": " + std::string(100, '[') + std::string(100, ']') + ", \"id\": \"late\"}");
  CHECK(contains(text_of(server.reply_to("late")), "levels deep"));
  server.send_raw("{\"id\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  auto deep_id = server.next([](const json& j) { return j.contains("id") && j["id"].is_null(); });
  CHECK(contains(text_of(deep_id), "levels deep"));

  // Many values and an overlong session id are refused too, with the id.
  std::string wide = "{\"id\": 8, \"op\": \"tools\", \"x\": [0";
  for (int i = 0; i < 20000; ++i) wide += ",0";
  server.send_raw(wide + "]}");
  CHECK(contains(text_of(server.reply_to(8)), "at most 10000 are allowed"));
  server.send(bash_call(9, std::string(200, 's'), "echo never"));
  CHECK(contains(text_of(server.reply_to(9)), "at most 80 are allowed"));

  // A structured id within the limits is echoed whole.
  server.send(bash_call(json::array({1, json::object({{"k", "v"}})}), "s1", "echo structured"));
  CHECK(server.reply_to(json::array({1, json::object({{"k", "v"}})}))["text"] == "structured\n");

  // Still serving, and the task started before is still there.
  server.send({{"id", 10}, {"session", "s1"}, {"tool", "bash_output"}, {"args", {{"task_id", "bash-1"}}}});
  CHECK(contains(text_of(server.reply_to(10)), "[status: running]"));
  CHECK(processes_with(marker).size() >= 1);
  server.close_input();
  CHECK(server.wait_exit() == 0);
  CHECK(processes_with(marker).empty());
}

TEST_CASE("serve answers a line of invalid UTF-8 with an error that says so and keeps its id",
          "[cli][serve][robustness]") {
  isolated_server s;
  auto& server = s.server;
  server.send_raw("{\"id\": 5, \"session\": \"s1\", \"tool\": \"bash\", \"args\": {\"command\": \"echo \xff\xfe\", "
                  "\"description\": \"bad bytes\"}}");
  auto reply = server.reply_to(5);
  CHECK(reply["is_error"] == true);
  CHECK(contains(text_of(reply), "not valid UTF-8"));
  CHECK_FALSE(contains(text_of(reply), "expected one JSON object per line"));
  // The id comes back even when the bad byte is inside it.
  server.send_raw("{\"id\": \"a\xc3\", \"op\": \"tools\"}");
  auto bad_id = server.next([](const json& j) { return j.contains("id") && j["id"].is_string(); });
  CHECK(bad_id["id"] == "a\xEF\xBF\xBD");
  CHECK(contains(text_of(bad_id), "not valid UTF-8"));
  server.send(bash_call(6, "s1", "echo fine"));
  CHECK(server.reply_to(6)["text"] == "fine\n");
}

TEST_CASE("a request line over 16 MiB keeps the id of its kept part", "[cli][serve][robustness]") {
  isolated_server s;
  auto& server = s.server;
  server.send_raw("{\"id\": 11, \"tool\": \"bash\", \"args\": {\"command\": \"" +
                  std::string((std::size_t{16} << 20) + 10, 'x') + "\"}}");
  auto reply = server.reply_to(11);
  CHECK(reply["is_error"] == true);
  CHECK(contains(text_of(reply), "longer than 16777216 bytes"));
  server.send(bash_call(12, "s1", "echo after"));
  CHECK(server.reply_to(12)["text"] == "after\n");
}

TEST_CASE("SIGINT, SIGTERM and SIGHUP to serve kill every command, remove its files and exit 128+N",
          "[cli][serve][signals]") {
  for (int signo : {SIGINT, SIGTERM, SIGHUP}) {
    INFO("signal " << signo);
    isolated_server s;
    auto& server = s.server;
    const std::string marker = unique_marker("signal");
    // The background task overflows its output cap, so it has a spill file.
    server.send(bash_call("bg", "s1", "head -c 200000 /dev/zero; exec -a " + marker + "-bg sleep 300", true));
    CHECK(server.reply_to("bg")["is_error"] == false);
    server.send(bash_call("fg", "s1", "exec -a " + marker + "-fg sleep 300"));
    REQUIRE(wait_for_processes(execd_sleep(marker + "-bg"), 1));
    REQUIRE(wait_for_processes(execd_sleep(marker + "-fg"), 1));
    const fs::path spills = s.runtime.path() / "bashexec";
    CHECK(has_entries_soon(spills));                 // the spill directory
    CHECK(entries(s.runtime.path()).size() == 2);    // and the private session directory

    REQUIRE(::kill(server.pid(), signo) == 0);
    CHECK(server.wait_exit() == 128 + signo);
    CHECK(processes_with(marker).empty());
    CHECK(entries(spills).empty());                  // no spill directory or file left
    CHECK(entries(s.runtime.path()) == std::vector<std::string>{"bashexec"});  // no session directory left
    CHECK(entries(s.tmp.path()).empty());
  }
}

TEST_CASE("SIGINT, SIGTERM and SIGHUP to run kill the command, remove its spill files and exit 128+N",
          "[cli][signals]") {
  for (int signo : {SIGINT, SIGTERM, SIGHUP}) {
    INFO("signal " << signo);
    // Not under /tmp: spill files never go where workspace-write may write.
    test_support::temp_dir tmp("/var/tmp");
    test_support::temp_dir logs;
    const std::string marker = unique_marker("run");
    cli_process run({"run", "--unconfined", "--", "head -c 200000 /dev/zero; exec -a " + marker + " sleep 300"},
                    {{"XDG_RUNTIME_DIR", tmp.str()}}, logs.path() / "stderr");
    REQUIRE(wait_for_processes(execd_sleep(marker), 1));
    const fs::path kept = tmp.path() / "bashexec" / "bashexec-run";  // where run keeps printed spills
    CHECK(has_entries_soon(kept));
    REQUIRE(::kill(run.pid(), signo) == 0);
    CHECK(run.wait_exit() == 128 + signo);
    CHECK(processes_with(marker).empty());
    CHECK(entries(kept).empty());
    CHECK(file_text(logs.path() / "stderr") ==
          fmt::format("bashexec: stopped by {}; the command was killed\n", bashexec::signal_name(signo)));
    CHECK(run.rest().empty());  // no result for a command killed for our signal
  }
}

TEST_CASE("end of input answers the calls in flight within their own timeouts, kills every task and exits 0",
          "[cli][serve][eof]") {
  isolated_server s;
  auto& server = s.server;
  const std::string marker = unique_marker("eof");
  server.send(bash_call("bg", "s1", "exec -a " + marker + "-bg sleep 300", true));
  CHECK(server.reply_to("bg")["is_error"] == false);
  json slow = bash_call("fg", "s1", "echo started; exec -a " + marker + "-fg sleep 300");
  slow["args"]["timeoutMs"] = 1500;
  server.send(slow);
  server.send(bash_call("quick", "s1", "sleep 0.3; echo quick"));
  REQUIRE(wait_for_processes(execd_sleep(marker + "-bg"), 1));
  REQUIRE(wait_for_processes(execd_sleep(marker + "-fg"), 1));
  const auto closed = std::chrono::steady_clock::now();
  server.close_input();
  auto lines = server.rest();
  CHECK(server.wait_exit() == 0);
  // The 1.5 s timeout bounds the wait, far below the 300 s the command asks for.
  CHECK(std::chrono::steady_clock::now() - closed < std::chrono::seconds(30));
  const auto reply = [&](const char* id) {
    const auto found = std::find_if(lines.begin(), lines.end(), [&](const json& j) { return j.value("id", json()) == id; });
    REQUIRE(found != lines.end());
    return *found;
  };
  CHECK(reply("fg")["is_error"] == false);
  CHECK(text_of(reply("fg")) == "started\n[timed out after 1500ms]\n[killed by signal: SIGTERM]");
  CHECK(text_of(reply("quick")) == "quick\n");
  CHECK(processes_with(marker).empty());
  CHECK(entries(s.runtime.path()) == std::vector<std::string>{"bashexec"});  // only the spill parent
}

TEST_CASE("serve < requests.jsonl answers every request before it exits, as the README's example runs it",
          "[cli][serve][eof]") {
  test_support::temp_dir work;
  {
    std::ofstream requests(work.path() / "requests.jsonl");
    for (int id = 1; id <= 3; ++id)
      requests << bash_call(id, "s1", fmt::format("sleep 0.{}; echo done {}", id, id)).dump() << "\n";
    requests << json{{"id", 4}, {"op", "tools"}}.dump() << "\n";
  }
  const auto served = cli_run("serve --unconfined < requests.jsonl", work.path());
  CHECK(served.exit_code == 0);
  std::vector<json> answers;
  std::istringstream out(served.out.text);
  for (std::string line; std::getline(out, line);) answers.push_back(json::parse(line));
  REQUIRE(answers.size() == 4);
  for (int id = 1; id <= 3; ++id) {
    const auto found = std::find_if(answers.begin(), answers.end(), [&](const json& j) { return j["id"] == id; });
    REQUIRE(found != answers.end());
    CHECK((*found)["text"] == fmt::format("done {}\n", id));
    CHECK((*found)["is_error"] == false);
  }
}

TEST_CASE("a client that closes its input and never reads cannot hold serve or mcp: past --write-timeout they exit",
          "[cli][serve][mcp][eof]") {
  // Each answer (60000 NUL bytes, 6 bytes each in JSON) is larger than a
  // pipe, more calls than slots: the writers block, the reader waits for a
  // slot and never sees end of input (issue 25, item 4).
  const json command = {{"command", "head -c 60000 /dev/zero"}, {"description", "d"}};
  const std::vector<std::string> flags{"--unconfined", "--max-in-flight", "4", "--write-timeout", "1s"};
  std::optional<cli_process> server;
  SECTION("serve") {
    std::vector<std::string> args{"serve"};
    args.insert(args.end(), flags.begin(), flags.end());
    server.emplace(args);
    for (int id = 0; id < 12; ++id) server->send({{"id", id}, {"tool", "bash"}, {"args", command}});
  }
  SECTION("mcp") {
    std::vector<std::string> args{"mcp"};
    args.insert(args.end(), flags.begin(), flags.end());
    server.emplace(args);
    server->send({{"jsonrpc", "2.0"}, {"id", "init"}, {"method", "initialize"},
                  {"params", {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()}}}});
    server->send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    for (int id = 0; id < 12; ++id)
      server->send({{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"},
                    {"params", {{"name", "bash"}, {"arguments", command}}}});
  }
  const auto closed = std::chrono::steady_clock::now();
  server->close_input();
  CHECK(server->wait_exit(30s) == 0);  // REQUIREs the exit within 30 s
  CHECK(std::chrono::steady_clock::now() - closed < 15s);

  auto bad = cli_run("serve --write-timeout 0s");
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err.text, "--write-timeout"));
}

TEST_CASE("serve --max-in-flight 2 runs two calls at once and the third waits for a free slot",
          "[cli][serve][limits]") {
  isolated_server s({"--max-in-flight", "2"});
  auto& server = s.server;
  const fs::path dir = s.workspace.path();
  // Call k marks that it started and waits for the test to release it.
  const auto gated = [&](int k) {
    return bash_call(k, "s1",
                     fmt::format("touch started.{0}; while [ ! -e release.{0} ]; do sleep 0.02; done; echo done {0}", k));
  };
  server.send(gated(1));
  server.send(gated(2));
  server.send(gated(3));
  server.send({{"id", 4}, {"op", "tools"}});
  const auto exists_soon = [](const fs::path& path) {
    for (int i = 0; i < 1000 && !fs::exists(path); ++i) std::this_thread::sleep_for(20ms);
    return fs::exists(path);
  };
  REQUIRE(exists_soon(dir / "started.1"));
  REQUIRE(exists_soon(dir / "started.2"));
  // Over the limit: the third call does not start, and reading has paused,
  // so the `tools` line behind it is not answered yet.
  CHECK_FALSE(server.arrives([](const json& j) { return j.value("id", json()) == 4; }, 1500ms));
  CHECK_FALSE(fs::exists(dir / "started.3"));

  std::ofstream(dir / "release.1").flush();
  CHECK(server.reply_to(1)["text"] == "done 1\n");
  CHECK(exists_soon(dir / "started.3"));
  CHECK(server.reply_to(4)["is_error"] == false);
  std::ofstream(dir / "release.2").flush();
  std::ofstream(dir / "release.3").flush();
  CHECK(server.reply_to(2)["text"] == "done 2\n");
  CHECK(server.reply_to(3)["text"] == "done 3\n");

  auto bad = cli_run("serve --max-in-flight 0");
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err.text, "--max-in-flight"));
}

TEST_CASE("a second bash_kill of a TERM-ignoring task says its kill is under way, agreeing with its status",
          "[cli][serve][texts]") {
  isolated_server s;
  auto& server = s.server;
  server.send(bash_call(1, "s1", "trap '' TERM; echo ready; sleep 300", true));
  CHECK(server.reply_to(1)["text"] == "started background task bash-1");
  const auto output = [&](int id) {
    server.send({{"id", id}, {"session", "s1"}, {"tool", "bash_output"}, {"args", {{"task_id", "bash-1"}}}});
    return text_of(server.reply_to(id));
  };
  std::string seen;
  for (int id = 100; id < 400 && !contains(seen, "ready"); ++id) {
    seen += output(id);
    std::this_thread::sleep_for(20ms);
  }
  REQUIRE(contains(seen, "ready"));  // the trap is in place

  const auto kill = [&](int id) {
    server.send({{"id", id}, {"session", "s1"}, {"tool", "bash_kill"}, {"args", {{"task_id", "bash-1"}}}});
    return text_of(server.reply_to(id));
  };
  CHECK(kill(2) == "killed task bash-1");
  const std::string second = kill(3);  // within the 3 s grace: TERM is ignored, SIGKILL not sent yet
  CHECK_FALSE(contains(second, "already finished"));
  if (contains(second, "[status: running]"))
    CHECK(second == "task bash-1 is already being killed and has not exited yet; nothing more to do\n[status: running]");
  else
    WARN("the grace period ended before the second kill (a loaded machine): " << second);

  // Once it is dead, the text says so, and the status agrees.
  std::string status;
  for (int id = 400; id < 1000 && !contains(status, "[status: killed"); ++id) {
    status = output(id);
    std::this_thread::sleep_for(20ms);
  }
  CHECK(kill(4) == "task bash-1 had already finished; nothing was killed\n[status: killed by SIGKILL]");
}

TEST_CASE("run --json repairs a tail cut inside a character the same way the text does", "[cli][texts]") {
  // 30000 three-byte characters: the 64000-byte tail starts on a continuation byte.
  const std::string command = "'printf \"\\342\\202\\254%.0s\" $(seq 30000)'";
  auto json_run = cli_run("run --unconfined --json -- " + command);
  REQUIRE(json_run.exit_code == 0);
  const auto result = json::parse(json_run.out.text);
  const std::string tail = result["stdout"]["text"];
  CHECK(result["stdout"]["truncated"] == true);
  CHECK(tail.rfind("\xE2\x82\xAC", 0) == 0);  // starts with the euro sign, not U+FFFD
  CHECK_FALSE(contains(tail, "\xEF\xBF\xBD"));

  auto text_run = cli_run("run --unconfined -- " + command);
  CHECK(text_run.out.text.rfind("\xE2\x82\xAC", 0) == 0);
  CHECK(text_run.out.text.substr(0, tail.size()) == tail);
}

TEST_CASE("run exits non-zero and says so on stderr when its output cannot be written", "[cli][texts]") {
  auto closed = cli_run("run --unconfined -- 'echo hi' >&-");
  CHECK(closed.exit_code == 125);
  CHECK(contains(closed.err.text, "could not be written to stdout"));
  auto closed_json = cli_run("run --unconfined --json -- 'echo hi' >&-");
  CHECK(closed_json.exit_code == 125);
  // With stderr closed as well, the exit status alone tells.
  CHECK(cli_run("run --unconfined -- 'echo hi' >&- 2>&-").exit_code == 125);
  // A command's own status is kept when the output was written.
  CHECK(cli_run("run --unconfined -- 'echo hi; exit 3' >/dev/null").exit_code == 3);
}

TEST_CASE("serve keeps its open descriptors bounded however many sessions it sees", "[cli][serve][limits]") {
  // Each session's log holds a descriptor; at most 256 stay open.
  test_support::temp_dir sessions;
  isolated_server s({"--session-dir", sessions.str()});
  auto& server = s.server;
  server.send({{"id", 0}, {"op", "tools"}});
  server.reply_to(0);
  const std::size_t before = open_descriptors(server.pid());
  for (int i = 1; i <= 400; ++i)
    server.send({{"id", i}, {"session", fmt::format("s{}", i)}, {"tool", "bash_kill"}, {"args", {{"task_id", "bash-9"}}}});
  for (int i = 1; i <= 400; ++i) CHECK(server.reply_to(i)["text"] == "unknown task bash-9");
  const std::size_t after = open_descriptors(server.pid());
  CHECK(after <= before + 256);
  CHECK(entries(sessions.path()).size() == 400);  // every session still has its log on disk
}

TEST_CASE("a call waiting for approval holds no in-flight slot, so other calls and the answer still get through",
          "[cli][serve][limits][sandbox]") {
  isolated_server s({"--mode", "read-only", "--approve", "ask", "--max-in-flight", "1"});
  auto& server = s.server;
  server.send(bash_call(1, "s1", "echo probe"));
  const std::string probe = text_of(server.reply_to(1));
  if (contains(probe, "sandbox unavailable")) {
    WARN("skipped: no sandbox backend usable on this machine: " << probe);
    return;
  }
  json args{{"command", "echo wider"},
            {"description", "escalate"},
            {"sandbox_permissions", "workspace-write"},
            {"justification", "the test needs it"}};
  server.send({{"id", 2}, {"session", "s1"}, {"tool", "bash"}, {"args", args}});
  auto question = server.next([](const json& j) { return j.contains("approval"); });
  // The only slot is free while the question waits: another call runs.
  server.send(bash_call(3, "s1", "echo meanwhile"));
  CHECK(server.reply_to(3)["text"] == "meanwhile\n");
  server.send({{"id", 4}, {"op", "approve"}, {"approval", question["approval"]["id"]}, {"outcome", "allowed-once"}});
  CHECK(server.reply_to(4)["is_error"] == false);
  CHECK(server.reply_to(2)["text"] == "wider\n");
}

namespace {

/// The peak resident set of process `pid` so far, in KiB (VmHWM).
std::size_t peak_rss_kib(pid_t pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmHWM:")) return std::stoul(line.substr(6));
  FAIL("no VmHWM in /proc/" << pid << "/status");
  return 0;
}

/// The spill files under `dir` (recursively), with the age of each since
/// its last write. A file removed during the walk is skipped.
std::vector<std::pair<fs::path, std::chrono::milliseconds>> spill_files(const fs::path& dir) {
  std::vector<std::pair<fs::path, std::chrono::milliseconds>> found;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code gone;
    if (!it->is_regular_file(gone) || gone) continue;
    const auto written = it->last_write_time(gone);
    if (!gone) found.emplace_back(it->path(), std::chrono::duration_cast<std::chrono::milliseconds>(now - written));
  }
  return found;
}

json tool_call(const json& id, const std::string& tool, const std::string& task) {
  return {{"id", id}, {"session", "s1"}, {"tool", tool}, {"args", {{"task_id", task}}}};
}

}  // namespace

TEST_CASE("serve --retain-age forgets a settled task on time, removes its spill file and its id says it was forgotten",
          "[cli][serve][retention]") {
  // Issue 11 point 4 through the real server, and contract 9: the id of a
  // forgotten task is an error that says what happened, not "unknown".
  isolated_server s({"--retain-age", "1s", "--retain-tasks", "5"});
  auto& server = s.server;
  server.send(bash_call(1, "s1", "head -c 100000 /dev/zero", true));  // over the cap: a spill file
  CHECK(server.reply_to(1)["text"] == "started background task bash-1");
  server.next([](const json& j) { return j.contains("notice"); });
  const fs::path spills = s.runtime.path() / "bashexec";
  CHECK(test_support::eventually([&] { return spill_files(spills).size() == 1; }));
  // Nobody calls the server meanwhile: the age alone forgets it.
  CHECK(test_support::eventually([&] { return spill_files(spills).empty(); }));
  const std::string limits =
      "settled tasks are kept for at most 1 s, at most the 5 that settled last, and at most 16 MiB of their output in "
      "memory";
  server.send(tool_call(2, "bash_output", "bash-1"));
  CHECK(server.reply_to(2) == json{{"id", 2},
                                   {"text", "task bash-1 finished and was forgotten; its output is no longer available (" +
                                                limits + ")"},
                                   {"is_error", true}});
  server.send(tool_call(3, "bash_kill", "bash-1"));
  CHECK(server.reply_to(3) ==
        json{{"id", 3},
             {"text", "task bash-1 had already finished and was forgotten; nothing was killed (" + limits + ")"},
             {"is_error", false}});
  server.send(tool_call(4, "bash_output", "bash-2"));
  CHECK(server.reply_to(4)["text"] == "unknown task bash-2");  // never issued: not "forgotten"
}

TEST_CASE("serve --retain-tasks keeps the tasks that settled last and the flags reject a bad value naming the flag",
          "[cli][serve][retention]") {
  isolated_server s({"--retain-tasks", "2", "--retain-bytes", "1M", "--retain-age", "10min"});
  auto& server = s.server;
  for (int i = 1; i <= 3; ++i) {
    server.send(bash_call(i, "s1", fmt::format("echo task {}", i), true));
    CHECK(server.reply_to(i)["is_error"] == false);
    server.next([](const json& j) { return j.contains("notice"); });  // one at a time: bash-1 settles first
  }
  const std::string forgotten = "task bash-1 finished and was forgotten; its output is no longer available "
                                "(settled tasks are kept for at most 10 min, at most the 2 that settled last, and at "
                                "most 1 MiB of their output in memory)";
  std::string first;
  for (int id = 10; id < 500 && first != forgotten; ++id) {  // the notice goes out just before the pruning
    server.send(tool_call(id, "bash_output", "bash-1"));
    first = text_of(server.reply_to(id));
  }
  CHECK(first == forgotten);
  server.send(tool_call(4, "bash_output", "bash-3"));
  CHECK(server.reply_to(4)["text"] == "task 3\n[status: completed, exit code: 0]");

  for (const auto& [flag, bad] : std::vector<std::pair<std::string, std::string>>{
           {"--retain-tasks", "0"}, {"--retain-tasks", "many"}, {"--retain-bytes", "0"}, {"--retain-bytes", "16X"},
           {"--retain-bytes", "99999999999999999999G"}, {"--retain-age", "5"}, {"--retain-age", "0s"},
           {"--retain-age", "1.5s"}}) {
    INFO(flag << " " << bad);
    auto run = cli_run(fmt::format("serve {} {}", flag, bad));
    CHECK(run.exit_code == 2);
    CHECK(contains(run.err.text, flag + ": expected a positive"));
  }
  const auto help = cli_run("serve --help");
  for (const char* flag : {"--retain-tasks N", "--retain-bytes SIZE", "--retain-age TIME"})
    CHECK(contains(help.out.text, flag));
}

// Hidden from the Catch2 listing and run by its own CTest entry
// (serve_10000_background_tasks, label "scale"; tests/extra_tests.cmake):
// it takes about a minute on 2 cores, so it can be moved out of a CI run.
TEST_CASE("serve runs 10000 background tasks of 100 KB in waves with peak memory under 64 MiB, flat descriptors "
          "and no spill file past its retention",
          "[.][scale][cli][serve][retention]") {
  // Issue 11 point 4 through the real server. Waves as wide as the in-flight
  // limit; a retention that forgets by count (200) and by age (2 s) all the
  // time. --unconfined: the cheapest mode that still has the registry, the
  // spill files and the default containment.
  constexpr int total = 10000;
  constexpr int wave = 50;
  constexpr auto retention_age = 2s;
  // Generous: a forgotten file goes within a reactor wake-up of its expiry,
  // but this machine is shared and loaded.
  constexpr auto age_slack = 3s;
  isolated_server s({"--max-in-flight", std::to_string(wave), "--retain-tasks", "200", "--retain-age", "2s"});
  auto& server = s.server;
  const fs::path spills = s.runtime.path() / "bashexec";
  // 100 000 spaces from a builtin: one exec per task (bash), not two.
  const std::string command = "printf '%100000s' ''";
  const auto started_at = std::chrono::steady_clock::now();
  std::optional<std::size_t> descriptors_before;
  std::size_t most_descriptors = 0;
  std::size_t most_spill_files = 0;
  std::chrono::milliseconds oldest_spill{0};
  int reads_forgotten = 0;
  int next_id = 1;
  for (int first = 1; first <= total; first += wave) {
    for (int i = 0; i < wave; ++i, ++next_id) server.send(bash_call(next_id, "s1", command, true));
    int started = 0, settled = 0;
    while (started < wave || settled < wave) {
      const json line = server.next([](const json&) { return true; }, 60s);
      if (line.contains("notice")) {
        ++settled;
      } else {
        REQUIRE(line["is_error"] == false);
        ++started;
      }
    }
    // After the first wave the executor is warm: its reactor, spill
    // directory and pool of idle per-spawn cgroups (two descriptors each) exist.
    if (!descriptors_before) descriptors_before = open_descriptors(server.pid());
    if ((first / wave) % 20 == 0) {
      // A read of the wave's first task: its tail, and its spill file named.
      server.send(tool_call("read", "bash_output", fmt::format("bash-{}", first)));
      const std::string read = text_of(server.reply_to("read"));
      INFO(read);
      if (contains(read, "finished and was forgotten")) {
        ++reads_forgotten;  // a slow wave: its first task settled more than 2 s ago
      } else {
        CHECK(contains(read, "[status: completed, exit code: 0]"));
        CHECK(contains(read, "[some output was dropped from memory; full output: "));  // 100 KB, a 64000-byte tail
      }
      const auto files = spill_files(spills);
      most_spill_files = std::max(most_spill_files, files.size());
      for (const auto& [path, age] : files) oldest_spill = std::max(oldest_spill, age);
      most_descriptors = std::max(most_descriptors, open_descriptors(server.pid()));
    }
  }
  const auto took = std::chrono::steady_clock::now() - started_at;
  const std::size_t peak_kib = peak_rss_kib(server.pid());
  // Idle past the age limit: every task is forgotten, every spill file gone.
  CHECK(test_support::eventually([&] { return spill_files(spills).empty(); }, retention_age + 10s));
  // Settled tasks hand their cgroups back to the idle pool a moment after settling.
  std::size_t descriptors_after = 0;
  CHECK(test_support::eventually([&] {
    descriptors_after = open_descriptors(server.pid());
    return descriptors_after <= *descriptors_before;
  }));
  server.send(tool_call("last", "bash_output", fmt::format("bash-{}", total)));
  CHECK(contains(text_of(server.reply_to("last")), fmt::format("task bash-{} finished and was forgotten", total)));
  WARN(fmt::format("{} tasks in {:.1f} s: peak RSS {} KiB, descriptors {} before, {} at most, {} after, spill files "
                   "at most {}, the oldest {} ms; {} of {} reads found the task forgotten",
                   total, std::chrono::duration<double>(took).count(), peak_kib, *descriptors_before, most_descriptors,
                   descriptors_after, most_spill_files, oldest_spill.count(), reads_forgotten, total / wave / 20));
  // The detection itself, on this process, whose build we know.
  CHECK(test_support::process_has_address_sanitizer(::getpid()) == test_support::under_address_sanitizer);
  if (test_support::process_has_address_sanitizer(server.pid()))
    WARN("the 64 MiB bound is not checked under AddressSanitizer (its quarantine keeps freed memory resident)");
  else
    CHECK(peak_kib < 64 * 1024);
  CHECK(descriptors_after == *descriptors_before);
  CHECK(oldest_spill < retention_age + age_slack);
  CHECK(most_spill_files <= 200 + wave);  // the retained tasks' files, and the wave in progress
  server.close_input();
  CHECK(server.wait_exit(60s) == 0);
}

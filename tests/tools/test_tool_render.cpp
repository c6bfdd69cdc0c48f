// The result-text grammar of the model-facing tools (docs/contract.md item 20),
// byte-exact, and the UTF-8 guarantee of every rendered text.
#include <csignal>
#include <string>

#include <catch2/catch.hpp>

#include <bashexec/tools/approval_text.hpp>
#include <bashexec/tools/render.hpp>
#include <bashexec/tools/utf8.hpp>

using namespace bashexec;
using namespace std::chrono_literals;

namespace {

collected_output stream(std::string text, bool truncated = false,
                        std::optional<std::filesystem::path> spill = std::nullopt) {
  return collected_output{std::move(text), truncated, std::move(spill)};
}

run_result exited(int code, std::string out = {}, std::string err = {}) {
  run_result result;
  result.exit_code = code;
  result.out = stream(std::move(out));
  result.err = stream(std::move(err));
  result.timeout = 120000ms;
  return result;
}

sandbox_info denied_under(sandbox_mode mode) {
  return sandbox_info{mode, true, enforcement::full, false, {}};
}

}  // namespace

TEST_CASE("contract 20: a successful run is its stdout and nothing else", "[render][contract-20]") {
  CHECK(render_run_result(exited(0, "hello\n"), false) == "hello\n");
  CHECK(render_run_result(exited(0, "no newline"), false) == "no newline");
}

TEST_CASE("contract 20: an empty body reads (no output)", "[render][contract-20]") {
  CHECK(render_run_result(exited(0), false) == "(no output)");
  CHECK(render_run_result(exited(3), false) == "(no output)\n[exit code: 3]");
}

TEST_CASE("contract 20: a non-zero exit ends the text with the exit marker on its own line",
          "[render][contract-20]") {
  CHECK(render_run_result(exited(1, "partial"), false) == "partial\n[exit code: 1]");
  CHECK(render_run_result(exited(1, "line\n"), false) == "line\n[exit code: 1]");
}

TEST_CASE("contract 20: stderr follows its stderr header line, after a newline only when stdout lacks one",
          "[render][contract-20]") {
  CHECK(render_run_result(exited(0, "out", "err\n"), false) == "out\n[stderr]\nerr\n");
  CHECK(render_run_result(exited(0, "out\n", "err"), false) == "out\n[stderr]\nerr");
  CHECK(render_run_result(exited(0, "", "err"), false) == "[stderr]\nerr");
}

TEST_CASE("contract 20: each truncation note follows the stream it belongs to", "[render][contract-20]") {
  run_result result = exited(0);
  result.out = stream("tail of out", true, "/spill/out");
  result.err = stream("tail of err", true, "/spill/err");
  CHECK(render_run_result(result, false) ==
        "tail of out\n[output truncated; full output: /spill/out]\n"
        "[stderr]\ntail of err\n[output truncated; full output: /spill/err]");
}

TEST_CASE("contract 20: a withheld spill path reads (unavailable)", "[render][contract-20]") {
  run_result result = exited(0);
  result.out = stream("tail", true);
  CHECK(render_run_result(result, false) == "tail\n[output truncated; full output: (unavailable)]");
}

TEST_CASE("contract 20: stderr, a timeout and truncation all show, in order, with the signal last",
          "[render][contract-20]") {
  run_result result;
  result.signal = SIGTERM;
  result.timed_out = true;
  result.timeout = 1500ms;
  result.out = stream("last lines\n", true, "/spill/out");
  result.err = stream("warning: slow\n");
  CHECK(render_run_result(result, false) ==
        "last lines\n\n[output truncated; full output: /spill/out]\n"
        "[stderr]\nwarning: slow\n"
        "[timed out after 1500ms]\n"
        "[killed by signal: SIGTERM]");
}

TEST_CASE("contract 20: the timeout marker shows even when the command then exited 0",
          "[render][contract-20]") {
  run_result result = exited(0, "done\n");
  result.timed_out = true;
  result.timeout = 50ms;
  CHECK(render_run_result(result, false) == "done\n[timed out after 50ms]");
}

TEST_CASE("contract 20: a denial is marked, with the escalation hint only when escalation is advertised",
          "[render][contract-20]") {
  run_result result = exited(1, "", "touch: cannot touch 'x': Read-only file system\n");
  result.sandbox = denied_under(sandbox_mode::read_only);
  const std::string body = "[stderr]\ntouch: cannot touch 'x': Read-only file system\n";

  CHECK(render_run_result(result, false) ==
        body + "[sandbox: file access denied under read-only mode]\n[exit code: 1]");
  CHECK(render_run_result(result, true) ==
        body +
            "[sandbox: file access denied under read-only mode]\n"
            "[to run this with wider file access, repeat the same command with sandbox_permissions "
            "(\"workspace-write\" or \"danger-full-access\") and a justification; do not work around the sandbox]\n"
            "[exit code: 1]");

  result.sandbox = denied_under(sandbox_mode::workspace_write);
  CHECK(render_run_result(result, true) ==
        body +
            "[sandbox: file access denied under workspace-write mode]\n"
            "[to run this with wider file access, repeat the same command with sandbox_permissions "
            "(\"danger-full-access\") and a justification; do not work around the sandbox]\n"
            "[exit code: 1]");
}

TEST_CASE("contract 20: names blocked as not allowed get the network_permissions hint, only when it is offered",
          "[render][contract-20][network]") {
  auto blocked = [](std::string host, network_block_reason reason) {
    network_attempt attempt;
    attempt.host = std::move(host);
    attempt.port = 443;
    attempt.decision = network_decision::blocked;
    attempt.reason = reason;
    return attempt;
  };
  run_result result;
  result.exit_code = 0;
  result.network = network_report{};
  result.network->attempts = {blocked("PyPI.org", network_block_reason::not_allowed),
                              blocked("pypi.org", network_block_reason::not_allowed),
                              blocked("8.8.8.8", network_block_reason::not_allowed),
                              blocked("evil.test", network_block_reason::denied_domain),
                              blocked("files.test", network_block_reason::not_allowed)};
  const std::string marker = render_run_result(result, true, false);
  CHECK(marker.find("[to reach") == std::string::npos);  // network_permissions not offered
  const std::string text = render_run_result(result, true, true);
  // One entry per name, canonical; an IP literal or a denied name is no name to grant.
  CHECK_THAT(text, Catch::EndsWith("\n[to reach pypi.org, files.test, repeat the same command with network_permissions "
                                   "[\"pypi.org\", \"files.test\"] and a justification; do not work around the "
                                   "network policy]"));
  result.network->attempts = {blocked("evil.test", network_block_reason::denied_domain),
                              blocked("a.test", network_block_reason::private_address)};
  CHECK(render_run_result(result, true, true).find("[to reach") == std::string::npos);
}

TEST_CASE("contract 20: sandbox facts without a denial add nothing", "[render][contract-20]") {
  run_result result = exited(0, "ok\n");
  result.sandbox = sandbox_info{sandbox_mode::read_only, false, enforcement::partial, false, {}};
  CHECK(render_run_result(result, true) == "ok\n");
  result.sandbox = sandbox_info{sandbox_mode::danger_full_access, false, std::nullopt, false, {}};
  CHECK(render_run_result(result, true) == "ok\n");
}

TEST_CASE("contract 20: every marker keeps its place: denial, hint, timeout, abort, leftovers, exit",
          "[render][contract-20]") {
  run_result result = exited(2, "x");
  result.sandbox = denied_under(sandbox_mode::workspace_write);
  result.timed_out = true;
  result.timeout = 10ms;
  result.leftovers_killed = true;
  CHECK(render_run_result(result, false) ==
        "x\n[sandbox: file access denied under workspace-write mode]\n[timed out after 10ms]\n"
        "[leftover background processes were killed after the command exited; use run_in_background for "
        "long-lived processes]\n[exit code: 2]");

  run_result aborted = exited(0);
  aborted.exit_code.reset();
  aborted.signal = SIGKILL;
  aborted.aborted = true;
  CHECK(render_run_result(aborted, false) == "(no output)\n[aborted]\n[killed by signal: SIGKILL]");
}

TEST_CASE("contract 20: a background start answers with the task id", "[render][contract-20]") {
  CHECK(render_started(task_id("bash-7")) == "started background task bash-7");
}

TEST_CASE("contract 20: the status line of each task state", "[render][contract-20]") {
  task_snapshot task{task_id("bash-1"), "sleep 1", task_status::running, {}, {}, {}};
  CHECK(status_line(task) == "[status: running]");
  task.status = task_status::completed;
  task.exit_code = 0;
  CHECK(status_line(task) == "[status: completed, exit code: 0]");
  task.exit_code = 4;
  CHECK(status_line(task) == "[status: completed, exit code: 4]");
  task.status = task_status::killed;
  task.exit_code.reset();
  task.signal = SIGTERM;
  CHECK(status_line(task) == "[status: killed by SIGTERM]");
}

TEST_CASE("contract 20: bash_output shows the delta, or (no new output), then the status", "[render][contract-20]") {
  task_read read;
  read.task = task_snapshot{task_id("bash-1"), "make", task_status::running, {}, {}, {}};
  read.delta = "compiling\n";
  CHECK(render_task_read(read, false) == "compiling\n[status: running]");
  read.delta = "out\n[stderr]\nwarn";
  CHECK(render_task_read(read, false) == "out\n[stderr]\nwarn\n[status: running]");
  read.delta.clear();
  CHECK(render_task_read(read, false) == "(no new output)\n[status: running]");
}

TEST_CASE("contract 20: a lossy read names the spill files before the status, the paths joined with a comma and "
          "nothing else",
          "[render][contract-20]") {
  task_read read;
  read.task = task_snapshot{task_id("bash-2"), "yes", task_status::running, {}, {}, {}};
  read.delta = "y\n";
  read.lossy = true;
  read.stdout_spill_path = "/spill/o-stdout";
  CHECK(render_task_read(read, false) ==
        "y\n[some output was dropped from memory; full output: /spill/o-stdout]\n[status: running]");
  read.stderr_spill_path = "/spill/e-stderr";
  CHECK(render_task_read(read, false) ==
        "y\n[some output was dropped from memory; full output: /spill/o-stdout, /spill/e-stderr]\n"
        "[status: running]");
  read.stdout_spill_path.reset();
  CHECK(render_task_read(read, false) ==
        "y\n[some output was dropped from memory; full output: /spill/e-stderr]\n[status: running]");
  read.stderr_spill_path.reset();
  CHECK(render_task_read(read, false) ==
        "y\n[some output was dropped from memory; full output: (unavailable)]\n[status: running]");
}

TEST_CASE("contract 20: a settled task's denial or runner failure follows its status", "[render][contract-20]") {
  task_read read;
  read.task = task_snapshot{task_id("bash-3"), "touch x", task_status::completed, 1, {}, {}};
  read.task.sandbox = denied_under(sandbox_mode::read_only);
  CHECK(render_task_read(read, false) ==
        "(no new output)\n[status: completed, exit code: 1]\n[sandbox: file access denied under read-only mode]");
  CHECK(render_task_read(read, true).ends_with("and a justification; do not work around the sandbox]"));

  read.task.sandbox = sandbox_info{sandbox_mode::workspace_write, false, std::nullopt, true, {}};
  CHECK(render_task_read(read, true) ==
        "(no new output)\n[status: completed, exit code: 1]\n"
        "[sandbox: the sandbox failed to start under workspace-write mode; the command did not run]");

  // A running task's facts are not final yet.
  read.task.status = task_status::running;
  read.task.sandbox = denied_under(sandbox_mode::read_only);
  CHECK(render_task_read(read, true) == "(no new output)\n[status: running]");
}

TEST_CASE("a background notice names the task, the command and how it ended", "[render][notice]") {
  task_snapshot task{task_id("bash-4"), "npm test\nsecond line", task_status::killed, {}, SIGKILL, {}};
  CHECK(render_task_notice(task, false) ==
        "background task bash-4 finished; read its output with bash_output\n"
        "command: npm test \xE2\x80\xA6\n"
        "[status: killed by SIGKILL]");
  task = task_snapshot{task_id("bash-5"), "touch /x", task_status::completed, 1, {}, denied_under(sandbox_mode::read_only)};
  CHECK(render_task_notice(task, false) ==
        "background task bash-5 finished; read its output with bash_output\n"
        "command: touch /x\n"
        "[status: completed, exit code: 1]\n"
        "[sandbox: file access denied under read-only mode]");
}

TEST_CASE("invalid UTF-8 in output renders as valid UTF-8", "[render][utf8]") {
  CHECK(to_valid_utf8("plain ascii") == "plain ascii");
  CHECK(to_valid_utf8("caf\xC3\xA9") == "caf\xC3\xA9");
  CHECK(to_valid_utf8("a\xFF" "b") == "a\xEF\xBF\xBD" "b");
  // A truncated three-byte sequence is one maximal subpart: one U+FFFD.
  CHECK(to_valid_utf8("x\xE2\x82") == "x\xEF\xBF\xBD");
  // Overlong encodings and surrogates are invalid.
  CHECK(is_valid_utf8(to_valid_utf8("\xC0\xAF")));
  CHECK(to_valid_utf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(to_valid_utf8("\xF0\x9F\x98\x80") == "\xF0\x9F\x98\x80");

  run_result result = exited(0, "bad \xFE\xFF bytes\n", "err \xC3\n");
  const std::string text = render_run_result(result, false);
  CHECK(is_valid_utf8(text));
  CHECK(text == "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes\n[stderr]\nerr \xEF\xBF\xBD\n");
}

TEST_CASE("a tail that starts inside a multi-byte character is trimmed to the next boundary", "[render][utf8]") {
  // "é€" cut one byte into the é, and two bytes into the €.
  CHECK(to_valid_utf8("\xA9\xE2\x82\xAC!", true) == "\xE2\x82\xAC!");
  CHECK(to_valid_utf8("\x82\xAC!", true) == "!");
  // Without the mid-stream hint the stray bytes are replaced, not dropped.
  CHECK(to_valid_utf8("\x82\xAC!", false) == "\xEF\xBF\xBD\xEF\xBF\xBD!");

  run_result result = exited(0);
  result.out = stream("\x98\x80 tail", true, "/spill/o");
  CHECK(render_run_result(result, false) == " tail\n[output truncated; full output: /spill/o]");
  // An untruncated stream starts at the real start: its stray bytes are replaced.
  result.out = stream("\x98\x80 head");
  CHECK(render_run_result(result, false) == "\xEF\xBF\xBD\xEF\xBF\xBD head");
}

TEST_CASE("one UTF-8 scanner: a held-back read suffix is exactly what the renderer would call a cut character",
          "[render][utf8]") {
  // detail/text/utf8_boundary.hpp serves the engine's incremental reads and the
  // renderer: a suffix is held back only when it can still become a valid
  // character, and an invalid lead is passed on at once (to be repaired).
  using detail::incomplete_utf8_suffix;
  CHECK(incomplete_utf8_suffix("caf\xC3") == 1);
  CHECK(incomplete_utf8_suffix("x\xF0\x9F\x98") == 3);
  CHECK(incomplete_utf8_suffix("\xC0") == 0);          // never a lead byte
  CHECK(incomplete_utf8_suffix("\xF5\x80") == 0);      // above U+10FFFF
  CHECK(incomplete_utf8_suffix("\xE0\x80") == 0);      // overlong: no completion makes it valid
  CHECK(incomplete_utf8_suffix("\xED\xA0") == 0);      // a surrogate's start
  CHECK(incomplete_utf8_suffix("\xE2\x41") == 0);      // interrupted by ASCII
  std::uint32_t state = 99;
  for (int round = 0; round < 2000; ++round) {
    std::string bytes;
    for (int i = 0; i < 6; ++i) {
      state = state * 1103515245u + 12345u;
      bytes.push_back(static_cast<char>((state >> 16) & 0xFF));
    }
    const std::size_t held = incomplete_utf8_suffix(bytes);
    INFO("round " << round);
    REQUIRE(held <= 3);
    if (held == 0) continue;
    // The held bytes are a character's start: some completion makes them valid.
    const std::string_view tail = std::string_view(bytes).substr(bytes.size() - held);
    bool completes = false;
    for (unsigned a = 0x80; a <= 0xBF && !completes; ++a)
      for (unsigned b = 0x80; b <= 0xBF && !completes; ++b) {
        std::string candidate(tail);
        candidate.push_back(static_cast<char>(a));
        candidate.push_back(static_cast<char>(b));
        candidate.push_back(static_cast<char>(b));
        std::size_t invalid = 0;
        completes = detail::utf8_char_length(candidate, 0, &invalid) != 0;
      }
    CHECK(completes);
  }
}

TEST_CASE("every rendered text is valid UTF-8 whatever the bytes", "[render][utf8]") {
  std::uint32_t state = 12345;
  const auto next = [&] {
    state = state * 1103515245u + 12345u;
    return static_cast<char>((state >> 16) & 0xFF);
  };
  for (int round = 0; round < 500; ++round) {
    std::string out, err, delta;
    for (int i = 0; i < round % 37; ++i) out.push_back(next());
    for (int i = 0; i < round % 11; ++i) err.push_back(next());
    for (int i = 0; i < round % 23; ++i) delta.push_back(next());
    run_result result = exited(round % 3, out, err);
    result.out.truncated = round % 2 == 0;
    CHECK(is_valid_utf8(render_run_result(result, true)));
    task_read read;
    read.task = task_snapshot{task_id("bash-1"), out, task_status::completed, 0, {}, {}};
    read.delta = delta;
    CHECK(is_valid_utf8(render_task_read(read, true)));
    CHECK(is_valid_utf8(render_task_notice(read.task, true)));
  }
}

// ---- the approval question (issue 25 item 2) ---------------------------------

namespace {

approval_request escalation_of(std::string command, std::string description = "d", std::string justification = "j") {
  approval_request request;
  request.command = std::move(command);
  request.description = std::move(description);
  request.current_mode = sandbox_mode::read_only;
  request.requested_mode = sandbox_mode::danger_full_access;
  request.justification = std::move(justification);
  return request;
}

}  // namespace

TEST_CASE("an approval question shows every line of the command, numbered", "[render][approval]") {
  CHECK(approval_text(escalation_of("ls\ntouch /var/tmp/HIDDEN", "list", "j")) ==
        "bashexec asks to run one command under danger-full-access mode (the session runs under read-only mode).\n"
        "Command (2 lines, shown in full; \\ starts an escape):\n"
        "1 | ls\n"
        "2 | touch /var/tmp/HIDDEN\n"
        "Description: list\n"
        "Justification: j");
  CHECK(visible_command("a\n") == "Command (2 lines, shown in full; \\ starts an escape):\n1 | a\n2 | ");
  std::string ten;
  for (int i = 1; i <= 10; ++i) ten += fmt::format("{}echo {}", i == 1 ? "" : "\n", i);
  const std::string shown = visible_command(ten);
  CHECK(shown.find("\n 1 | echo 1\n") != std::string::npos);
  CHECK(shown.find("\n10 | echo 10") != std::string::npos);
}

TEST_CASE("an approval question escapes every character a person could not see or could misread",
          "[render][approval]") {
  using namespace std::string_literals;
  CHECK(visible_text("a\\b") == "a\\\\b");                                 // the escape character itself
  CHECK(visible_text("\t\r\x01\x1B[2K\x7F") == "\\t\\r\\x01\\x1B[2K\\x7F");  // C0 controls and DEL
  CHECK(visible_text("x\0y"s) == "x\\x00y");                                  // NUL
  CHECK(visible_text("a\nb") == "a\\nb");
  CHECK(visible_text("a\nb", true) == "a\nb");
  CHECK(visible_text("rm \xE2\x80\xAE") == "rm \\u{202E}");                    // right-to-left override
  for (const char* bidi : {"\xE2\x80\xAA", "\xE2\x80\xAB", "\xE2\x80\xAC", "\xE2\x80\xAD", "\xE2\x81\xA6",
                           "\xE2\x81\xA7", "\xE2\x81\xA8", "\xE2\x81\xA9", "\xE2\x80\x8E", "\xE2\x80\x8F",
                           "\xD8\x9C"})
    CHECK(visible_text(bidi).rfind("\\u{", 0) == 0);
  for (const char* invisible :
       {"\xE2\x80\x8B", "\xE2\x80\x8C", "\xE2\x80\x8D", "\xE2\x81\xA0", "\xE2\x81\xA4", "\xEF\xBB\xBF",
        "\xC2\xAD", "\xE1\xA0\x8E", "\xEF\xB8\x8F", "\xF3\xA0\x80\x81", "\xF3\xA0\x81\xBF", "\xC2\xA0",
        "\xE2\x80\xA8", "\xC2\x85", "\xEE\x80\x80"})
    CHECK(visible_text(invisible).rfind("\\u{", 0) == 0);
  CHECK(visible_text("\xE2\x80\x8B") == "\\u{200B}");
  CHECK(visible_text("\xF3\xA0\x81\xBF") == "\\u{E007F}");
  CHECK(visible_text("bad \xFF\xC3") == "bad \\xFF\\xC3");  // invalid UTF-8, byte by byte
  CHECK(visible_text("caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80") == "caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80");  // visible text stays
  CHECK(is_valid_utf8(visible_text("\xFF\x80\xED\xA0\x80")));
}

TEST_CASE("an approval question is never cut: one too long to show is not shown at all", "[render][approval]") {
  CHECK_FALSE(approval_text(escalation_of("true #" + std::string(std::size_t{1} << 20, 'x'))));
  CHECK_FALSE(approval_text(escalation_of("true", std::string(max_approval_text_bytes, 'd'))));
  // Escapes count: 20000 zero-width spaces are 60000 bytes, shown as 160000.
  std::string hidden;
  for (int i = 0; i < 20000; ++i) hidden += "\xE2\x80\x8B";
  CHECK_FALSE(approval_text(escalation_of(hidden)));
  const auto fits = approval_text(escalation_of(std::string(60000, 'x')));
  REQUIRE(fits);
  CHECK(fits->find(std::string(60000, 'x')) != std::string::npos);
}

// The session log: durable JSON lines, replay after a restart, torn final
// lines, one log per session, and the sandbox-mode fold (docs/contract.md item 18).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "executor_test_support.hpp"

#include <bashexec/session/session_log.hpp>

using namespace bashexec;
namespace fs = std::filesystem;

namespace {

/// A fresh directory under the tests' scratch root, removed at scope exit.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string pattern = (test_support::scratch_root() / "bashexec-session-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const fs::path& file, const std::string& content) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << content;
}

std::optional<sandbox_mode> override_of(const session_log& log) { return effective_sandbox_mode(log); }

}  // namespace

TEST_CASE("contract 18: the override fold is empty without events and the last sandbox-mode event wins",
          "[session][contract-18]") {
  std::vector<session_event> events;
  CHECK_FALSE(effective_sandbox_mode(events).has_value());
  events.push_back(opaque_event{"note", {{"type", "note"}}});
  CHECK_FALSE(effective_sandbox_mode(events).has_value());
  // emplace_back in place: GCC 12 warns (falsely) about a variant built from a temporary.
  events.emplace_back(std::in_place_type<sandbox_mode_event>, sandbox_mode::workspace_write);
  events.push_back(opaque_event{"note", {{"type", "note"}}});
  CHECK(effective_sandbox_mode(events) == sandbox_mode::workspace_write);
  events.emplace_back(std::in_place_type<sandbox_mode_event>, sandbox_mode::read_only);
  CHECK(effective_sandbox_mode(events) == sandbox_mode::read_only);
}

TEST_CASE("contract 18: set_sandbox_mode is the only write path for the override", "[session][contract-18]") {
  session_log log;
  CHECK_THROWS_AS(log.append("sandbox-mode", {{"mode", "danger-full-access"}}), std::invalid_argument);
  CHECK_FALSE(override_of(log).has_value());
  set_sandbox_mode(log, sandbox_mode::danger_full_access);
  CHECK(override_of(log) == sandbox_mode::danger_full_access);
}

TEST_CASE("an override written to a log file survives a restart", "[session][contract-18]") {
  temp_dir dir;
  const auto file = session_log_path(dir.path, "session-1");
  {
    session_log log(file);
    CHECK(log.events().empty());
    set_sandbox_mode(log, sandbox_mode::workspace_write);
    log.append("note", {{"text", "hello"}});
  }
  CHECK(slurp(file) ==
        "{\"mode\":\"workspace-write\",\"type\":\"sandbox-mode\"}\n"
        "{\"text\":\"hello\",\"type\":\"note\"}\n");

  session_log restarted(file);
  REQUIRE(restarted.events().size() == 2);
  CHECK(override_of(restarted) == sandbox_mode::workspace_write);
  CHECK(std::get<opaque_event>(restarted.events()[1]).body["text"] == "hello");

  // Appends after the replay land after the replayed events.
  set_sandbox_mode(restarted, sandbox_mode::read_only);
  session_log again(file);
  CHECK(again.events().size() == 3);
  CHECK(override_of(again) == sandbox_mode::read_only);
}

TEST_CASE("a log file is private to its owner", "[session]") {
  temp_dir dir;
  const auto file = dir.path / "private.jsonl";
  session_log log(file);
  CHECK((fs::status(file).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
}

TEST_CASE("two sessions never see each other's events", "[session][contract-18]") {
  temp_dir dir;
  session_log a(session_log_path(dir.path, "a"));
  session_log b(session_log_path(dir.path, "b"));
  set_sandbox_mode(a, sandbox_mode::danger_full_access);
  CHECK(override_of(a) == sandbox_mode::danger_full_access);
  CHECK_FALSE(override_of(b).has_value());
  CHECK(b.events().empty());
}

TEST_CASE("session ids map to distinct, plain file names", "[session]") {
  const fs::path dir = "/logs";
  CHECK(session_log_path(dir, "abc-1_x") == "/logs/abc-1_x.jsonl");
  CHECK(session_log_path(dir, "../etc/passwd") == "/logs/%2E%2E%2Fetc%2Fpasswd.jsonl");
  CHECK(session_log_path(dir, "a/b") != session_log_path(dir, "a%2Fb"));
  CHECK(session_log_path(dir, ".") != session_log_path(dir, "%2E"));
  CHECK_THROWS_AS(session_log_path(dir, ""), std::invalid_argument);
}

TEST_CASE("a torn final line is ignored with a warning and the earlier events replay", "[session][contract-18]") {
  temp_dir dir;
  const auto file = dir.path / "torn.jsonl";
  spit(file,
       "{\"type\":\"sandbox-mode\",\"mode\":\"workspace-write\"}\n"
       "{\"type\":\"note\",\"n\":1}\n"
       "{\"type\":\"sandbox-mode\",\"mo");
  std::vector<std::string> warnings;
  session_log log(file, {[&](std::string_view w) { warnings.emplace_back(w); }});
  CHECK(log.events().size() == 2);
  CHECK(override_of(log) == sandbox_mode::workspace_write);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains(file.string()) && Catch::Contains("line 3") && Catch::Contains("torn"));

  // The torn bytes are gone, so the next append starts a clean line.
  set_sandbox_mode(log, sandbox_mode::danger_full_access);
  session_log restarted(file, {[&](std::string_view w) { warnings.emplace_back(w); }});
  CHECK(restarted.events().size() == 3);
  CHECK(override_of(restarted) == sandbox_mode::danger_full_access);
  CHECK(warnings.size() == 1);
}

TEST_CASE("a complete final line missing only its newline is kept and repaired", "[session]") {
  temp_dir dir;
  const auto file = dir.path / "unterminated.jsonl";
  spit(file, "{\"type\":\"sandbox-mode\",\"mode\":\"danger-full-access\"}");
  {
    session_log log(file);
    CHECK(override_of(log) == sandbox_mode::danger_full_access);
    set_sandbox_mode(log, sandbox_mode::read_only);
  }
  session_log restarted(file);
  CHECK(restarted.events().size() == 2);
  CHECK(override_of(restarted) == sandbox_mode::read_only);
}

TEST_CASE("an unknown mode in a log line is an error naming the file and the line", "[session][contract-18]") {
  temp_dir dir;
  const auto file = dir.path / "bad-mode.jsonl";
  spit(file,
       "{\"type\":\"sandbox-mode\",\"mode\":\"read-only\"}\n"
       "\n"
       "{\"type\":\"sandbox-mode\",\"mode\":\"read-mostly\"}\n");
  try {
    session_log log(file);
    FAIL("replay accepted an unknown mode");
  } catch (const session_log_error& e) {
    CHECK(std::string(e.what()) == fmt::format("session log {} line 3: unknown sandbox mode \"read-mostly\" "
                                               "(expected read-only, workspace-write or danger-full-access)",
                                               file.string()));
  }
}

TEST_CASE("corruption before the final line is an error, never silently skipped", "[session]") {
  temp_dir dir;
  const auto file = dir.path / "corrupt.jsonl";
  spit(file, "{\"type\":\"note\"}\n{garbage\n{\"type\":\"note\"}\n");
  CHECK_THROWS_WITH(session_log(file), Catch::Contains("line 2") && Catch::Contains(file.string()));
  spit(file, "{\"no_type\":1}\n");
  CHECK_THROWS_WITH(session_log(file), Catch::Contains("line 1") && Catch::Contains("\"type\""));
  spit(file, "[1,2]\n{\"type\":\"note\"}\n");
  CHECK_THROWS_WITH(session_log(file), Catch::Contains("line 1: expected a JSON object"));
}

TEST_CASE("an unusable log file is an error naming it", "[session]") {
  temp_dir dir;
  const auto blocker = dir.path / "file";
  spit(blocker, "x");
  CHECK_THROWS_AS(session_log(blocker / "log.jsonl"), session_log_error);
}

TEST_CASE("an in-memory log holds events without a file", "[session]") {
  session_log log;
  CHECK_FALSE(log.file().has_value());
  log.append("note", {{"bytes", std::string("\xFF")}});
  set_sandbox_mode(log, sandbox_mode::workspace_write);
  CHECK(log.events().size() == 2);
  CHECK(override_of(log) == sandbox_mode::workspace_write);
}

TEST_CASE("a line nested deeper than the bound is refused as corrupt, not a stack overflow",
          "[session][contract-18]") {
  // Found by fuzz/fuzz_session_log: 20,000 levels overflowed the stack in
  // nlohmann-json's recursive copy. Nested, last, or torn, it is an error.
  temp_dir dir;
  const auto file = dir.path / "deep.jsonl";
  const std::size_t levels = 100000;
  const std::string deep = "{\"type\":\"note\",\"v\":" + std::string(levels, '[') + std::string(levels, ']') + "}";
  const std::string first = "{\"type\":\"sandbox-mode\",\"mode\":\"read-only\"}\n";
  for (const std::string& content : {first + deep + "\n" + first, first + deep + "\n", first + deep.substr(0, levels)}) {
    spit(file, content);
    CHECK_THROWS_WITH(session_log(file),
                      Catch::Contains("line 2: nested deeper than " + std::to_string(session_log_max_depth) + " levels"));
    CHECK(slurp(file) == content);  // a refused log is left as it was
  }

  // At the bound it replays (the event object is level 1).
  const std::string at_bound = "{\"type\":\"note\",\"v\":" + std::string(session_log_max_depth - 1, '[') +
                               std::string(session_log_max_depth - 1, ']') + "}\n";
  spit(file, at_bound);
  CHECK(session_log(file).events().size() == 1);
}

TEST_CASE("append refuses a body nested deeper than the bound, naming the limit", "[session]") {
  const auto nested = [](std::size_t levels) {
    nlohmann::json value = nlohmann::json::array();
    for (std::size_t i = 1; i < levels; ++i) {
      nlohmann::json outer = nlohmann::json::array();
      outer.push_back(std::move(value));
      value = std::move(outer);
    }
    return nlohmann::json{{"v", std::move(value)}};  // the body object adds a level
  };
  session_log log;
  CHECK_THROWS_WITH(log.append("note", nested(session_log_max_depth)),
                    "event body must not nest deeper than " + std::to_string(session_log_max_depth) + " levels");
  CHECK(log.events().empty());
  log.append("note", nested(session_log_max_depth - 1));
  CHECK(log.events().size() == 1);
}

TEST_CASE("the replay fold is pure: it reports a torn tail and a missing newline without touching a file",
          "[session][contract-18]") {
  const std::string good = R"({"type":"sandbox-mode","mode":"workspace-write"})";
  SECTION("a torn final line is reported with where it starts, and the earlier events are kept") {
    const std::string content = good + "\n" + R"({"type":"sand)";
    const auto replay = replay_session_log(content, "t");
    REQUIRE(replay.events.size() == 1);
    REQUIRE(replay.torn_tail.has_value());
    CHECK(replay.torn_tail->offset == good.size() + 1);
    CHECK(replay.torn_tail->line_number == 2);
    CHECK(replay.torn_tail->bytes == 13);
    CHECK_FALSE(replay.missing_final_newline);
  }
  SECTION("a complete final line without its newline is kept and reported") {
    const auto replay = replay_session_log(good, "t");
    CHECK(replay.events.size() == 1);
    CHECK_FALSE(replay.torn_tail.has_value());
    CHECK(replay.missing_final_newline);
  }
  SECTION("blank lines count for line numbers in errors") {
    const std::string content = "\n  \n{not json\n" + good + "\n";
    CHECK_THROWS_WITH(replay_session_log(content, "the-log"),
                      Catch::Contains("session log the-log line 3: not valid JSON"));
  }
  SECTION("the fold of the replayed events names the override") {
    const auto replay = replay_session_log(good + "\n", "t");
    CHECK(effective_sandbox_mode(std::span<const session_event>(replay.events)) == sandbox_mode::workspace_write);
  }
}

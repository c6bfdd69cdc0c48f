// Fuzz target: the session log's replay and fold (bashexec/session/session_log.hpp)
// over whatever bytes a log file holds — torn final lines, hostile JSON,
// blank lines, missing newlines, unknown events.
//
// Properties: replay either throws session_log_error and leaves the file
// untouched, or succeeds having changed the file in one of the three
// documented ways only (nothing; the final newline restored; the torn last
// line dropped, with exactly one warning). The fold agrees with an
// independent reading of the lines. A replayed file replays again to the
// same events with no warning and no change (recovery is idempotent), every
// event survives its JSON round trip, and an append after replay is seen by
// the fold and by the next replay.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <bashexec/session/session_log.hpp>

#include "fuzz_support.hpp"

using namespace bashexec;

namespace {

std::string slurp(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::filesystem::path& file, std::string_view content) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
}

bool blank(std::string_view line) { return line.find_first_not_of(" \t\r") == std::string_view::npos; }

/// The documented fold, computed without the library: the last line that is
/// an object with "type":"sandbox-mode" names the mode.
std::optional<sandbox_mode> reference_fold(std::string_view content) {
  std::optional<sandbox_mode> mode;
  std::size_t start = 0;
  while (start < content.size()) {
    auto end = content.find('\n', start);
    if (end == std::string_view::npos) end = content.size();
    const auto line = content.substr(start, end - start);
    start = end + 1;
    if (blank(line)) continue;
    const auto json = nlohmann::json::parse(line, nullptr, false);
    FUZZ_CHECK(!json.is_discarded());  // a replayed file holds only parsable lines
    if (json.is_object() && json.contains("type") && json.at("type") == "sandbox-mode")
      mode = parse_sandbox_mode(json.at("mode").get<std::string>());
  }
  return mode;
}

/// Where the last non-blank line of `content` starts.
std::size_t last_line_start(std::string_view content) {
  std::size_t last = std::string_view::npos;
  for (std::size_t start = 0; start < content.size();) {
    auto end = content.find('\n', start);
    if (end == std::string_view::npos) end = content.size();
    if (!blank(content.substr(start, end - start))) last = start;
    start = end + 1;
  }
  return last;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto file = fuzz_support::scratch() / "session.jsonl";
  spit(file, input);

  int warnings = 0;
  session_log_options options;
  options.warn = [&](std::string_view) { ++warnings; };
  std::optional<session_log> log;
  try {
    log.emplace(file, options);
  } catch (const session_log_error&) {
    FUZZ_CHECK(slurp(file) == input);  // a refused log is left as it was
    FUZZ_CHECK(warnings == 0);
    return 0;
  }

  // The file changed in one of the documented ways only.
  const std::string after = slurp(file);
  if (warnings == 0) {
    const bool unchanged = after == input;
    const bool newline_restored = !input.empty() && input.back() != '\n' && after == std::string(input) + '\n';
    FUZZ_CHECK(unchanged || newline_restored);
  } else {
    FUZZ_CHECK(warnings == 1);
    FUZZ_CHECK(after == input.substr(0, last_line_start(input)));  // only the torn last line went
  }

  // The fold agrees with an independent reading of what the file now holds.
  const auto events = log->events();
  FUZZ_CHECK(effective_sandbox_mode(*log) == reference_fold(after));
  FUZZ_CHECK(effective_sandbox_mode(std::span<const session_event>(events)) == reference_fold(after));
  for (const auto& event : events) FUZZ_CHECK(event_from_json(event_to_json(event)) == event);

  // Replaying a replayed file is quiet and changes nothing.
  {
    int again = 0;
    session_log_options quiet;
    quiet.warn = [&](std::string_view) { ++again; };
    const session_log replayed(file, quiet);
    FUZZ_CHECK(again == 0);
    FUZZ_CHECK(replayed.events() == events);
    FUZZ_CHECK(slurp(file) == after);
  }

  // An append after replay is what the fold and the next replay see; a
  // harness event keeps whatever bytes it was given readable.
  const auto mode = sandbox_modes[size % sandbox_modes.size()];
  set_sandbox_mode(*log, mode);
  log->append("fuzz-note", {{"text", std::string(input.substr(0, 64))}});
  FUZZ_CHECK(effective_sandbox_mode(*log) == mode);
  const int before_reopen = warnings;
  const session_log reopened(file, options);
  FUZZ_CHECK(warnings == before_reopen);
  FUZZ_CHECK(reopened.events() == log->events());
  FUZZ_CHECK(effective_sandbox_mode(reopened) == mode);
  return 0;
}

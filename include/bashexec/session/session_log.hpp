// session/session_log: one session's append-only log of typed events, durable
// as JSON lines on disk and replayed on construction, plus the per-session
// sandbox-mode override folded from it (DESIGN.md contract 18).
//
// File format: one JSON object per line, each with a string "type":
//   {"type":"sandbox-mode","mode":"workspace-write"}
// Other event types (a harness's own) are kept verbatim and written back
// unchanged. Every append is one write(2) of a whole line, then fsync(2).
//
// Replay rules: a final line that does not parse (a write torn by a crash)
// is dropped from the file with a warning, never an error and never at the
// cost of an earlier event; a complete final line missing only its newline
// is kept and the newline restored. Any other bad line — invalid JSON before
// the end, a missing "type", an unknown sandbox mode, nesting deeper than
// `session_log_max_depth` — throws `session_log_error` naming the file and
// the line number.
//
// Nesting is bounded (replay and `append` alike) because nlohmann-json
// copies, compares and dumps a value recursively: a line nested some ten
// thousand levels deep would overflow the stack, a crash instead of an
// error. The depth is measured without building the value.
//
// One log per session: `session_log_path(dir, session_id)` maps each session
// id to its own file, so two sessions never see each other's events. One
// writer per file; a `session_log` is safe to share between threads.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bashexec/detail/unique_fd.hpp"
#include "bashexec/sandbox_mode.hpp"

namespace bashexec {

/// The session's sandbox-mode override was set (the `sandbox-mode` event).
struct sandbox_mode_event {
  sandbox_mode mode = sandbox_mode::read_only;
  friend bool operator==(const sandbox_mode_event&, const sandbox_mode_event&) = default;
};

/// An event of a type bashexec does not interpret, kept verbatim: `body` is
/// the whole JSON object, `type` its "type" field.
struct opaque_event {
  std::string type;
  nlohmann::json body;
  friend bool operator==(const opaque_event&, const opaque_event&) = default;
};

using session_event = std::variant<sandbox_mode_event, opaque_event>;

/// A log file that cannot be read, replayed or appended to.
class session_log_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr std::string_view sandbox_mode_event_type = "sandbox-mode";

/// The deepest nesting of arrays and objects an event may have (the event
/// object itself is level 1).
inline constexpr std::size_t session_log_max_depth = 512;

namespace detail {

/// A SAX consumer that builds nothing and stops the (iterative) parser as
/// soon as the nesting passes `limit`.
class json_depth_probe final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit json_depth_probe(std::size_t limit) : limit_(limit) {}
  bool too_deep() const noexcept { return too_deep_; }

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return enter(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return leave(); }
  bool start_array(std::size_t) override { return enter(); }
  bool end_array() override { return leave(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool enter() {
    if (++depth_ <= limit_) return true;
    too_deep_ = true;
    return false;
  }
  bool leave() {
    --depth_;
    return true;
  }

  std::size_t limit_;
  std::size_t depth_ = 0;
  bool too_deep_ = false;
};

/// True when the JSON text `line` nests deeper than `limit` (whether or not
/// it parses).
inline bool json_text_too_deep(std::string_view line, std::size_t limit) {
  json_depth_probe probe(limit);
  (void)nlohmann::json::sax_parse(line, &probe, nlohmann::json::input_format_t::json, false);
  return probe.too_deep();
}

/// True when `value` nests deeper than `limit`; iterative, so any depth is
/// safe to measure.
inline bool json_value_too_deep(const nlohmann::json& value, std::size_t limit) {
  std::vector<std::pair<const nlohmann::json*, std::size_t>> pending{{&value, 1}};
  while (!pending.empty()) {
    const auto [node, depth] = pending.back();
    pending.pop_back();
    if (!node->is_structured()) continue;
    if (depth > limit) return true;
    for (const auto& child : *node) pending.emplace_back(&child, depth + 1);
  }
  return false;
}

}  // namespace detail

/// The JSON object one event is stored as.
inline nlohmann::json event_to_json(const session_event& event) {
  if (const auto* mode = std::get_if<sandbox_mode_event>(&event))
    return {{"type", sandbox_mode_event_type}, {"mode", to_string(mode->mode)}};
  const auto& opaque = std::get<opaque_event>(event);
  nlohmann::json body = opaque.body.is_object() ? opaque.body : nlohmann::json::object();
  body["type"] = opaque.type;
  return body;
}

/// Reads one stored event; throws std::invalid_argument saying what is wrong.
inline session_event event_from_json(const nlohmann::json& line) {
  if (!line.is_object()) throw std::invalid_argument("expected a JSON object");
  const auto type = line.find("type");
  if (type == line.end() || !type->is_string()) throw std::invalid_argument("missing the string field \"type\"");
  const auto& name = type->get_ref<const std::string&>();
  if (name != sandbox_mode_event_type) return opaque_event{name, line};
  const auto mode = line.find("mode");
  if (mode == line.end() || !mode->is_string())
    throw std::invalid_argument("sandbox-mode event without the string field \"mode\"");
  const auto& spelling = mode->get_ref<const std::string&>();
  const auto parsed = parse_sandbox_mode(spelling);
  if (!parsed)
    throw std::invalid_argument(
        fmt::format("unknown sandbox mode {} (expected read-only, workspace-write or danger-full-access)",
                    nlohmann::json(spelling).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  return sandbox_mode_event{*parsed};
}

/// The session's sandbox-mode override: the last `sandbox-mode` event wins;
/// empty when there is none. A pure fold.
inline std::optional<sandbox_mode> effective_sandbox_mode(std::span<const session_event> events) {
  std::optional<sandbox_mode> mode;
  for (const auto& event : events)
    if (const auto* set = std::get_if<sandbox_mode_event>(&event)) mode = set->mode;
  return mode;
}

/// `<dir>/<session id>.jsonl`, the id percent-encoded so that every session
/// id maps to its own plain file name (no `/`, no `..`, no hidden files).
inline std::filesystem::path session_log_path(const std::filesystem::path& dir, std::string_view session_id) {
  if (session_id.empty()) throw std::invalid_argument("session_id must not be empty");
  std::string name;
  for (const char c : session_id) {
    const auto byte = static_cast<unsigned char>(c);
    const bool plain = (byte >= 'a' && byte <= 'z') || (byte >= 'A' && byte <= 'Z') ||
                       (byte >= '0' && byte <= '9') || byte == '-' || byte == '_';
    if (plain)
      name.push_back(c);
    else
      name += fmt::format("%{:02X}", byte);
  }
  return dir / (name + ".jsonl");
}

struct session_log_options {
  /// Receives replay warnings (a torn final line); stderr when empty.
  std::function<void(std::string_view)> warn;
};

class session_log;
void set_sandbox_mode(session_log& log, sandbox_mode mode);

/// One session's event log. Default-constructed it lives in memory only;
/// constructed over a file it replays that file and makes every append
/// durable before returning.
class session_log {
 public:
  session_log() = default;

  /// Opens (creating it, and its parent directories, if needed) and replays
  /// `file`. Throws `session_log_error` naming the file (and line).
  explicit session_log(std::filesystem::path file, session_log_options options = {})
      : file_(std::move(file)), options_(std::move(options)) {
    open_and_replay();
  }

  session_log(const session_log&) = delete;
  session_log& operator=(const session_log&) = delete;

  /// The backing file; empty for an in-memory log.
  const std::optional<std::filesystem::path>& file() const noexcept { return file_; }

  /// Every event, oldest first (replayed ones included).
  std::vector<session_event> events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }

  /// Appends a harness-defined event. `sandbox-mode` events are refused:
  /// `set_sandbox_mode` is their only write path.
  void append(std::string_view type, nlohmann::json body = nlohmann::json::object()) {
    if (type == sandbox_mode_event_type)
      throw std::invalid_argument("sandbox-mode events are written only by set_sandbox_mode");
    if (type.empty()) throw std::invalid_argument("event type must not be empty");
    if (!body.is_object()) throw std::invalid_argument("event body must be a JSON object");
    if (detail::json_value_too_deep(body, session_log_max_depth))
      throw std::invalid_argument(
          fmt::format("event body must not nest deeper than {} levels", session_log_max_depth));
    append_event(opaque_event{std::string(type), std::move(body)});
  }

 private:
  friend void set_sandbox_mode(session_log& log, sandbox_mode mode);

  std::string where() const { return file_ ? file_->string() : std::string("(memory)"); }

  [[noreturn]] void fail(std::string_view call, int error = errno) const {
    throw session_log_error(fmt::format("session log {}: {}", where(), detail::syscall_message(call, error)));
  }

  void warn(std::string_view message) const {
    if (options_.warn)
      options_.warn(message);
    else
      fmt::print(stderr, "bashexec: {}\n", message);
  }

  void append_event(const session_event& event) {
    auto object = event_to_json(event);
    // Keep the event readable whatever bytes a harness put in it.
    object = nlohmann::json::parse(object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    std::lock_guard lock(mutex_);
    if (fd_) write_line(object.dump() + '\n');
    events_.push_back(event_from_json(object));
  }

  /// One durable line: written whole, then fsync'ed; rolled back on failure
  /// so that a failed append never leaves a partial line behind.
  void write_line(std::string_view line) {
    std::size_t done = 0;
    while (done < line.size()) {
      const auto n = ::write(fd_.get(), line.data() + done, line.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        const int error = errno;
        (void)::ftruncate(fd_.get(), static_cast<off_t>(size_));
        fail("write", error);
      }
      done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd_.get()) != 0) {
      const int error = errno;
      (void)::ftruncate(fd_.get(), static_cast<off_t>(size_));
      fail("fsync", error);
    }
    size_ += line.size();
  }

  void open_and_replay() {
    namespace fs = std::filesystem;
    const fs::path parent = file_->parent_path();
    if (!parent.empty()) {
      std::error_code ec;
      fs::create_directories(parent, ec);
      if (ec) throw session_log_error(fmt::format("session log {}: {}", where(), ec.message()));
    }
    bool created = true;
    int fd = ::open(file_->c_str(), O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) {
      created = false;
      fd = ::open(file_->c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
    }
    if (fd < 0) fail("open");
    fd_.reset(fd);
    if (created) {
      // A new file is durable only once its directory entry is.
      detail::unique_fd dir(::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (dir) (void)::fsync(dir.get());
    }
    replay(read_all());
  }

  std::string read_all() {
    std::string content;
    char buffer[65536];
    off_t offset = 0;
    for (;;) {
      const auto n = ::pread(fd_.get(), buffer, sizeof buffer, offset);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("read");
      }
      if (n == 0) break;
      content.append(buffer, static_cast<std::size_t>(n));
      offset += n;
    }
    return content;
  }

  static bool blank(std::string_view line) {
    return line.find_first_not_of(" \t\r") == std::string_view::npos;
  }

  void replay(const std::string& content) {
    size_ = content.size();
    // Where the last non-blank line starts: only that line may be torn.
    std::size_t last_start = std::string::npos;
    for (std::size_t start = 0; start < content.size();) {
      auto end = content.find('\n', start);
      if (end == std::string::npos) end = content.size();
      if (!blank(std::string_view(content).substr(start, end - start))) last_start = start;
      start = end + 1;
    }

    std::size_t line_number = 0;
    for (std::size_t start = 0; start < content.size();) {
      ++line_number;
      auto end = content.find('\n', start);
      const bool terminated = end != std::string::npos;
      if (!terminated) end = content.size();
      const std::string_view line = std::string_view(content).substr(start, end - start);
      const std::size_t line_start = start;
      start = end + 1;
      if (blank(line)) continue;

      if (detail::json_text_too_deep(line, session_log_max_depth))
        throw session_log_error(fmt::format("session log {} line {}: nested deeper than {} levels (the log is corrupt)",
                                            where(), line_number, session_log_max_depth));
      auto parsed = nlohmann::json::parse(line, nullptr, false);
      if (parsed.is_discarded()) {
        if (line_start == last_start) {
          drop_torn_tail(line_start, line_number, line.size());
          return;
        }
        throw session_log_error(
            fmt::format("session log {} line {}: not valid JSON (the log is corrupt)", where(), line_number));
      }
      try {
        events_.push_back(event_from_json(parsed));
      } catch (const std::invalid_argument& e) {
        throw session_log_error(fmt::format("session log {} line {}: {}", where(), line_number, e.what()));
      }
      if (!terminated) restore_newline();
    }
  }

  void drop_torn_tail(std::size_t offset, std::size_t line_number, std::size_t bytes) {
    warn(fmt::format("session log {} line {}: ignoring a torn final line ({} bytes) left by an interrupted write",
                     where(), line_number, bytes));
    if (::ftruncate(fd_.get(), static_cast<off_t>(offset)) != 0) fail("ftruncate");
    if (::fsync(fd_.get()) != 0) fail("fsync");
    size_ = offset;
  }

  void restore_newline() { write_line("\n"); }

  std::optional<std::filesystem::path> file_;
  session_log_options options_;
  detail::unique_fd fd_;
  std::size_t size_ = 0;
  mutable std::mutex mutex_;
  std::vector<session_event> events_;
};

/// Sets the session's sandbox-mode override — the only way to write one.
/// Durable before it returns when the log has a file.
inline void set_sandbox_mode(session_log& log, sandbox_mode mode) { log.append_event(sandbox_mode_event{mode}); }

/// The override of `log`'s session (see `effective_sandbox_mode(events)`).
inline std::optional<sandbox_mode> effective_sandbox_mode(const session_log& log) {
  const auto events = log.events();
  return effective_sandbox_mode(std::span<const session_event>(events));
}

}  // namespace bashexec

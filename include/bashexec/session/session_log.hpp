// session/session_log: one session's append-only log of typed events, durable
// as JSON lines on disk and replayed on construction, plus the per-session
// sandbox-mode override folded from it (docs/contract.md item 18).
//
// File format: one JSON object per line, each with a string "type":
//   {"type":"sandbox-mode","mode":"workspace-write"}
// A `shell-state` line may hold only what changed from the state before it
// ({"type":"shell-state","changes":true,"cwd":"/w/sub"}: session_events.hpp).
// Other event types (a harness's own) are kept verbatim and written back
// unchanged. Every append is one write(2) of a whole line, then fsync(2).
//
// Replay (the rules, and the fold itself, are in session/session_events.hpp):
// a torn final line is cut from the file with a warning, and a missing final
// newline is written back. Appends are bounded in nesting like replayed lines.
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
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/sandbox_mode.hpp"
#include "bashexec/session/session_events.hpp"

namespace bashexec {

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
void grant_network_for_session(session_log& log, std::vector<std::string> domains);
void record_shell_state(session_log& log, shell_state_event state);

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

  /// What `fold` answers of every event, oldest first, read in place under
  /// the log's lock (no copy: the per-call folds of a long session cost no
  /// allocation per event). `fold` takes a std::span<const session_event>
  /// and must not call back into this log.
  template <class Fold>
  auto fold(Fold&& fold) const {
    std::lock_guard lock(mutex_);
    return std::forward<Fold>(fold)(std::span<const session_event>(events_));
  }

  /// The last event of type `Event`, if any, without copying the others
  /// (the carried shell state is read on every call of a session).
  template <class Event>
  std::optional<Event> last_of() const {
    std::lock_guard lock(mutex_);
    if (const Event* event = last_of_locked<Event>()) return *event;
    return std::nullopt;
  }

  /// Appends a harness-defined event. `sandbox-mode` events are refused:
  /// `set_sandbox_mode` is their only write path.
  void append(std::string_view type, nlohmann::json body = nlohmann::json::object()) {
    if (type == sandbox_mode_event_type)
      throw std::invalid_argument("sandbox-mode events are written only by set_sandbox_mode");
    if (type == network_grant_event_type)
      throw std::invalid_argument("network-grant events are written only by grant_network_for_session");
    if (type == shell_state_event_type)
      throw std::invalid_argument("shell-state events are written only by record_shell_state");
    if (type.empty()) throw std::invalid_argument("event type must not be empty");
    if (!body.is_object()) throw std::invalid_argument("event body must be a JSON object");
    if (detail::json_value_too_deep(body, session_log_max_depth))
      throw std::invalid_argument(
          fmt::format("event body must not nest deeper than {} levels", session_log_max_depth));
    append_event(opaque_event{std::string(type), std::move(body)});
  }

 private:
  friend void set_sandbox_mode(session_log& log, sandbox_mode mode);
  friend void grant_network_for_session(session_log& log, std::vector<std::string> domains);
  friend void record_shell_state(session_log& log, shell_state_event state);

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

  template <class Event>
  const Event* last_of_locked() const {
    for (auto it = events_.rbegin(); it != events_.rend(); ++it)
      if (const auto* event = std::get_if<Event>(&*it)) return event;
    return nullptr;
  }

  /// A checked state (record_shell_state), stored as what changed from the
  /// state before it where that is shorter (shell_state_line): a session
  /// that changes one directory a call writes a short line, not its whole
  /// environment again, and replays in proportion.
  void append_shell_state(shell_state_event state) {
    std::lock_guard lock(mutex_);
    if (fd_) {
      const shell_state_event* before = last_of_locked<shell_state_event>();
      write_line(shell_state_line(before ? *before : shell_state_event{}, state).dump() + '\n');
    }
    events_.push_back(std::move(state));
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

  void replay(const std::string& content) {
    size_ = content.size();
    auto replayed = replay_session_log(content, where());
    events_ = std::move(replayed.events);
    if (const auto& torn = replayed.torn_tail) {
      warn(fmt::format("session log {} line {}: ignoring a torn final line ({} bytes) left by an interrupted write",
                       where(), torn->line_number, torn->bytes));
      if (::ftruncate(fd_.get(), static_cast<off_t>(torn->offset)) != 0) fail("ftruncate");
      if (::fsync(fd_.get()) != 0) fail("fsync");
      size_ = torn->offset;
    } else if (replayed.missing_final_newline) {
      write_line("\n");
    }
  }

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

/// Grants the session `domains` (validated names or `*.` wildcards) besides
/// the executor's allowed domains, for every later call — the only way to
/// write a `network-grant` event. Durable before it returns when the log has
/// a file. Throws std::invalid_argument for an empty list or a bad name.
inline void grant_network_for_session(session_log& log, std::vector<std::string> domains) {
  if (domains.empty()) throw std::invalid_argument("grant_network_for_session: no domains to grant");
  for (const auto& domain : domains)
    if (!network::domain_pattern::parse(domain))
      throw std::invalid_argument(fmt::format("grant_network_for_session: \"{}\" is not a domain name", domain));
  log.append_event(network_grant_event{std::move(domains)});
}

/// Records the state the session's next call starts from (an empty state is
/// the reset) — the only way to write a `shell-state` event. Durable before
/// it returns when the log has a file. Throws std::invalid_argument for a
/// string that is not valid UTF-8 or a field the event would not read back.
inline void record_shell_state(session_log& log, shell_state_event state) {
  // What is written must read back as it was: a strict dump refuses what
  // the log's own (replacing) dump would change.
  const nlohmann::json object = event_to_json(state);
  try {
    (void)object.dump();
  } catch (const nlohmann::json::type_error&) {
    throw std::invalid_argument("record_shell_state: a string of the state is not valid UTF-8");
  }
  // The fields are checked as a replay would check them.
  log.append_shell_state(detail::shell_state_from_json(object));
}

/// The state `log`'s session's next call starts from (see
/// `current_shell_state(events)`).
inline shell_state_event current_shell_state(const session_log& log) {
  return log.last_of<shell_state_event>().value_or(shell_state_event{});
}

/// The names granted to `log`'s session (see `session_network_grants(events)`).
inline std::vector<std::string> session_network_grants(const session_log& log) {
  return log.fold([](std::span<const session_event> events) { return session_network_grants(events); });
}

/// The override of `log`'s session (see `effective_sandbox_mode(events)`).
inline std::optional<sandbox_mode> effective_sandbox_mode(const session_log& log) {
  return log.fold([](std::span<const session_event> events) { return effective_sandbox_mode(events); });
}

}  // namespace bashexec

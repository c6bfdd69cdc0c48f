// server/session_logs: the sessions' logs of a tool server (their
// sandbox-mode overrides, session/session_log.hpp), opened on first use and
// bounded in number.
#pragma once

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "bashexec/session/session_log.hpp"

namespace bashexec::server {

/// The sessions' logs (their sandbox-mode overrides), opened and replayed on
/// first use. At most `max_open` stay open (each holds a descriptor); the
/// least recently used is closed first and replayed again when needed, so a
/// server that sees ever new session ids keeps its descriptors bounded. With
/// an empty directory the logs live in memory only (the fuzz target), and a
/// closed one forgets its override.
class session_logs {
 public:
  explicit session_logs(std::filesystem::path directory, std::size_t max_open = 256)
      : directory_(std::move(directory)), max_open_(std::max<std::size_t>(max_open, 1)) {}

  /// The log of `session` (never empty); throws what opening it throws.
  std::shared_ptr<session_log> open(const std::string& session) {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(session); it != index_.end()) {
      recent_.splice(recent_.begin(), recent_, it->second);
      return it->second->second;
    }
    auto log = directory_.empty() ? std::make_shared<session_log>()
                                  : std::make_shared<session_log>(session_log_path(directory_, session));
    // Evicting a log another call still uses is safe: that call holds its own
    // reference and only reads it; the next `set_mode` writes through a fresh one.
    if (recent_.size() >= max_open_) {
      index_.erase(recent_.back().first);
      recent_.pop_back();
    }
    recent_.emplace_front(session, log);
    index_.emplace(session, recent_.begin());
    return log;
  }

 private:
  using entry = std::pair<std::string, std::shared_ptr<session_log>>;
  std::filesystem::path directory_;
  std::size_t max_open_;
  std::mutex mutex_;
  std::list<entry> recent_;
  std::map<std::string, std::list<entry>::iterator> index_;
};

}  // namespace bashexec::server

// server/line_io: the descriptor I/O of the tool servers (json_lines_server,
// mcp_server): whole lines written under one mutex and bounded reads of one
// line at a time, both woken by a closing flag so that neither blocks a
// shutdown. A client that stops reading cannot hold the server hostage: a
// line that waits `write_timeout` without the descriptor taking a byte (or,
// once closing, `patience` in all) gives up, and the server closes.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/errors.hpp"

namespace bashexec::server {

/// A flag that, once set, stays set and keeps a descriptor readable, so that
/// a poll(2) on stdin or stdout wakes up when the server starts closing.
class closing_flag {
 public:
  closing_flag() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (!fd_) throw infrastructure_error(fmt::format("eventfd: {}", std::strerror(errno)));
  }

  /// Safe from any thread; idempotent.
  void set() noexcept {
    set_.store(true);
    const std::uint64_t one = 1;
    [[maybe_unused]] auto ignored = ::write(fd_.get(), &one, sizeof one);
  }
  bool is_set() const noexcept { return set_.load(); }
  int fd() const noexcept { return fd_.get(); }

 private:
  bashexec::detail::unique_fd fd_;
  std::atomic<bool> set_{false};
};

/// Writes whole JSON lines to a descriptor (stdout), one writer at a time.
/// A line gives up when the descriptor takes none of its bytes for
/// `write_timeout` (the client stopped reading), or when it is still not
/// written `patience` after the server started closing, or on a write error
/// such as EPIPE. Then stdout counts as gone: this line and every later one
/// are dropped, and the closing flag is set (and `on_gone` called) so that
/// the server shuts down rather than run calls nobody can hear the answers
/// of: a client that stopped reading cannot hold the server hostage.
class line_writer {
 public:
  /// How a line's JSON becomes text (null: nlohmann-json's `dump`).
  using serializer = std::string (*)(const nlohmann::json&);

  /// `fallback` is the line written in place of a null one: what a handler
  /// answers when even its error response could not be built (out of memory).
  /// `on_gone` (which must not throw or write) wakes whatever waits for the
  /// closing flag without polling it.
  line_writer(int fd, closing_flag& closing, std::string_view fallback, std::function<void()> on_gone = {},
              std::chrono::milliseconds write_timeout = std::chrono::seconds(30), serializer serialize = nullptr,
              std::chrono::milliseconds patience = std::chrono::seconds(2))
      : fd_(fd),
        closing_(closing),
        fallback_(fallback),
        on_gone_(std::move(on_gone)),
        write_timeout_(write_timeout),
        serialize_(serialize),
        patience_(patience) {}

  /// Never throws; false when the line was dropped.
  bool emit(const nlohmann::json& line) noexcept {
    std::string text;
    try {
      text = fallback_;
      if (!line.is_null())
        text = serialize_ ? serialize_(line) : line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } catch (...) {
    }
    text += '\n';
    std::lock_guard lock(mutex_);
    return write_all(text);
  }

  /// True when some line could not be written.
  bool lost() const noexcept { return gone_.load(); }

 private:
  using clock = std::chrono::steady_clock;

  bool write_all(std::string_view text) noexcept {
    clock::time_point stalled = clock::now() + write_timeout_;  // no byte taken by then: gone
    std::optional<clock::time_point> closing_deadline;
    std::size_t done = 0;
    while (done < text.size()) {
      if (gone_.load()) return false;
      pollfd fds[2] = {{fd_, POLLOUT, 0}, {closing_.fd(), POLLIN, 0}};
      nfds_t count = 2;
      const auto now = clock::now();
      auto deadline = stalled;
      if (closing_.is_set()) {
        count = 1;
        if (!closing_deadline) closing_deadline = now + patience_;
        deadline = std::min(deadline, *closing_deadline);
      }
      const int timeout = static_cast<int>(std::clamp<std::int64_t>(
          std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count(), 0, INT_MAX));
      const int ready = ::poll(fds, count, timeout);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return give_up();  // stdout did not take the line in time
      if (fds[0].revents == 0) continue;  // only the closing flag woke us: wait again, bounded
      // At most PIPE_BUF after POLLOUT: a pipe with room for one page never
      // blocks such a write, so the bounds above hold.
      const ssize_t n = ::write(fd_, text.data() + done, std::min<std::size_t>(text.size() - done, PIPE_BUF));
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return give_up();
      }
      done += static_cast<std::size_t>(n);
      stalled = clock::now() + write_timeout_;
    }
    return true;
  }

  bool give_up() noexcept {
    gone_.store(true);
    closing_.set();
    if (on_gone_) on_gone_();
    return false;
  }

  int fd_;
  closing_flag& closing_;
  std::string_view fallback_;
  std::function<void()> on_gone_;
  std::chrono::milliseconds write_timeout_;
  serializer serialize_;
  std::chrono::milliseconds patience_;
  std::mutex mutex_;
  std::atomic<bool> gone_{false};
};

/// Reads lines from a descriptor (stdin) without blocking past `closing`.
class line_reader {
 public:
  enum class status { ok, too_long, end, closing };

  line_reader(int fd, const closing_flag& closing, std::size_t max_line_bytes)
      : fd_(fd), closing_(closing), max_(max_line_bytes), buffer_(std::size_t{64} << 10) {}

  /// The next line (without its newline) into `line`, at most `max_line_bytes`
  /// of it; a longer line's other bytes are dropped as they arrive.
  status next(std::string& line) {
    line.clear();
    bool too_long = false;
    for (;;) {
      if (closing_.is_set()) return status::closing;
      if (begin_ == end_) {
        const status filled = fill();
        if (filled == status::closing) return filled;
        if (filled == status::end) {
          if (too_long) return status::too_long;
          return line.empty() ? status::end : status::ok;
        }
      }
      const char* start = buffer_.data() + begin_;
      const auto* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - begin_));
      const std::size_t take = newline ? static_cast<std::size_t>(newline - start) : end_ - begin_;
      const std::size_t room = max_ - std::min(max_, line.size());
      if (take > room) too_long = true;
      line.append(start, std::min(take, room));
      begin_ += take;
      if (newline) {
        ++begin_;
        return too_long ? status::too_long : status::ok;
      }
    }
  }

 private:
  status fill() {
    for (;;) {
      pollfd fds[2] = {{fd_, POLLIN, 0}, {closing_.fd(), POLLIN, 0}};
      const int ready = ::poll(fds, 2, -1);
      if (ready < 0) {
        if (errno == EINTR) continue;
        return status::end;
      }
      if (closing_.is_set()) return status::closing;
      if (fds[0].revents == 0) continue;
      const ssize_t n = ::read(fd_, buffer_.data(), buffer_.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return status::end;  // end of input, or an unreadable stdin
      begin_ = 0;
      end_ = static_cast<std::size_t>(n);
      return status::ok;
    }
  }

  int fd_;
  const closing_flag& closing_;
  std::size_t max_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

}  // namespace bashexec::server

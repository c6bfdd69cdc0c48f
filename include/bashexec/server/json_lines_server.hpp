// `bashexec serve`: the JSON-lines tool server. The reader thread reads one
// bounded line at a time and hands it to request.hpp's handler; tool calls run
// on worker threads, at most `--max-in-flight` at once (reading pauses while
// all slots are taken), so a long foreground `bash` never blocks a
// `bash_output` on the next line. Every output line is written whole under
// one mutex. End of input or `stop()` (a signal) ends the reading, aborts the
// calls in flight and waits for their responses.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <climits>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <bashexec/detail/unique_fd.hpp>
#include <bashexec/errors.hpp>
#include <bashexec/tools/bash_tools.hpp>

#include "options.hpp"
#include "request.hpp"

namespace bashexec::cli {

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

/// What `serve` writes when even an error response could not be built.
inline constexpr std::string_view serve_fallback_line =
    R"({"id":null,"text":"internal error: a response could not be built","is_error":true})";

/// Writes whole JSON lines to a descriptor (stdout), one writer at a time.
/// Once the server is closing, a line waits at most `patience` for the
/// descriptor to take it; after that (or after a write error such as EPIPE)
/// stdout counts as gone and later lines are dropped: a client that stopped
/// reading cannot hold the shutdown hostage.
class line_writer {
 public:
  /// `fallback` is the line written in place of a null one: what a handler
  /// answers when even its error response could not be built (out of memory).
  line_writer(int fd, const closing_flag& closing, std::string_view fallback = serve_fallback_line,
              std::chrono::milliseconds patience = std::chrono::seconds(2))
      : fd_(fd), closing_(closing), fallback_(fallback), patience_(patience) {}

  /// Never throws; false when the line was dropped.
  bool emit(const nlohmann::json& line) noexcept {
    std::string text;
    try {
      text = fallback_;
      if (!line.is_null()) text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } catch (...) {
    }
    text += '\n';
    std::lock_guard lock(mutex_);
    return write_all(text);
  }

  /// True when some line could not be written.
  bool lost() const noexcept { return gone_.load(); }

 private:
  bool write_all(std::string_view text) noexcept {
    std::optional<std::chrono::steady_clock::time_point> deadline;
    std::size_t done = 0;
    while (done < text.size()) {
      if (gone_.load()) return false;
      pollfd fds[2] = {{fd_, POLLOUT, 0}, {closing_.fd(), POLLIN, 0}};
      nfds_t count = 2;
      int timeout = -1;
      if (closing_.is_set()) {
        count = 1;
        const auto now = std::chrono::steady_clock::now();
        if (!deadline) deadline = now + patience_;
        timeout = static_cast<int>(
            std::max<std::int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(*deadline - now).count()));
      }
      const int ready = ::poll(fds, count, timeout);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) {  // closing, and stdout did not take the line in time
        gone_.store(true);
        return false;
      }
      if (fds[0].revents == 0) continue;  // only the closing flag woke us: wait again, bounded
      // At most PIPE_BUF after POLLOUT: a pipe with room for one page never
      // blocks such a write, so the bound above holds.
      const ssize_t n = ::write(fd_, text.data() + done, std::min<std::size_t>(text.size() - done, PIPE_BUF));
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        gone_.store(true);
        return false;
      }
      done += static_cast<std::size_t>(n);
    }
    return true;
  }

  int fd_;
  const closing_flag& closing_;
  std::string_view fallback_;
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

/// The worker slots of a server: each call runs on a thread of its own that
/// holds one of `max_in_flight` slots, and the reader waits for a free slot
/// before it reads on. `stop()` (end of input, a signal) wakes every waiter
/// and requests the stop every call's token sees; `join()` waits for the
/// calls to answer. Shared by `serve` and `mcp`.
class call_pool {
 public:
  call_pool(std::size_t max_in_flight, closing_flag& closing) : max_in_flight_(max_in_flight), closing_(closing) {}
  call_pool(const call_pool&) = delete;
  call_pool& operator=(const call_pool&) = delete;
  ~call_pool() { join(); }

  /// Waits for a free slot; false when the server is closing instead.
  bool acquire() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return in_flight_ < max_in_flight_ || closing_.is_set(); });
    if (closing_.is_set()) return false;
    ++in_flight_;
    return true;
  }

  /// The stop every call sees when the server closes.
  std::stop_token stop_token() const noexcept { return stop_.get_token(); }

  /// Runs `ask` without the calling worker's slot: a call waiting for a
  /// person holds none, otherwise a full house of such calls would stop the
  /// reader before it reads their answers. Never throws (a failure is
  /// `unavailable`).
  template <class Ask>
  approval_outcome without_slot(Ask&& ask) noexcept {
    release();
    approval_outcome outcome = approval_outcome::cancelled;
    try {
      outcome = std::forward<Ask>(ask)();
    } catch (...) {
      outcome = approval_outcome::unavailable;
    }
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return in_flight_ < max_in_flight_ || closing_.is_set(); });
      ++in_flight_;  // even when closing: the worker releases it once more
    }
    return outcome;
  }

  /// Runs `body` on its own thread, which holds the slot `acquire` took and
  /// releases it when `body` returns (finished threads are joined as new
  /// ones start). When no thread can be started, the slot is released and
  /// `failed` gets the reason; neither function may throw.
  template <class Body, class Failed>
  void launch(Body&& body, Failed&& failed) noexcept {
    std::erase_if(workers_, [](worker& w) {
      if (!w.finished->load()) return false;
      w.thread.join();
      return true;
    });
    bool slot_held = true;
    try {
      workers_.reserve(workers_.size() + 1);  // push_back below must not throw with a live thread
      auto finished = std::make_shared<std::atomic<bool>>(false);
      std::thread thread;
      try {
        thread = std::thread([this, body = std::forward<Body>(body), finished]() mutable {
          body();
          release();
          finished->store(true);
        });
      } catch (const std::exception& e) {
        release();
        slot_held = false;
        failed(fmt::format("internal error: {}; the call did not run", e.what()));
        return;
      }
      workers_.push_back({std::move(thread), std::move(finished)});
    } catch (...) {
      if (slot_held) release();
      failed("internal error: out of memory; the call did not run");
    }
  }

  /// Wakes every waiter and stops every call; safe from any thread.
  void stop() noexcept {
    { std::lock_guard lock(mutex_); }  // no waiter misses the closing flag
    changed_.notify_all();
    stop_.request_stop();
  }

  /// Waits for every call's thread (call `stop` first to hurry them).
  void join() {
    for (auto& w : workers_)
      if (w.thread.joinable()) w.thread.join();
    workers_.clear();
  }

  /// Gives back a slot `acquire` took for a call that will not start.
  void release() noexcept {
    {
      std::lock_guard lock(mutex_);
      --in_flight_;
    }
    changed_.notify_all();
  }

 private:
  struct worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };

  std::size_t max_in_flight_;
  closing_flag& closing_;
  std::stop_source stop_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t in_flight_ = 0;
  std::vector<worker> workers_;
};

template <class Executor>
class tool_server {
 public:
  tool_server(Executor& executor, const serve_options& options, std::filesystem::path session_dir,
              std::filesystem::path workdir, int in_fd = STDIN_FILENO, int out_fd = STDOUT_FILENO)
      : in_fd_(in_fd),
        out_(out_fd, closing_),
        pool_(options.max_in_flight, closing_),
        approvals_([this](const nlohmann::json& line) { out_.emit(line); }, options.max_in_flight),
        logs_(std::move(session_dir)),
        tools_(executor,
               [this](const std::optional<owner_token>& owner, const std::string& notice) {
                 out_.emit({{"notice", notice}, {"session", session_json(owner)}});
               }),
        handler_(tools_, logs_, approvals_, options.approve, std::move(workdir), request_limits{},
                 [this](const approval_request& request, std::stop_token) {
                   return pool_.without_slot([&] { return approvals_.ask(request); });
                 }) {}

  tool_server(const tool_server&) = delete;
  tool_server& operator=(const tool_server&) = delete;

  ~tool_server() { finish(); }

  /// Serves until end of input or `stop()`. Then, as the protocol promises:
  /// no more lines are read, the calls in flight are stopped the way an
  /// abort stops them, pending approvals are cancelled, and it returns once
  /// every call has answered (or stdout stopped taking answers). Killing the
  /// background tasks is the executor's disposal, after this object is gone.
  void serve() {
    line_reader reader(in_fd_, closing_, handler_.limits().max_line_bytes);
    std::string line;
    for (;;) {
      const auto status = reader.next(line);
      if (status == line_reader::status::end || status == line_reader::status::closing) break;
      if (status == line_reader::status::too_long) {
        out_.emit(response(recover_id(line),
                           fmt::format("request line longer than {} bytes; ignored",
                                       handler_.limits().max_line_bytes),
                           true));
        continue;
      }
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      auto dispatched = handler_.dispatch(line);
      if (auto* now = std::get_if<nlohmann::json>(&dispatched)) {
        out_.emit(*now);
        continue;
      }
      auto& call = std::get<tool_call>(dispatched);
      if (!pool_.acquire()) {
        out_.emit(response(call.id, "the server is shutting down; the call did not run", true));
        break;
      }
      std::shared_ptr<tool_call> shared_call;
      try {
        shared_call = std::make_shared<tool_call>(std::move(call));
      } catch (...) {
        pool_.release();
        out_.emit(response(nullptr, "internal error: out of memory; the call did not run", true));
        continue;
      }
      pool_.launch([this, shared_call] { out_.emit(handler_.run(*shared_call, pool_.stop_token())); },
                   [this, shared_call](std::string_view reason) {
                     out_.emit(response(shared_call->id, reason, true));
                   });
    }
    finish();
  }

  /// Stops reading and aborts the calls in flight; `serve` then returns.
  /// Safe from any thread (the signal thread calls it).
  void stop() noexcept {
    closing_.set();
    pool_.stop();
    approvals_.close();
  }

  /// True when some response or notice could not be written to stdout.
  bool output_lost() const noexcept { return out_.lost(); }

 private:
  void finish() {
    stop();
    pool_.join();
  }

  int in_fd_;
  closing_flag closing_;
  line_writer out_;
  call_pool pool_;
  approval_desk approvals_;
  session_logs logs_;
  // Unsubscribes from the executor before the members above go away.
  bash_tools<Executor> tools_;
  request_handler<Executor> handler_;
};

}  // namespace bashexec::cli

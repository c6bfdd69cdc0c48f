// server/line_transport: what json_lines_server and mcp_server are both
// built on — the input descriptor, the closing flag, the whole-line writer,
// the worker slots — and the reading loop that hands each non-blank line to
// the protocol. The protocols differ only in what a line means.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "bashexec/server/call_pool.hpp"
#include "bashexec/server/line_io.hpp"

namespace bashexec::server {

class line_transport {
 public:
  line_transport(const line_transport&) = delete;
  line_transport& operator=(const line_transport&) = delete;

  /// True when some line could not be written to the output descriptor.
  bool output_lost() const noexcept { return out_.lost(); }

 protected:
  /// `fallback` is the protocol's line for a response that could not be
  /// built, `serialize` how its messages become lines (see line_writer).
  /// `write_timeout`: see line_writer; when stdout is gone the closing flag
  /// is set and every waiter woken, so `serve` ends as after `stop`.
  line_transport(int in_fd, int out_fd, std::size_t max_in_flight, std::string_view fallback,
                 std::chrono::milliseconds write_timeout, line_writer::serializer serialize = nullptr)
      : in_fd_(in_fd),
        out_(out_fd, closing_, fallback, [this] { pool_.wake(); }, write_timeout, serialize),
        pool_(max_in_flight, closing_) {
    if (write_timeout.count() <= 0) throw std::invalid_argument("write_timeout: must be positive");
  }
  ~line_transport() = default;

  /// Reads lines of at most `max_line_bytes` until end of input, closing, or
  /// `handle(line)` returning false. An over-long line goes to
  /// `too_long(line)` (its start, to recover an id from); blank lines are
  /// skipped. True when it stopped at end of input.
  template <class TooLong, class Handle>
  bool read_lines(std::size_t max_line_bytes, TooLong&& too_long, Handle&& handle) {
    line_reader reader(in_fd_, closing_, max_line_bytes);
    std::string line;
    for (;;) {
      const auto status = reader.next(line);
      if (status == line_reader::status::end) return true;
      if (status == line_reader::status::closing) return false;
      if (status == line_reader::status::too_long) {
        too_long(line);
        continue;
      }
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      if (!handle(line)) return false;
    }
  }

  /// Stops reading and stops the calls in flight (safe from any thread).
  void stop_transport() noexcept {
    closing_.set();
    pool_.stop();
  }

  int in_fd_;
  closing_flag closing_;
  line_writer out_;
  call_pool pool_;
};

}  // namespace bashexec::server

// server/sse_replay: the Server-Sent Events of the Streamable HTTP transport
// (MCP 2025-11-25) — how one message becomes an event, what its id says, and
// the bounded buffer a stream replays from when its client reconnects with
// Last-Event-ID (docs/tool-protocol.md, "Over HTTP").
//
// Event ids are `<stream>.<sequence>`, both decimal: unique within a session,
// and enough to find the stream a reconnecting client was reading and where.
// Sequence 0 is the priming event each stream opens with (no data).
// Each stream keeps its latest events up to a count and a byte bound; a
// client that asks for events older than the oldest kept is told so
// (`replay::gap`, with what is still kept) rather than silently handed a
// stream with a hole in it.
// Hand-written: the format is four line prefixes (WHATWG HTML, "Server-sent
// events"); Beast has no SSE.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/core.h>

namespace bashexec::server::http {

/// Where an event stands: its stream and its place in it (from 1).
struct event_position {
  std::uint64_t stream = 0;
  std::uint64_t sequence = 0;
  friend bool operator==(const event_position&, const event_position&) = default;
};

inline std::string event_id(event_position at) { return fmt::format("{}.{}", at.stream, at.sequence); }

/// A Last-Event-ID this server could have sent (`S.0` is a stream's
/// priming event: nothing of it seen yet); none for any other text.
inline std::optional<event_position> parse_event_id(std::string_view text) {
  const auto dot = text.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == text.size()) return std::nullopt;
  event_position at;
  const auto number = [](std::string_view digits, std::uint64_t& out) {
    if (digits.size() > 19 || digits.find_first_not_of("0123456789") != std::string_view::npos) return false;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return error == std::errc{} && end == digits.data() + digits.size();
  };
  if (!number(text.substr(0, dot), at.stream) || !number(text.substr(dot + 1), at.sequence)) return std::nullopt;
  return at;
}

/// One SSE event: `id`, `event: message` and the data, one `data:` line per
/// line of it (a JSON message has none but its own; any CR or LF splits).
inline std::string format_event(event_position at, std::string_view data) {
  std::string out = fmt::format("id: {}\nevent: message\n", event_id(at));
  out.reserve(out.size() + data.size() + 8);
  // Each break found by memchr (find_first_of tests every byte against the
  // set; a call's answer is kilobytes with no break at all), each kept
  // until passed.
  std::size_t next_cr = data.find('\r'), next_lf = data.find('\n');
  const auto next_break = [&](std::size_t from) {
    if (next_cr < from) next_cr = data.find('\r', from);
    if (next_lf < from) next_lf = data.find('\n', from);
    return std::min(next_cr, next_lf);
  };
  std::size_t start = 0;
  while (true) {
    const std::size_t end = next_break(start);
    out += "data: ";
    out.append(data.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    out += '\n';
    if (end == std::string_view::npos) break;
    start = end + ((data[end] == '\r' && end + 1 < data.size() && data[end + 1] == '\n') ? 2 : 1);
  }
  out += '\n';
  return out;
}

/// The event a stream opens with: an id and no data, so that a client can
/// resume it before its first message (MCP 2025-11-25; clients skip it),
/// and how long a client waits before it reconnects (`retry`, ms).
inline std::string priming_event(std::uint64_t stream, unsigned retry_ms = 1000) {
  return fmt::format("id: {}.0\nretry: {}\ndata:\n\n", stream, retry_ms);
}

/// What a reconnecting client gets.
struct replay {
  enum class kind { events, gap, unknown } what = kind::events;
  std::vector<std::string> events;  // formatted, oldest first (kind::events)
};

/// One stream's latest events, bounded by count and bytes.
class replay_buffer {
 public:
  replay_buffer(std::uint64_t stream, std::size_t max_events, std::size_t max_bytes)
      : stream_(stream), max_events_(max_events), max_bytes_(max_bytes) {}

  std::uint64_t stream() const noexcept { return stream_; }

  /// Adds `data` as the next event; returns it formatted, to send now.
  std::string append(std::string_view data) {
    const event_position at{stream_, ++last_};
    std::string event = format_event(at, data);
    bytes_ += event.size();
    kept_.emplace_back(at.sequence, event);
    while (!kept_.empty() && (kept_.size() > max_events_ || bytes_ > max_bytes_)) {
      bytes_ -= kept_.front().second.size();
      kept_.pop_front();
    }
    return event;
  }

  /// The events after `seen` (the client's Last-Event-ID): all of them when
  /// none was dropped since; `gap` with every event still kept when some
  /// were (the transport says so before them); `unknown`, with none, for a
  /// position of another stream or one never sent.
  replay since(event_position seen) const {
    replay out;
    if (seen.stream != stream_ || seen.sequence > last_) {
      out.what = replay::kind::unknown;
      return out;
    }
    const std::uint64_t oldest = kept_.empty() ? last_ + 1 : kept_.front().first;
    if (seen.sequence + 1 < oldest) out.what = replay::kind::gap;
    for (const auto& [sequence, event] : kept_)
      if (sequence > seen.sequence) out.events.push_back(event);
    return out;
  }

  std::size_t kept_bytes() const noexcept { return bytes_; }

 private:
  std::uint64_t stream_;
  std::size_t max_events_;
  std::size_t max_bytes_;
  std::uint64_t last_ = 0;
  std::size_t bytes_ = 0;
  std::deque<std::pair<std::uint64_t, std::string>> kept_;
};

}  // namespace bashexec::server::http

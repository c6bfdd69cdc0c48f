// Tests of server/sse_replay.hpp: a message as a Server-Sent Event, event
// ids, and the bounded replay a reconnecting client gets with Last-Event-ID.

#include <catch2/catch.hpp>

#include <string>

#include <bashexec/server/sse_replay.hpp>

using namespace bashexec::server::http;

TEST_CASE("sse: an event carries its id, the message type and one data line per line", "[http][sse]") {
  CHECK(format_event({3, 7}, R"({"jsonrpc":"2.0"})") == "id: 3.7\nevent: message\ndata: {\"jsonrpc\":\"2.0\"}\n\n");
  CHECK(format_event({1, 1}, "a\nb\r\nc\rd") == "id: 1.1\nevent: message\ndata: a\ndata: b\ndata: c\ndata: d\n\n");
  CHECK(format_event({1, 2}, "") == "id: 1.2\nevent: message\ndata: \n\n");
}

TEST_CASE("sse: only an id this server could have sent is parsed", "[http][sse]") {
  CHECK(parse_event_id("4.12") == event_position{4, 12});
  CHECK_FALSE(parse_event_id(""));
  CHECK_FALSE(parse_event_id("4"));
  CHECK_FALSE(parse_event_id(".3"));
  CHECK_FALSE(parse_event_id("4."));
  CHECK(parse_event_id("4.0") == event_position{4, 0});  // the priming event
  CHECK_FALSE(parse_event_id("4.-1"));
  CHECK_FALSE(parse_event_id("4.1.2"));
  CHECK_FALSE(parse_event_id("99999999999999999999.1"));  // beyond 64 bits
  CHECK_FALSE(parse_event_id(" 4.1"));
}

TEST_CASE("sse: a reconnecting client gets every event after its last one, in order", "[http][sse]") {
  replay_buffer stream(2, 100, 1 << 20);
  for (int i = 1; i <= 5; ++i) CHECK(stream.append("m" + std::to_string(i)).starts_with("id: 2." + std::to_string(i)));
  const replay after_two = stream.since({2, 2});
  REQUIRE(after_two.what == replay::kind::events);
  REQUIRE(after_two.events.size() == 3);
  CHECK(after_two.events[0] == format_event({2, 3}, "m3"));
  CHECK(after_two.events[2] == format_event({2, 5}, "m5"));
  CHECK(stream.since({2, 0}).events.size() == 5);  // from the priming event: all of it
  CHECK(priming_event(2, 500) == "id: 2.0\nretry: 500\ndata:\n\n");
  CHECK(stream.since({2, 5}).events.empty());  // up to date
  CHECK(stream.since({2, 5}).what == replay::kind::events);
}

TEST_CASE("sse: past the buffer's bounds the client is told of the gap, with what is still kept",
          "[http][sse]") {
  replay_buffer by_count(1, 3, 1 << 20);
  for (int i = 0; i < 10; ++i) by_count.append("x");
  CHECK(by_count.since({1, 7}).events.size() == 3);  // 8, 9, 10 kept
  const replay past = by_count.since({1, 6});  // 7 was dropped
  CHECK(past.what == replay::kind::gap);
  REQUIRE(past.events.size() == 3);
  CHECK(past.events.front().starts_with("id: 1.8\n"));
  CHECK(by_count.since({1, 1}).what == replay::kind::gap);

  replay_buffer by_bytes(1, 1000, 100);
  for (int i = 0; i < 10; ++i) by_bytes.append(std::string(30, 'y'));
  CHECK(by_bytes.kept_bytes() <= 100);
  CHECK(by_bytes.since({1, 9}).events.size() == 1);
  CHECK(by_bytes.since({1, 2}).what == replay::kind::gap);
}

TEST_CASE("sse: a position of another stream, or one never sent, is unknown", "[http][sse]") {
  replay_buffer stream(5, 10, 1000);
  stream.append("a");
  CHECK(stream.since({4, 1}).what == replay::kind::unknown);
  CHECK(stream.since({5, 2}).what == replay::kind::unknown);
  CHECK(stream.since({5, 1}).what == replay::kind::events);
}

// The laws of an output policy (written at the top of bashexec/output.hpp),
// checked against every shipped policy with random chunk sizes, plus the
// tail_spill laws of DESIGN.md contract 5 and 6.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <bashexec/detail/spill_directory.hpp>
#include <bashexec/output/head_tail.hpp>
#include <bashexec/output/tail_spill.hpp>
#include <bashexec/output/unbounded.hpp>

#include "executor_test_support.hpp"

using namespace bashexec;

static_assert(output_policy<tail_spill>);
static_assert(output_policy<head_tail>);
static_assert(output_policy<unbounded>);

namespace {

struct fixture {
  test_support::temp_dir parent;
  detail::spill_directory spills{parent.path(), std::uint64_t{1} << 32, false};
};

/// Checks one slice against the stream it claims to come from.
void check_slice(const output_slice& slice, const std::string& stream, std::uint64_t offset) {
  REQUIRE(slice.begin >= offset);
  REQUIRE(slice.begin + slice.bytes.size() <= stream.size());
  // Compared as a bool: the bytes are binary and would garble the report.
  const bool bytes_are_the_stream_at_begin =
      slice.bytes == stream.substr(static_cast<std::size_t>(slice.begin), slice.bytes.size());
  CAPTURE(offset, slice.begin, slice.bytes.size(), stream.size());
  CHECK(bytes_are_the_stream_at_begin);
  CHECK(slice.lossy == (slice.begin > offset));  // lossy exactly when there is a gap
}

}  // namespace

TEMPLATE_TEST_CASE("output laws: total counts every byte, incremental reads never repeat, finish is honest",
                   "[output][laws][contract-5][contract-6]", tail_spill, head_tail, unbounded) {
  const std::size_t cap = GENERATE(1, 2, 7, 64, 1000);
  const unsigned seed = GENERATE(1u, 2u, 3u);
  CAPTURE(cap, seed, TestType::name);
  fixture f;
  typename TestType::collector c(cap, f.spills, output_stream::out);
  std::mt19937 gen(seed * 7919u + static_cast<unsigned>(cap));
  std::uniform_int_distribution<std::size_t> chunk(0, cap * 3 + 5);
  std::bernoulli_distribution read_now(0.3);

  std::string stream;
  std::uint64_t offset = 0;
  std::string read_back;  // concatenation of what non-repeating reads returned
  bool saw_gap = false;
  for (int round = 0; round < 60; ++round) {
    const std::string piece = test_support::random_bytes(chunk(gen), gen());
    c.append(piece.data(), piece.size());
    stream += piece;
    REQUIRE(c.total() == stream.size());

    const output_slice at_end = c.since(c.total());
    CHECK(at_end.bytes.empty());
    CHECK_FALSE(at_end.lossy);

    if (read_now(gen)) {
      // Read until caught up (a policy may serve a gap on a second read).
      for (int reads = 0;; ++reads) {
        REQUIRE(reads < 4);
        const output_slice slice = c.since(offset);
        check_slice(slice, stream, offset);
        saw_gap = saw_gap || slice.begin > offset;
        read_back += slice.bytes;
        offset = slice.begin + slice.bytes.size();
        if (offset == stream.size()) break;
      }
    }
  }
  for (int reads = 0; offset < stream.size(); ++reads) {
    REQUIRE(reads < 4);
    const output_slice last = c.since(offset);
    check_slice(last, stream, offset);
    saw_gap = saw_gap || last.begin > offset;
    read_back += last.bytes;
    offset = last.begin + last.bytes.size();
  }
  if (!saw_gap) CHECK((read_back == stream));  // no gap: the reads are the stream, once

  const collected_output done = c.finish();
  if (done.truncated)
    CHECK((done.text != stream));
  else
    CHECK((done.text == stream));
}

TEMPLATE_TEST_CASE("output laws: a stream that fits is whole, not truncated and never lossy",
                   "[output][laws][contract-5]", tail_spill, head_tail, unbounded) {
  fixture f;
  typename TestType::collector c(100, f.spills, output_stream::out);
  c.append("hello ", 6);
  c.append("", 0);
  c.append("world", 5);
  const output_slice all = c.since(0);
  CHECK(all.bytes == "hello world");
  CHECK_FALSE(all.lossy);
  CHECK(c.since(6).bytes == "world");
  CHECK_FALSE(c.spill_path().has_value());
  const collected_output done = c.finish();
  CHECK(done.text == "hello world");
  CHECK_FALSE(done.truncated);
  CHECK_FALSE(done.spill_path.has_value());
}

TEST_CASE("contract 5: tail_spill keeps exactly the last cap bytes and spills the whole stream",
          "[output][tail_spill][contract-5]") {
  const std::size_t cap = GENERATE(1, 3, 64, 4096, 64000);
  CAPTURE(cap);
  fixture f;
  tail_spill::collector c(cap, f.spills, output_stream::out);
  std::mt19937 gen(static_cast<unsigned>(cap));
  std::uniform_int_distribution<std::size_t> chunk(0, std::max<std::size_t>(cap * 2, 10));
  std::string stream;
  while (stream.size() < cap * 5 + 100) {
    const std::string piece = test_support::random_bytes(chunk(gen), gen());
    c.append(piece.data(), piece.size());
    stream += piece;
    const std::size_t held = std::min(stream.size(), cap);
    // Law: the in-memory window is the last `cap` bytes, whatever the chunking.
    const output_slice window = c.since(0);
    REQUIRE((window.bytes == stream.substr(stream.size() - held)));
    REQUIRE(window.begin == stream.size() - held);
    // Law: lossy exactly when the requested start slid out of the window.
    CHECK(window.lossy == (stream.size() > cap));
    const std::uint64_t window_begin = stream.size() - held;
    CHECK_FALSE(c.since(window_begin).lossy);
    if (window_begin > 0) CHECK(c.since(window_begin - 1).lossy);
    REQUIRE(c.spill_path().has_value() == (stream.size() > cap));
  }
  const collected_output done = c.finish();
  CHECK((done.text == stream.substr(stream.size() - cap)));
  CHECK(done.truncated);
  REQUIRE(done.spill_path.has_value());
  CHECK((test_support::slurp(*done.spill_path) == stream));
}

TEST_CASE("contract 5: a spill file is 0600 in a 0700 private directory with an unpredictable name",
          "[output][tail_spill][contract-5]") {
  fixture f;
  tail_spill::collector a(4, f.spills, output_stream::out), b(4, f.spills, output_stream::err);
  a.append("0123456789", 10);
  b.append("0123456789", 10);
  const auto pa = a.finish().spill_path, pb = b.finish().spill_path;
  REQUIRE(pa.has_value());
  REQUIRE(pb.has_value());
  CHECK(pa->parent_path() == f.spills.path());
  CHECK(pa->parent_path().parent_path() == f.parent.path());
  CHECK(pa->filename() != pb->filename());
  CHECK(pa->filename().string().size() >= 32);  // 128 random bits in hex
  // Named by stream, so a bare path tells them apart (contract 20).
  CHECK_THAT(pa->filename().string(), Catch::StartsWith("spill-") && Catch::EndsWith("-stdout"));
  CHECK_THAT(pb->filename().string(), Catch::StartsWith("spill-") && Catch::EndsWith("-stderr"));
  struct stat file {}, dir {};
  REQUIRE(::lstat(pa->c_str(), &file) == 0);
  REQUIRE(::lstat(f.spills.path().c_str(), &dir) == 0);
  CHECK(S_ISREG(file.st_mode));
  CHECK((file.st_mode & 07777) == 0600);
  CHECK(S_ISDIR(dir.st_mode));
  CHECK((dir.st_mode & 07777) == 0700);
  CHECK(file.st_uid == ::geteuid());
}

TEST_CASE("contract 5: the spill directory is removed with its owner unless kept", "[output][contract-5]") {
  test_support::temp_dir parent;
  std::filesystem::path dir;
  const bool keep = GENERATE(false, true);
  {
    detail::spill_directory spills(parent.path(), 1 << 20, keep);
    tail_spill::collector c(2, spills, output_stream::out);
    c.append("abc", 3);
    (void)c.finish();
    dir = spills.path();
    REQUIRE(std::filesystem::is_directory(dir));
  }
  CHECK(std::filesystem::exists(dir) == keep);
}

TEST_CASE("head_tail keeps the opening and the closing bytes with a marker between",
          "[output][head_tail][contract-5]") {
  fixture f;
  head_tail::collector c(10, f.spills, output_stream::out);
  std::string stream;
  for (char ch = 'a'; ch <= 'z'; ++ch) stream += ch;
  c.append(stream.data(), stream.size());
  const collected_output done = c.finish();
  CHECK(done.truncated);
  CHECK(done.text == "abcde\n[... 16 bytes omitted ...]\nvwxyz");
  REQUIRE(done.spill_path.has_value());
  CHECK(test_support::slurp(*done.spill_path) == stream);
}

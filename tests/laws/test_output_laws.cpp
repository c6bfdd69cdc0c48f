// The laws of an output policy (bashexec/laws/output.hpp, written at the top
// of bashexec/output.hpp), checked against every shipped policy with random
// chunk sizes, plus the tail_spill laws of docs/contract.md item 5 and 6.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <bashexec/spill_directory.hpp>
#include <bashexec/output/head_tail.hpp>
#include <bashexec/output/tail_spill.hpp>
#include <bashexec/output/unbounded.hpp>
#include <bashexec/laws/output.hpp>

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

/// An output policy that serves the last byte again on every read: the
/// negative control the laws must catch.
struct repeats_a_byte {
  static constexpr std::string_view name = "repeats_a_byte";
  class collector : public unbounded::collector {
   public:
    using unbounded::collector::collector;
    output_slice since(std::uint64_t offset) const {
      return unbounded::collector::since(offset > 0 ? offset - 1 : offset);
    }
  };
};

}  // namespace

TEMPLATE_TEST_CASE(
    "output laws: total counts every byte, incremental reads never repeat, finish is honest, a stream that fits is "
    "whole (contract 5, 6)",
    "[output][laws][contract-5][contract-6]", tail_spill, head_tail, unbounded) {
  test_support::temp_dir scratch;
  const laws::report report = laws::check_output_laws<TestType>(scratch.path());
  for (const auto& violation : report.violations) FAIL_CHECK(violation);
  CHECK(report.passed());
}

TEST_CASE("output laws: a policy whose reads repeat a byte breaks them (the laws' negative control)",
          "[output][laws]") {
  static_assert(output_policy<repeats_a_byte>);
  test_support::temp_dir scratch;
  const laws::report report = laws::check_output_laws<repeats_a_byte>(scratch.path());
  REQUIRE_FALSE(report.violations.empty());
  CHECK_THAT(report.violations.front(), Catch::Contains("repeat"));
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

// Fuzz target: every output policy (bashexec/output/*.hpp) against a
// reference model — the whole stream as one std::string.
//
// The input picks the policy, the cap, the spill budget and a sequence of
// operations: append a chunk, read from a random offset, read on from a
// reader's cursor. Properties, after every operation (the laws of
// bashexec/output.hpp, mirrored from tests/laws/test_output_laws.cpp):
//   - total() is the number of bytes appended;
//   - since(o) starts at or after o, its bytes are the stream's bytes at its
//     start byte for byte, and it is lossy exactly when it starts after o;
//     since(total()) is empty and not lossy;
//   - per policy: tail_spill holds exactly the last cap bytes, unbounded
//     everything, head_tail serves every head byte from where it was asked;
//   - a reader advancing by what it got never sees a byte twice, and without
//     a gap it sees the stream;
//   - finish() is the model's text (tail, head + marker + tail, or all) and
//     truncated exactly when bytes were dropped; a spill file, when one is
//     named, holds the whole stream byte-exact and is named by its stream
//     (`…-stdout`, `…-stderr`), and with a budget the stream fits in it is
//     always named.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>

#include <fuzzer/FuzzedDataProvider.h>

#include <fmt/format.h>

#include <bashexec/spill_directory.hpp>
#include <bashexec/output/head_tail.hpp>
#include <bashexec/output/tail_spill.hpp>
#include <bashexec/output/unbounded.hpp>

#include "fuzz_support.hpp"

using namespace bashexec;

namespace {

std::string slurp(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The laws every policy obeys for one slice asked from `offset`.
void check_slice(const output_slice& slice, const std::string& stream, std::uint64_t offset) {
  if (offset >= stream.size()) {
    FUZZ_CHECK(slice.bytes.empty());
    FUZZ_CHECK(!slice.lossy);
    return;
  }
  FUZZ_CHECK(slice.begin >= offset);
  FUZZ_CHECK(slice.begin + slice.bytes.size() <= stream.size());
  FUZZ_CHECK(std::string_view(stream).substr(static_cast<std::size_t>(slice.begin), slice.bytes.size()) ==
             slice.bytes);
  FUZZ_CHECK(slice.lossy == (slice.begin > offset));
}

template <class Policy>
void check_policy_slice(const output_slice& slice, const std::string& stream, std::uint64_t offset,
                        std::size_t cap) {
  check_slice(slice, stream, offset);
  if (offset >= stream.size()) return;
  const std::uint64_t total = stream.size();
  if constexpr (std::is_same_v<Policy, unbounded>) {
    FUZZ_CHECK(slice.begin == offset);
    FUZZ_CHECK(slice.begin + slice.bytes.size() == total);
  } else if constexpr (std::is_same_v<Policy, tail_spill>) {
    // Exactly the last `cap` bytes are held.
    const std::uint64_t window_begin = total > cap ? total - cap : 0;
    FUZZ_CHECK(slice.begin == std::max(offset, window_begin));
    FUZZ_CHECK(slice.begin + slice.bytes.size() == total);
  } else {
    // head_tail: the head (the first cap/2 bytes) is always there.
    const std::uint64_t head = std::min<std::uint64_t>(cap / 2, total);
    if (offset < head) FUZZ_CHECK(slice.begin == offset && slice.bytes.size() >= head - offset);
  }
}

template <class Policy>
void run(FuzzedDataProvider& in, std::size_t cap) {
  // A budget the stream may or may not fit in (one collector per directory,
  // so the stream alone is charged against it).
  const bool small_budget = in.ConsumeBool();
  const std::uint64_t budget = small_budget ? in.ConsumeIntegralInRange<std::uint64_t>(0, 4096) : std::uint64_t{1} << 40;
  detail::spill_directory spills(fuzz_support::scratch(), budget, false);
  const output_stream which = in.ConsumeBool() ? output_stream::err : output_stream::out;
  typename Policy::collector collector(cap, spills, which);

  std::string stream;
  std::uint64_t cursor = 0;
  std::string read_back;
  bool gap = false;
  while (in.remaining_bytes() > 0) {
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
      case 1: {  // append a chunk
        const std::string chunk = in.ConsumeRandomLengthString(cap * 3 + 16);
        collector.append(chunk.data(), chunk.size());
        stream += chunk;
        break;
      }
      case 2: {  // read from anywhere, even past the end
        const auto offset = in.ConsumeIntegralInRange<std::uint64_t>(0, stream.size() + 2);
        check_policy_slice<Policy>(collector.since(offset), stream, offset, cap);
        break;
      }
      case 3: {  // a reader catching up (a policy may serve a gap on a second read)
        for (int reads = 0; cursor < stream.size(); ++reads) {
          FUZZ_CHECK(reads < 4);
          const output_slice slice = collector.since(cursor);
          check_policy_slice<Policy>(slice, stream, cursor, cap);
          gap = gap || slice.begin > cursor;
          read_back += slice.bytes;
          cursor = slice.begin + slice.bytes.size();
        }
        break;
      }
    }
    FUZZ_CHECK(collector.total() == stream.size());
    const output_slice at_end = collector.since(collector.total());
    FUZZ_CHECK(at_end.bytes.empty() && !at_end.lossy && at_end.begin == stream.size());
  }
  if (!gap) FUZZ_CHECK(read_back == stream.substr(0, static_cast<std::size_t>(cursor)));

  const collected_output done = collector.finish();
  const std::size_t total = stream.size();
  // When the policy opened a spill file, and whether the stream fit the budget.
  std::size_t spill_cap = cap;
  if constexpr (std::is_same_v<Policy, head_tail>) spill_cap = cap - cap / 2;
  const bool spilled = !std::is_same_v<Policy, unbounded> && total > spill_cap;
  if (done.spill_path) {
    FUZZ_CHECK(spilled);
    FUZZ_CHECK(slurp(*done.spill_path) == stream);  // the whole stream, byte-exact
    const std::string file = done.spill_path->filename().string();
    const std::string suffix = "-" + std::string(to_string(which));
    FUZZ_CHECK(file.size() > suffix.size() && file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0);
  } else {
    FUZZ_CHECK(!spilled || total > budget);  // withheld only when over the budget
  }
  FUZZ_CHECK(collector.spill_path() == done.spill_path);

  if constexpr (std::is_same_v<Policy, unbounded>) {
    FUZZ_CHECK(done.text == stream && !done.truncated);
  } else if constexpr (std::is_same_v<Policy, tail_spill>) {
    FUZZ_CHECK(done.truncated == (total > cap));
    FUZZ_CHECK(done.text == stream.substr(total - std::min(total, cap)));
  } else {
    FUZZ_CHECK(done.truncated == (total > cap));
    if (!done.truncated) {
      FUZZ_CHECK(done.text == stream);
    } else {
      const std::size_t head = cap / 2, tail = cap - cap / 2;
      FUZZ_CHECK(done.text == fmt::format("{}\n[... {} bytes omitted ...]\n{}", stream.substr(0, head),
                                          total - head - tail, stream.substr(total - tail)));
    }
  }
  // Not truncated: the text is the whole stream. (Truncated texts were
  // compared with their exact expected form above; "truncated implies
  // different" is not a law, since a stream may spell out the marker.)
  if (!done.truncated) FUZZ_CHECK(done.text == stream);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const int policy = in.ConsumeIntegralInRange<int>(0, 2);
  // Small caps reach the ring's wrap-around and the head/tail seam quickly.
  const std::size_t cap = in.ConsumeIntegralInRange<std::size_t>(1, 300);
  switch (policy) {
    case 0: run<tail_spill>(in, cap); break;
    case 1: run<head_tail>(in, cap); break;
    default: run<unbounded>(in, cap); break;
  }
  return 0;
}

// laws/output: the laws every output policy obeys (written at the top of
// output.hpp), as a function a policy's author runs against their own type:
//   auto report = bashexec::laws::check_output_laws<my_policy>();
//   if (!report.passed()) …print report.violations…
// The shipped policies pass it (tests/laws/test_output_laws.cpp); so must a new
// one (docs/extending.md). Random chunk sizes, several caps and seeds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include "bashexec/spill_directory.hpp"
#include "bashexec/laws/report.hpp"
#include "bashexec/output.hpp"

namespace bashexec::laws {

namespace detail {

/// What is wrong with one slice read from `offset` of `stream`; empty when
/// nothing is. Bytes are compared, never printed (they are binary).
inline std::string slice_violation(const output_slice& slice, std::string_view stream, std::uint64_t offset) {
  if (slice.begin < offset)
    return fmt::format("since({}) began at {}, before the offset asked for (a byte repeats)", offset, slice.begin);
  if (slice.begin + slice.bytes.size() > stream.size())
    return fmt::format("since({}) served bytes past the {} appended", offset, stream.size());
  if (stream.substr(static_cast<std::size_t>(slice.begin), slice.bytes.size()) != slice.bytes)
    return fmt::format("since({}) served bytes that are not the stream's at {}", offset, slice.begin);
  if (slice.lossy != (slice.begin > offset))
    return fmt::format("since({}) began at {} but said lossy = {} (lossy exactly when there is a gap)", offset,
                       slice.begin, slice.lossy);
  return {};
}

/// One random run: appends of random sizes, reads at random moments, each
/// read caught up to the end. The first broken law, or empty.
template <class Policy>
std::string random_run(std::size_t cap, unsigned seed, bashexec::spill_directory& spills) {
  typename Policy::collector c(cap, spills, output_stream::out);
  std::mt19937 gen(seed * 7919u + static_cast<unsigned>(cap));
  std::uniform_int_distribution<std::size_t> chunk(0, cap * 3 + 5);
  std::bernoulli_distribution read_now(0.3);
  std::string stream;
  std::uint64_t offset = 0;
  std::string read_back;  // what the non-repeating reads returned, in order
  bool saw_gap = false;
  // Reads until caught up; a policy may serve a gap on a second read.
  auto catch_up = [&]() -> std::string {
    for (int reads = 0; offset < stream.size(); ++reads) {
      if (reads == 4) return fmt::format("four reads from {} did not reach the end at {}", offset, stream.size());
      const output_slice slice = c.since(offset);
      if (auto wrong = slice_violation(slice, stream, offset); !wrong.empty()) return wrong;
      saw_gap = saw_gap || slice.begin > offset;
      read_back += slice.bytes;
      offset = slice.begin + slice.bytes.size();
    }
    return {};
  };
  for (int round = 0; round < 60; ++round) {
    std::string piece(chunk(gen), '\0');
    for (auto& byte : piece) byte = static_cast<char>(gen() & 0xff);
    c.append(piece.data(), piece.size());
    stream += piece;
    if (c.total() != stream.size())
      return fmt::format("total() is {} after {} bytes were appended", c.total(), stream.size());
    const output_slice at_end = c.since(c.total());
    if (!at_end.bytes.empty() || at_end.lossy) return "since(total()) is not empty and exact";
    if (read_now(gen))
      if (auto wrong = catch_up(); !wrong.empty()) return wrong;
  }
  if (auto wrong = catch_up(); !wrong.empty()) return wrong;
  if (!saw_gap && read_back != stream) return "reads without a gap are not the stream, once";
  const collected_output done = c.finish();
  if (done.truncated == (done.text == stream))
    return fmt::format("finish() says truncated = {} of a text that {} the whole stream", done.truncated,
                       done.text == stream ? "is" : "is not");
  return {};
}

}  // namespace detail

/// Checks `Policy` against the output laws; spill files go to a private
/// directory under `scratch`, removed afterwards.
template <class Policy>
  requires output_policy<Policy>
report check_output_laws(const std::filesystem::path& scratch = "/var/tmp") {
  report result;
  bashexec::spill_directory spills(scratch, std::uint64_t{1} << 32, false);
  for (std::size_t cap : {1, 2, 7, 64, 1000})
    for (unsigned seed : {1u, 2u, 3u})
      if (auto wrong = detail::random_run<Policy>(cap, seed, spills); !wrong.empty())
        result.violations.push_back(fmt::format("{} (cap {}, seed {}): {}", Policy::name, cap, seed, wrong));

  // A stream that fits is whole, not truncated, never lossy, never spilled.
  typename Policy::collector c(100, spills, output_stream::out);
  c.append("hello ", 6);
  c.append("", 0);
  c.append("world", 5);
  const output_slice all = c.since(0);
  const output_slice tail = c.since(6);
  const bool spilled = c.spill_path().has_value();
  const collected_output done = c.finish();
  if (all.bytes != "hello world" || all.lossy || tail.bytes != "world" || spilled || done.text != "hello world" ||
      done.truncated || done.spill_path)
    result.violations.push_back(
        fmt::format("{}: a stream that fits its cap is not served whole, exact and unspilled", Policy::name));
  return result;
}

}  // namespace bashexec::laws

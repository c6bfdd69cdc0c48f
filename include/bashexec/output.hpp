// output: what a type must provide to be an output policy — how one stream
// of a child is collected, bounded and served to incremental reads.
//
// Minimal complete definition of an output policy `O`:
//   static constexpr std::string_view name;
//   class O::collector {
//     collector(std::size_t cap, spill_directory&, output_stream);
//     void append(const char* data, std::size_t size);  // bytes as they arrive
//     std::uint64_t total() const;                      // whole-stream bytes seen
//     output_slice since(std::uint64_t offset) const;   // bytes from a stream offset
//     std::optional<std::filesystem::path> spill_path() const;
//     collected_output finish();                        // once, at end of stream
//   };
// Optional: `std::uint64_t held_bytes() const` — the memory the collector
// holds (its buffers' capacity); the executor's retention policy counts it
// for settled tasks. A policy without it is counted by `total()`.
// Laws every shipped policy passes (tests/laws/test_output_laws.cpp): `total()`
// counts every appended byte; `since(total())` is empty and not lossy;
// consecutive `since` calls that advance by what they returned never repeat
// a byte; `finish().truncated` is false exactly when the text is the whole
// stream; a spill file is named by its stream (`…-stdout`, `…-stderr`), so a
// path alone tells the streams apart.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "bashexec/detail/text/enum_names.hpp"
#include "bashexec/result.hpp"
#include "bashexec/spill_directory.hpp"

namespace bashexec {

/// Which of a child's streams a collector collects.
enum class output_stream { out, err };

/// `stdout` or `stderr`: the suffix of the stream's spill file name.
template <>
struct detail::enum_names<output_stream> {
  static constexpr enum_table<output_stream, 2> table{{{output_stream::out, "stdout"}, {output_stream::err, "stderr"}}};
};

/// Bytes served from a stream offset. `lossy` means some bytes between the
/// requested offset and `begin` are no longer in memory.
struct output_slice {
  std::string bytes;
  std::uint64_t begin = 0;
  bool lossy = false;
};

template <class O>
concept output_policy =
    requires { { O::name } -> std::convertible_to<std::string_view>; typename O::collector; } &&
    std::constructible_from<typename O::collector, std::size_t, spill_directory&, output_stream> &&
    requires(typename O::collector& c, const typename O::collector& cc, const char* data,
             std::size_t size, std::uint64_t offset) {
      c.append(data, size);
      { cc.total() } -> std::same_as<std::uint64_t>;
      { cc.since(offset) } -> std::same_as<output_slice>;
      { cc.spill_path() } -> std::same_as<std::optional<std::filesystem::path>>;
      { c.finish() } -> std::same_as<collected_output>;
    };

namespace detail {

/// What a collector holds in memory, for the retention policy.
template <class Collector>
std::uint64_t held_bytes(const Collector& collector) {
  if constexpr (requires { { collector.held_bytes() } -> std::convertible_to<std::uint64_t>; })
    return collector.held_bytes();
  else
    return collector.total();
}

}  // namespace detail

}  // namespace bashexec

// output/head_tail: keep the first half of the cap and the last half, with a
// one-line marker between them; spill the whole stream like tail_spill. For
// commands whose opening lines matter (compiler errors, test headers).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include "bashexec/output/tail_spill.hpp"

namespace bashexec {

struct head_tail {
  static constexpr std::string_view name = "head_tail";

  /// A tail_spill collector (its cap the second half) that also keeps the
  /// first half of the cap from the start of the stream.
  class collector : private tail_spill::collector {
    using tail = tail_spill::collector;

   public:
    collector(std::size_t cap, detail::spill_directory& spills, output_stream stream)
        : tail(cap - cap / 2, spills, stream), head_cap_(cap / 2) {}

    void append(const char* data, std::size_t size) {
      if (head_.size() < head_cap_) {
        const std::size_t take = std::min(size, head_cap_ - head_.size());
        head_.append(data, take);
      }
      tail::append(data, size);
    }

    using tail::spill_path;
    using tail::total;

    output_slice since(std::uint64_t offset) const {
      if (offset < head_.size()) {
        // Serve the head, then the tail only when it continues the head
        // without a gap: a slice is contiguous from `begin`, so a gap is left
        // for the next read, which reports it as lossy.
        output_slice rest = tail::since(head_.size());
        output_slice slice{head_.substr(static_cast<std::size_t>(offset)), offset, false};
        if (!rest.lossy) slice.bytes += rest.bytes;
        return slice;
      }
      return tail::since(offset);
    }

    std::uint64_t held_bytes() const { return head_.capacity() + tail::held_bytes(); }

    collected_output finish() {
      head_.shrink_to_fit();
      const std::uint64_t total = tail::total();
      collected_output kept = tail::finish();
      if (total <= head_.size() + kept.text.size()) {
        // Head and tail overlap or touch: the stream is whole.
        const std::size_t overlap = static_cast<std::size_t>(head_.size() + kept.text.size() - total);
        return {head_ + kept.text.substr(overlap), false, kept.spill_path};
      }
      const std::uint64_t omitted = total - head_.size() - kept.text.size();
      return {fmt::format("{}\n[... {} bytes omitted ...]\n{}", head_, omitted, kept.text), true, kept.spill_path};
    }

   private:
    std::size_t head_cap_;
    std::string head_;
  };
};

}  // namespace bashexec

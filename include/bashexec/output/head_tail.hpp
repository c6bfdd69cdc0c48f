// output/head_tail: keep the first half of the cap and the last half, with a
// one-line marker between them; spill the whole stream like tail_spill. For
// commands whose opening lines matter (compiler errors, test headers).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "bashexec/output/tail_spill.hpp"

namespace bashexec {

struct head_tail {
  static constexpr std::string_view name = "head_tail";

  class collector {
   public:
    collector(std::size_t cap, detail::spill_directory& spills, output_stream stream)
        : head_cap_(cap / 2), tail_(cap - cap / 2, spills, stream) {}

    void append(const char* data, std::size_t size) {
      if (head_.size() < head_cap_) {
        const std::size_t take = std::min(size, head_cap_ - head_.size());
        head_.append(data, take);
      }
      tail_.append(data, size);
    }

    std::uint64_t total() const { return tail_.total(); }

    output_slice since(std::uint64_t offset) const {
      if (offset < head_.size()) {
        // Serve the head, then the tail only when it continues the head
        // without a gap: a slice is contiguous from `begin`, so a gap is left
        // for the next read, which reports it as lossy.
        output_slice rest = tail_.since(head_.size());
        output_slice slice{head_.substr(static_cast<std::size_t>(offset)), offset, false};
        if (!rest.lossy) slice.bytes += rest.bytes;
        return slice;
      }
      return tail_.since(offset);
    }

    std::optional<std::filesystem::path> spill_path() const { return tail_.spill_path(); }

    collected_output finish() {
      const std::uint64_t total = tail_.total();
      collected_output tail = tail_.finish();
      if (total <= head_.size() + tail.text.size()) {
        // Head and tail overlap or touch: the stream is whole.
        const std::size_t overlap = static_cast<std::size_t>(head_.size() + tail.text.size() - total);
        return {head_ + tail.text.substr(overlap), false, tail.spill_path};
      }
      const std::uint64_t omitted = total - head_.size() - tail.text.size();
      return {fmt::format("{}\n[... {} bytes omitted ...]\n{}", head_, omitted, tail.text), true,
              tail.spill_path};
    }

   private:
    std::size_t head_cap_;
    std::string head_;
    tail_spill::collector tail_;
  };
};

}  // namespace bashexec

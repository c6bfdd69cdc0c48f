// output/tail_spill: the default output policy — keep the last `cap` bytes in
// memory; on the first overflow, spill the whole stream to a file (contract 5).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "bashexec/detail/spill_file.hpp"
#include "bashexec/output.hpp"

namespace bashexec {

struct tail_spill {
  static constexpr std::string_view name = "tail_spill";

  class collector {
   public:
    collector(std::size_t cap, detail::spill_directory& spills, output_stream stream)
        : cap_(cap), spills_(&spills), stream_(stream) {}

    void append(const char* data, std::size_t size) {
      if (size == 0) return;
      if (!spilled_ && total_ + size > cap_) {
        // First overflow: everything kept so far is the whole stream yet.
        spilled_ = true;
        spill_.open(*spills_, to_string(stream_));
        spill_.write(ring_.data(), ring_.size());
      }
      if (spilled_) spill_.write(data, size);
      keep_tail(data, size);
      total_ += size;
    }

    std::uint64_t total() const { return total_; }

    output_slice since(std::uint64_t offset) const {
      const std::uint64_t held = ring_.size();
      const std::uint64_t window_begin = total_ - held;
      output_slice slice;
      if (offset >= total_) {
        slice.begin = total_;
        return slice;
      }
      slice.lossy = offset < window_begin;
      slice.begin = std::max(offset, window_begin);
      slice.bytes = tail_from(static_cast<std::size_t>(slice.begin - window_begin));
      return slice;
    }

    std::optional<std::filesystem::path> spill_path() const { return spill_.path(); }

    collected_output finish() {
      spill_.close();
      return {tail_from(0), spilled_, spill_.path()};
    }

   private:
    // The tail lives in `ring_`: a plain string until it first fills, then a
    // ring whose oldest byte is at `head_`. No allocation past `cap` bytes.
    void keep_tail(const char* data, std::size_t size) {
      if (size >= cap_) {
        ring_.assign(data + size - cap_, cap_);
        head_ = 0;
        return;
      }
      if (ring_.size() < cap_) {
        const std::size_t room = cap_ - ring_.size();
        const std::size_t take = std::min(room, size);
        ring_.append(data, take);
        data += take;
        size -= take;
        if (size == 0) return;
      }
      while (size > 0) {
        const std::size_t chunk = std::min(size, cap_ - head_);
        ring_.replace(head_, chunk, data, chunk);
        head_ = (head_ + chunk) % cap_;
        data += chunk;
        size -= chunk;
      }
    }

    // Bytes of the held tail from logical position `skip` (0 = oldest held).
    std::string tail_from(std::size_t skip) const {
      const std::size_t held = ring_.size();
      std::string out;
      if (skip >= held) return out;
      out.reserve(held - skip);
      const std::size_t start = (head_ + skip) % std::max<std::size_t>(held, 1);
      if (head_ == 0 || held < cap_) {
        out.append(ring_, skip, held - skip);
      } else if (start >= head_) {
        out.append(ring_, start, held - start);
        out.append(ring_, 0, head_);
      } else {
        out.append(ring_, start, head_ - start);
      }
      return out;
    }

    std::size_t cap_;
    detail::spill_directory* spills_;
    output_stream stream_;
    std::string ring_;
    std::size_t head_ = 0;
    std::uint64_t total_ = 0;
    bool spilled_ = false;
    detail::spill_file spill_;
  };
};

}  // namespace bashexec

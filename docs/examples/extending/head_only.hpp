// head_only: an out-of-tree output policy (docs/extending.md). It keeps the
// first `cap` bytes of a stream — where a compiler puts its first error —
// and counts the rest without keeping it. No spill file. It uses only
// bashexec's installed headers and passes the output laws.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <bashexec/output.hpp>

namespace example {

struct head_only {
  static constexpr std::string_view name = "head_only";

  class collector {
   public:
    // The executor hands every collector its cap, the spill directory (unused
    // here: nothing is spilled) and which stream it collects.
    collector(std::size_t cap, bashexec::spill_directory&, bashexec::output_stream) : cap_(cap) {}

    void append(const char* data, std::size_t size) {
      const std::size_t room = cap_ - std::min(cap_, head_.size());
      head_.append(data, std::min(room, size));
      total_ += size;
    }

    std::uint64_t total() const { return total_; }

    // Bytes from `offset`: what is kept of them, or — past the head — an
    // empty slice at the end of the stream, `lossy` because bytes were skipped.
    bashexec::output_slice since(std::uint64_t offset) const {
      if (offset < head_.size())
        return {.bytes = head_.substr(static_cast<std::size_t>(offset)), .begin = offset, .lossy = false};
      return {.bytes = {}, .begin = total_, .lossy = total_ > offset};
    }

    std::optional<std::filesystem::path> spill_path() const { return std::nullopt; }

    bashexec::collected_output finish() {
      bashexec::collected_output done;
      done.text = head_;
      done.truncated = total_ > head_.size();
      return done;
    }

   private:
    std::size_t cap_;
    std::string head_;
    std::uint64_t total_ = 0;
  };
};

static_assert(bashexec::output_policy<head_only>);

}  // namespace example

// output/unbounded: keep the whole stream in memory, never spill. Only for
// trusted callers whose commands' output size is known to be small.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "bashexec/output.hpp"

namespace bashexec {

struct unbounded {
  static constexpr std::string_view name = "unbounded";

  class collector {
   public:
    collector(std::size_t /*cap: ignored*/, spill_directory& /*unused*/, output_stream /*unused*/) {}

    void append(const char* data, std::size_t size) { text_.append(data, size); }
    std::uint64_t total() const { return text_.size(); }
    output_slice since(std::uint64_t offset) const {
      if (offset >= text_.size()) return {{}, text_.size(), false};
      return {text_.substr(static_cast<std::size_t>(offset)), offset, false};
    }
    std::optional<std::filesystem::path> spill_path() const { return std::nullopt; }
    std::uint64_t held_bytes() const { return text_.capacity(); }
    collected_output finish() { return {text_, false, std::nullopt}; }

   private:
    std::string text_;
  };
};

}  // namespace bashexec

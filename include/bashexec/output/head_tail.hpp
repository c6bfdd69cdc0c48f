// output/head_tail: keep the first half of the cap and the last half, with a
// one-line marker between them; spill the whole stream like tail_spill. For
// commands whose opening lines matter (compiler errors, test headers).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "bashexec/detail/linkage.hpp"
#include "bashexec/output/tail_spill.hpp"

namespace bashexec {

struct head_tail {
  static constexpr std::string_view name = "head_tail";

  /// A tail_spill collector (its cap the second half) that also keeps the
  /// first half of the cap from the start of the stream.
  class collector : private tail_spill::collector {
    using tail = tail_spill::collector;

   public:
    collector(std::size_t cap, spill_directory& spills, output_stream stream)
        : tail(cap - cap / 2, spills, stream), head_cap_(cap / 2) {}

    void append(const char* data, std::size_t size);

    using tail::spill_path;
    using tail::total;

    output_slice since(std::uint64_t offset) const;

    std::uint64_t held_bytes() const { return head_.capacity() + tail::held_bytes(); }

    collected_output finish();

   private:
    std::size_t head_cap_;
    std::string head_;
  };
};

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/output/impl/head_tail.ipp"
#endif

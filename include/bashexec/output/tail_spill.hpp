// output/tail_spill: the default output policy — keep the last `cap` bytes in
// memory; on the first overflow, spill the whole stream to a file (contract 5).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "bashexec/detail/linkage.hpp"
#include "bashexec/output.hpp"
#include "bashexec/output/detail/spill_file.hpp"

namespace bashexec {

struct tail_spill {
  static constexpr std::string_view name = "tail_spill";

  class collector {
   public:
    collector(std::size_t cap, spill_directory& spills, output_stream stream)
        : cap_(cap), spills_(&spills), stream_(stream) {}

    void append(const char* data, std::size_t size);

    std::uint64_t total() const { return total_; }

    output_slice since(std::uint64_t offset) const;

    std::optional<std::filesystem::path> spill_path() const { return spill_.path(); }

    std::uint64_t held_bytes() const { return ring_.capacity(); }

    collected_output finish();

   private:
    // The tail lives in `ring_`: a plain string until it first fills, then a
    // ring whose oldest byte is at `head_`. No allocation past `cap` bytes.
    void keep_tail(const char* data, std::size_t size);

    // Bytes of the held tail from logical position `skip` (0 = oldest held).
    std::string tail_from(std::size_t skip) const;

    std::size_t cap_;
    spill_directory* spills_;
    output_stream stream_;
    std::string ring_;
    std::size_t head_ = 0;
    std::uint64_t total_ = 0;
    bool spilled_ = false;
    detail::spill_file spill_;
  };
};

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/output/impl/tail_spill.ipp"
#endif

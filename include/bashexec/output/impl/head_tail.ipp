// The bodies of output/head_tail.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/output/head_tail.hpp"

#include <algorithm>

#include <fmt/core.h>

namespace bashexec {

BASHEXEC_DECL void head_tail::collector::append(const char* data, std::size_t size) {
  if (head_.size() < head_cap_) {
    const std::size_t take = std::min(size, head_cap_ - head_.size());
    head_.append(data, take);
  }
  tail::append(data, size);
}

BASHEXEC_DECL output_slice head_tail::collector::since(std::uint64_t offset) const {
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

BASHEXEC_DECL collected_output head_tail::collector::finish() {
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

}  // namespace bashexec

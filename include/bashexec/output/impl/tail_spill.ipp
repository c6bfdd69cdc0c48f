// The bodies of output/tail_spill.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/output/tail_spill.hpp"

#include <algorithm>

namespace bashexec {

BASHEXEC_DECL void tail_spill::collector::append(const char* data, std::size_t size) {
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

BASHEXEC_DECL output_slice tail_spill::collector::since(std::uint64_t offset) const {
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

BASHEXEC_DECL collected_output tail_spill::collector::finish() {
  spill_.close();
  // Growth may have left the ring up to twice the cap; a settled task
  // keeps its tail for a long time, so keep only what it holds.
  ring_.shrink_to_fit();
  return {tail_from(0), spilled_, spill_.path()};
}

BASHEXEC_DECL void tail_spill::collector::keep_tail(const char* data, std::size_t size) {
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

BASHEXEC_DECL std::string tail_spill::collector::tail_from(std::size_t skip) const {
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

}  // namespace bashexec

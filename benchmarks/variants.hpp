// variants: alternative output-collection designs measured next to the
// shipped policies, so the choice between them is made by numbers.
//
//   chunk_tail         an output policy (plugs into basic_executor): the tail
//                      is a list of the appended chunks, whole chunks dropped
//                      from the front once the rest still covers the cap.
//   read_ring_loop     the shipped read path outside the executor: read()
//                      into a 64 KiB scratch buffer, tail_spill::collector.
//   read_no_ring_loop  read() + write() into the spill file, but no tail copy
//                      once spilled (the tail is pread from the file at the end):
//                      isolates what the ring-buffer memcpy costs.
//   splice_loop        once spilled, splice() pipe → spill file (no user-space
//                      copy at all); the tail is pread from the file at the end.
// Each loop can run on a default (64 KiB) pipe or one enlarged to 1 MiB with
// F_SETPIPE_SZ.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <bashexec/output/detail/spill_file.hpp>
#include <bashexec/output.hpp>
#include <bashexec/output/tail_spill.hpp>

namespace bench {

struct chunk_tail {
  static constexpr std::string_view name = "chunk_tail";

  class collector {
   public:
    collector(std::size_t cap, bashexec::detail::spill_directory& spills, bashexec::output_stream stream)
        : cap_(cap), spills_(&spills), stream_(stream) {}

    void append(const char* data, std::size_t size) {
      if (size == 0) return;
      if (!spilled_ && total_ + size > cap_) {
        spilled_ = true;
        spill_.open(*spills_, bashexec::to_string(stream_));
        for (const auto& c : chunks_) spill_.write(c.data(), c.size());
      }
      if (spilled_) spill_.write(data, size);
      total_ += size;
      if (size >= cap_) {
        chunks_.clear();
        chunks_.emplace_back(data + size - cap_, cap_);
        held_ = cap_;
        return;
      }
      chunks_.emplace_back(data, size);
      held_ += size;
      while (held_ - chunks_.front().size() >= cap_) {
        held_ -= chunks_.front().size();
        chunks_.pop_front();
      }
    }

    std::uint64_t total() const { return total_; }

    bashexec::output_slice since(std::uint64_t offset) const {
      const std::uint64_t kept = std::min<std::uint64_t>(held_, cap_);
      const std::uint64_t window_begin = total_ - kept;
      bashexec::output_slice slice;
      if (offset >= total_) {
        slice.begin = total_;
        return slice;
      }
      slice.lossy = offset < window_begin;
      slice.begin = std::max(offset, window_begin);
      slice.bytes = tail(static_cast<std::size_t>(total_ - slice.begin));
      return slice;
    }

    std::optional<std::filesystem::path> spill_path() const { return spill_.path(); }

    bashexec::collected_output finish() {
      spill_.close();
      return {tail(std::min<std::size_t>(held_, cap_)), spilled_, spill_.path()};
    }

   private:
    // The last `n` bytes held.
    std::string tail(std::size_t n) const {
      std::string out;
      out.reserve(n);
      std::size_t skip = held_ - n;
      for (const auto& c : chunks_) {
        if (skip >= c.size()) {
          skip -= c.size();
          continue;
        }
        out.append(c, skip);
        skip = 0;
      }
      return out;
    }

    std::size_t cap_;
    bashexec::detail::spill_directory* spills_;
    bashexec::output_stream stream_;
    std::deque<std::string> chunks_;
    std::size_t held_ = 0;
    std::uint64_t total_ = 0;
    bool spilled_ = false;
    bashexec::detail::spill_file spill_;
  };
};

static_assert(bashexec::output_policy<chunk_tail>);

/// What every loop variant reports, checked by the benchmark.
struct loop_outcome {
  std::uint64_t total = 0;
  std::string tail;
  bool spilled = false;
};

/// Shared read-side helpers for the loop variants: a spill file opened for
/// writing (the library's spill directory) plus a read descriptor for the
/// final pread of the tail.
class raw_spill {
 public:
  explicit raw_spill(bashexec::detail::spill_directory& dir) {
    auto [fd, path] = dir.create_file("stdout");
    write_ = std::move(fd);
    read_ = bashexec::detail::unique_fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  }
  int fd() const { return write_.get(); }
  void write(const char* data, std::size_t size) {
    while (size > 0) {
      ssize_t n = ::write(write_.get(), data, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error("spill write failed");
      }
      data += n;
      size -= static_cast<std::size_t>(n);
    }
  }
  std::string tail(std::uint64_t total, std::size_t cap) const {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(total, cap));
    std::string out(n, '\0');
    ssize_t got = ::pread(read_.get(), out.data(), n, static_cast<off_t>(total - n));
    out.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
    return out;
  }

 private:
  bashexec::detail::unique_fd write_, read_;
};

/// The shipped read path: read() 64 KiB at a time into tail_spill::collector.
class read_ring_loop {
 public:
  read_ring_loop(std::size_t cap, bashexec::detail::spill_directory& dir)
      : c_(cap, dir, bashexec::output_stream::out) {}
  // >0 bytes taken, 0 at EOF, <0 with errno.
  ssize_t take(int fd, char* scratch, std::size_t size) {
    ssize_t n = ::read(fd, scratch, size);
    if (n > 0) c_.append(scratch, static_cast<std::size_t>(n));
    return n;
  }
  loop_outcome finish() {
    auto out = c_.finish();
    return {c_.total(), std::move(out.text), out.truncated};
  }

 private:
  bashexec::tail_spill::collector c_;
};

/// Before the first overflow the bytes are kept in memory; after it, either
/// write() (no tail copy) or splice() moves them into the spill file.
template <bool UseSplice>
class spill_loop {
 public:
  spill_loop(std::size_t cap, bashexec::detail::spill_directory& dir) : cap_(cap), dir_(&dir) {}
  ssize_t take(int fd, char* scratch, std::size_t size) {
    if constexpr (UseSplice) {
      if (spill_) {
        ssize_t n = ::splice(fd, nullptr, spill_->fd(), nullptr, 1 << 20, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n > 0) total_ += static_cast<std::uint64_t>(n);
        return n;
      }
    }
    ssize_t n = ::read(fd, scratch, size);
    if (n <= 0) return n;
    const auto got = static_cast<std::size_t>(n);
    if (!spill_ && total_ + got > cap_) {
      spill_.emplace(*dir_);
      spill_->write(head_.data(), head_.size());
      std::string().swap(head_);
    }
    if (spill_)
      spill_->write(scratch, got);
    else
      head_.append(scratch, got);
    total_ += got;
    return n;
  }
  loop_outcome finish() {
    if (!spill_) return {total_, head_, false};
    return {total_, spill_->tail(total_, cap_), true};
  }

 private:
  std::size_t cap_;
  bashexec::detail::spill_directory* dir_;
  std::string head_;
  std::optional<raw_spill> spill_;
  std::uint64_t total_ = 0;
};

using read_no_ring_loop = spill_loop<false>;
using splice_loop = spill_loop<true>;

/// Drives one loop variant over a non-blocking pipe the way child_run does:
/// poll, then at most 16 takes per wake-up.
template <class Loop>
void drive_loop(int fd, Loop& loop) {
  std::vector<char> scratch(1 << 16);
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0 && errno != EINTR) throw std::runtime_error("poll failed");
    for (int round = 0; round < 16; ++round) {
      ssize_t n = loop.take(fd, scratch.data(), scratch.size());
      if (n > 0) {
        if (static_cast<std::size_t>(n) < scratch.size()) break;  // drained, as child_run does
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n < 0) throw std::runtime_error(std::string("take failed: ") + std::strerror(errno));
      return;  // EOF
    }
  }
}

}  // namespace bench

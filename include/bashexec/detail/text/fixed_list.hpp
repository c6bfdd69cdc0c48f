// detail/text/fixed_list: a list with a fixed capacity and no allocation, for
// what a spawned child walks between fork and exec (it must not allocate):
// a plan's resource limits and its pre-exec hooks.
#pragma once

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string_view>

#include <fmt/core.h>

namespace bashexec::detail {

template <class T, std::size_t N>
class fixed_list {
 public:
  static constexpr std::size_t capacity = N;

  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  const T* begin() const noexcept { return items_.data(); }
  const T* end() const noexcept { return items_.data() + size_; }
  const T& operator[](std::size_t i) const noexcept { return items_[i]; }

 protected:
  /// Appends `item`; std::length_error naming `field` when the list is full.
  void push(const T& item, std::string_view field) {
    if (size_ == N) throw std::length_error(fmt::format("{}: more than {} entries", field, N));
    items_[size_++] = item;
  }

 private:
  std::array<T, N> items_{};
  std::size_t size_ = 0;
};

}  // namespace bashexec::detail

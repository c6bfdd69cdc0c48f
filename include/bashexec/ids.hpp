// ids: the strong string types `task_id` and `owner_token`. They are built
// explicitly from a string, compare and hash, format with {fmt}, and never
// convert into one another.
#pragma once

#include <compare>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/core.h>

#include "bashexec/detail/text/text_formatter.hpp"

namespace bashexec {

/// A string with a distinct type per `Tag`, so an owner token can never be
/// passed where a task id is expected.
template <class Tag>
class strong_string {
 public:
  strong_string() = default;
  explicit strong_string(std::string value) : value_(std::move(value)) {}
  explicit strong_string(std::string_view value) : value_(value) {}
  explicit strong_string(const char* value) : value_(value) {}

  const std::string& value() const noexcept { return value_; }

  friend bool operator==(const strong_string&, const strong_string&) = default;
  friend auto operator<=>(const strong_string&, const strong_string&) = default;

 private:
  std::string value_;
};

struct task_id_tag {};
struct owner_token_tag {};

/// Background task id: `bash-1`, `bash-2`, … per executor.
using task_id = strong_string<task_id_tag>;
/// Opaque owner of a background task (a session id); stored verbatim.
using owner_token = strong_string<owner_token_tag>;

}  // namespace bashexec

template <class Tag>
struct std::hash<bashexec::strong_string<Tag>> {
  std::size_t operator()(const bashexec::strong_string<Tag>& s) const noexcept {
    return std::hash<std::string>{}(s.value());
  }
};

template <class Tag>
struct fmt::formatter<bashexec::strong_string<Tag>> : bashexec::detail::text_formatter {
  auto format(const bashexec::strong_string<Tag>& s, format_context& ctx) const { return format_text(s.value(), ctx); }
};

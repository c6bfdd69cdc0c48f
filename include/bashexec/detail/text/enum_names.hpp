// detail/text/enum_names: one table of {value, spelling} pairs per vocabulary enum
// (`detail::enum_names<E>::table`, specialised next to the enum), the generic
// `to_string` every such enum gets from it, and the lookups each enum's
// parse / *_from is written with: a spelling is stated once, and both
// directions agree.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include <fmt/core.h>

#include "bashexec/detail/text/text_formatter.hpp"

namespace bashexec::detail {

template <class Enum>
struct enum_name {
  Enum value;
  std::string_view name;
};

template <class Enum, std::size_t N>
using enum_table = std::array<enum_name<Enum>, N>;

/// Specialised for each vocabulary enum with `static constexpr enum_table<Enum, N>
/// table`, every value in its documented order.
template <class Enum>
struct enum_names;

template <class Enum>
concept named_enum = std::is_enum_v<Enum> && requires { enum_names<Enum>::table; };

/// The values of `table`, in its order.
template <class Enum, std::size_t N>
constexpr std::array<Enum, N> enum_values(const enum_table<Enum, N>& table) noexcept {
  std::array<Enum, N> values{};
  for (std::size_t i = 0; i < N; ++i) values[i] = table[i].value;
  return values;
}

/// The spelling of `value`; "unknown" for a value outside the table (a cast).
template <class Enum, std::size_t N>
constexpr std::string_view name_of(const enum_table<Enum, N>& table, Enum value) noexcept {
  for (const auto& entry : table)
    if (entry.value == value) return entry.name;
  return "unknown";
}

/// The value spelled exactly `text`; empty for any other text.
template <class Enum, std::size_t N>
constexpr std::optional<Enum> value_named(const enum_table<Enum, N>& table, std::string_view text) noexcept {
  for (const auto& entry : table)
    if (entry.name == text) return entry.value;
  return std::nullopt;
}

/// The value spelled `text`, else std::invalid_argument naming `field`, what
/// was expected (`what`) and every accepted spelling:
///   `<field>: unknown <what> "<text>" (a, b or c)`.
template <class Enum, std::size_t N>
Enum value_named_or_throw(const enum_table<Enum, N>& table, std::string_view text, std::string_view field,
                          std::string_view what) {
  if (auto value = value_named(table, text)) return *value;
  std::string accepted;
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) accepted += i + 1 == N ? " or " : ", ";
    accepted += table[i].name;
  }
  throw std::invalid_argument(fmt::format("{}: unknown {} \"{}\" ({})", field, what, text, accepted));
}

/// Formats an enum as its `to_string` spelling: the base of each enum's
/// fmt::formatter specialisation.
template <class Enum>
struct enum_formatter : text_formatter {
  auto format(Enum value, fmt::format_context& ctx) const { return format_text(to_string(value), ctx); }
};

}  // namespace bashexec::detail

namespace bashexec {

/// The spelling of a vocabulary enum's value (its `enum_names` table).
template <detail::named_enum Enum>
constexpr std::string_view to_string(Enum value) noexcept {
  return detail::name_of(detail::enum_names<Enum>::table, value);
}

}  // namespace bashexec

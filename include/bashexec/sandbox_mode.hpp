// sandbox_mode: the file-effect ladder (read-only < workspace-write <
// danger-full-access) and the enforcement level a confinement can promise.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include <fmt/core.h>

#include "bashexec/detail/text/enum_names.hpp"

namespace bashexec {

/// What a confined command may do to files (docs/contract.md item 13).
enum class sandbox_mode { read_only, workspace_write, danger_full_access };

template <>
struct detail::enum_names<sandbox_mode> {
  static constexpr enum_table<sandbox_mode, 3> table{{{sandbox_mode::read_only, "read-only"},
                                                     {sandbox_mode::workspace_write, "workspace-write"},
                                                     {sandbox_mode::danger_full_access, "danger-full-access"}}};
};

/// Every mode, narrowest first. The order is the ladder escalation climbs.
inline constexpr std::array sandbox_modes = detail::enum_values(detail::enum_names<sandbox_mode>::table);

/// True when `a` grants strictly more file effects than `b`.
constexpr bool is_wider(sandbox_mode a, sandbox_mode b) noexcept {
  return static_cast<int>(a) > static_cast<int>(b);
}

/// Parses the spelling `to_string` produces; anything else is empty.
constexpr std::optional<sandbox_mode> parse_sandbox_mode(std::string_view text) noexcept {
  return detail::value_named(detail::enum_names<sandbox_mode>::table, text);
}

/// Parses a mode from configuration text; an unknown spelling throws
/// std::invalid_argument naming `field` and the accepted spellings.
inline sandbox_mode sandbox_mode_from(std::string_view text, std::string_view field = "mode") {
  return detail::value_named_or_throw(detail::enum_names<sandbox_mode>::table, text, field, "sandbox mode");
}

/// How completely a confinement governs the file effects its mode promises
/// to deny: `partial` when the kernel cannot govern some of them (for example
/// truncation before Landlock ABI 3).
enum class enforcement { full, partial };

template <>
struct detail::enum_names<enforcement> {
  static constexpr enum_table<enforcement, 2> table{{{enforcement::full, "full"}, {enforcement::partial, "partial"}}};
};

}  // namespace bashexec

template <>
struct fmt::formatter<bashexec::sandbox_mode> : bashexec::detail::enum_formatter<bashexec::sandbox_mode> {};

template <>
struct fmt::formatter<bashexec::enforcement> : bashexec::detail::enum_formatter<bashexec::enforcement> {};

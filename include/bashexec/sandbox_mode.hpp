// sandbox_mode: the file-effect ladder (read-only < workspace-write <
// danger-full-access) and the enforcement level a confinement can promise.
#pragma once

#include <array>
#include <optional>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

namespace bashexec {

/// What a confined command may do to files (docs/contract.md item 13).
enum class sandbox_mode { read_only, workspace_write, danger_full_access };

/// Every mode, narrowest first. The order is the ladder escalation climbs.
inline constexpr std::array sandbox_modes{sandbox_mode::read_only, sandbox_mode::workspace_write,
                                          sandbox_mode::danger_full_access};

/// True when `a` grants strictly more file effects than `b`.
constexpr bool is_wider(sandbox_mode a, sandbox_mode b) noexcept {
  return static_cast<int>(a) > static_cast<int>(b);
}

constexpr std::string_view to_string(sandbox_mode mode) noexcept {
  switch (mode) {
    case sandbox_mode::read_only: return "read-only";
    case sandbox_mode::workspace_write: return "workspace-write";
    case sandbox_mode::danger_full_access: return "danger-full-access";
  }
  return "unknown";
}

/// Parses the spelling `to_string` produces; anything else is empty.
constexpr std::optional<sandbox_mode> parse_sandbox_mode(std::string_view text) noexcept {
  for (auto mode : sandbox_modes)
    if (to_string(mode) == text) return mode;
  return std::nullopt;
}

/// Parses a mode from configuration text; an unknown spelling throws
/// std::invalid_argument naming `field` and the accepted spellings.
inline sandbox_mode sandbox_mode_from(std::string_view text, std::string_view field = "mode") {
  if (auto mode = parse_sandbox_mode(text)) return *mode;
  throw std::invalid_argument(fmt::format(
      "{}: unknown sandbox mode \"{}\" (read-only, workspace-write or danger-full-access)", field, text));
}

/// How completely a confinement governs the file effects its mode promises
/// to deny: `partial` when the kernel cannot govern some of them (for example
/// truncation before Landlock ABI 3).
enum class enforcement { full, partial };

constexpr std::string_view to_string(enforcement level) noexcept {
  return level == enforcement::full ? "full" : "partial";
}

}  // namespace bashexec

template <>
struct fmt::formatter<bashexec::sandbox_mode> : fmt::formatter<std::string_view> {
  auto format(bashexec::sandbox_mode mode, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(bashexec::to_string(mode), ctx);
  }
};

template <>
struct fmt::formatter<bashexec::enforcement> : fmt::formatter<std::string_view> {
  auto format(bashexec::enforcement level, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(bashexec::to_string(level), ctx);
  }
};

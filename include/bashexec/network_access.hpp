// network_access: the optional network knob (docs/contract.md "Beyond": network
// confinement as its own knob, orthogonal to the file modes). It applies to
// every confined call (read-only, workspace-write) and never to
// danger-full-access, which stays wholly unconfined.
#pragma once

#include <array>
#include <optional>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

namespace bashexec {

/// What a confined command may reach over the network.
///   full      no network confinement (the default: file modes alone).
///   loopback  nothing outside the sandbox; the command may use a loopback of
///             its own (a test server it starts itself). The HOST's loopback
///             services are outside the sandbox and unreachable. Under
///             Landlock this is enforced as `none` (stricter than asked).
///   none      nothing outside the sandbox. Under bwrap the command still has
///             a private loopback that reaches only the sandbox itself.
/// Local IPC through named unix sockets is not network and is governed by
/// neither setting (docs/security.md, "Network").
enum class network_access { full, loopback, none };

/// Every setting, widest first.
inline constexpr std::array network_accesses{network_access::full, network_access::loopback, network_access::none};

constexpr std::string_view to_string(network_access access) noexcept {
  switch (access) {
    case network_access::full: return "full";
    case network_access::loopback: return "loopback";
    case network_access::none: return "none";
  }
  return "unknown";
}

/// Parses the spelling `to_string` produces; anything else is empty.
constexpr std::optional<network_access> parse_network_access(std::string_view text) noexcept {
  for (auto access : network_accesses)
    if (to_string(access) == text) return access;
  return std::nullopt;
}

/// Parses a setting from configuration text; an unknown spelling throws
/// std::invalid_argument naming `field` and the accepted spellings.
inline network_access network_access_from(std::string_view text, std::string_view field = "network") {
  if (auto access = parse_network_access(text)) return *access;
  throw std::invalid_argument(
      fmt::format("{}: unknown network access \"{}\" (full, loopback or none)", field, text));
}

/// Whether `access` asks a confinement to govern the network at all.
constexpr bool confines_network(network_access access) noexcept { return access != network_access::full; }

}  // namespace bashexec

template <>
struct fmt::formatter<bashexec::network_access> : fmt::formatter<std::string_view> {
  auto format(bashexec::network_access access, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(bashexec::to_string(access), ctx);
  }
};

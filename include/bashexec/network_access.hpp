// network_access: the optional network knob (docs/contract.md "Beyond": network
// confinement as its own knob, orthogonal to the file modes). It applies to
// every confined call (read-only, workspace-write) and never to
// danger-full-access, which stays wholly unconfined.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include <fmt/core.h>

#include "bashexec/detail/text/enum_names.hpp"

namespace bashexec {

/// What a confined command may reach over the network.
///   full      no network confinement (the default: file modes alone).
///   loopback  nothing outside the sandbox; the command may use a loopback of
///             its own (a test server it starts itself). The HOST's loopback
///             services are outside the sandbox and unreachable. Under
///             Landlock this is enforced as `none` (stricter than asked).
///   none      nothing outside the sandbox. Under bwrap the command still has
///             a private loopback that reaches only the sandbox itself.
///   allowlist the domains `sandbox.egress` allows, through the executor's
///             egress proxy and nothing else: the command runs in a network
///             namespace of its own whose only endpoint is the proxy's
///             listener, 127.0.0.1:3128, with HTTP_PROXY/HTTPS_PROXY/
///             ALL_PROXY pointing there (docs/network.md). Needs a spawn
///             policy with pre-exec hooks and an egress gateway
///             (`sandbox.gateway`); never degrades to `full`.
/// Local IPC through named unix sockets is not network and is governed by
/// neither setting (docs/security.md, "Network").
enum class network_access { full, loopback, none, allowlist };

template <>
struct detail::enum_names<network_access> {
  static constexpr enum_table<network_access, 4> table{{{network_access::full, "full"},
                                                       {network_access::loopback, "loopback"},
                                                       {network_access::none, "none"},
                                                       {network_access::allowlist, "allowlist"}}};
};

/// Every setting, widest first.
inline constexpr std::array network_accesses = detail::enum_values(detail::enum_names<network_access>::table);

/// Parses the spelling `to_string` produces; anything else is empty.
constexpr std::optional<network_access> parse_network_access(std::string_view text) noexcept {
  return detail::value_named(detail::enum_names<network_access>::table, text);
}

/// Parses a setting from configuration text; an unknown spelling throws
/// std::invalid_argument naming `field` and the accepted spellings.
inline network_access network_access_from(std::string_view text, std::string_view field = "network") {
  return detail::value_named_or_throw(detail::enum_names<network_access>::table, text, field, "network access");
}

/// Whether `access` asks a confinement to govern the network at all.
constexpr bool confines_network(network_access access) noexcept { return access != network_access::full; }

/// Whether the confinement itself cuts the command off (`loopback`, `none`:
/// bwrap's --unshare-net, Landlock's socket filter). Under `allowlist` the
/// executor makes the namespace, before the confinement's own steps, and
/// the confinement leaves the network alone.
constexpr bool isolates_network(network_access access) noexcept {
  return access == network_access::loopback || access == network_access::none;
}

/// Whether the command reaches the network through the egress proxy only.
constexpr bool proxies_network(network_access access) noexcept { return access == network_access::allowlist; }

}  // namespace bashexec

template <>
struct fmt::formatter<bashexec::network_access> : bashexec::detail::enum_formatter<bashexec::network_access> {};

// network_policy: what an egress proxy lets a confined command reach by name
// (docs/contract.md "Beyond", network by name; docs/network.md), and the
// report of what it tried. Vocabulary only: the pure decisions are in
// network/decision.hpp, the proxy that enforces them in
// network/egress_proxy.hpp, the light interface the executor holds in
// egress.hpp.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "bashexec/detail/text/enum_names.hpp"
#include "bashexec/detail/text/ip_address.hpp"
#include "bashexec/detail/text/domain_name.hpp"

namespace bashexec {

/// Bounds on what one proxy spends. Every value must be positive.
struct network_limits {
  /// Client connections served at once; one more is answered at once with a
  /// refusal (reason `limit`) instead of waiting.
  std::size_t max_connections = 64;
  /// Bound on connecting to the upstream (all its vetted addresses together).
  std::chrono::milliseconds connect_timeout{10000};
  /// A connection with no byte either way for this long is closed.
  std::chrono::milliseconds idle_timeout{60000};
  /// Bound on one client connection's whole life, busy or not.
  std::chrono::milliseconds total_timeout{3600000};
  /// Bound on one HTTP request's header; a longer one is answered 431.
  std::size_t max_header_bytes = 16384;
  /// Attempts a report keeps; later ones are only counted (attempts_dropped).
  std::size_t max_attempts_recorded = 256;

  /// Throws std::invalid_argument naming the field (`network.limits.<field>`).
  void validate() const {
    auto positive = [](std::string_view field, auto value) {
      if (value <= 0) throw std::invalid_argument(fmt::format("network.limits.{}: must be positive, got 0", field));
    };
    positive("max_connections", static_cast<long long>(max_connections));
    positive("max_header_bytes", static_cast<long long>(max_header_bytes));
    positive("max_attempts_recorded", static_cast<long long>(max_attempts_recorded));
    auto positive_ms = [](std::string_view field, std::chrono::milliseconds value) {
      if (value.count() <= 0)
        throw std::invalid_argument(
            fmt::format("network.limits.{}: must be positive, got {} ms", field, value.count()));
    };
    positive_ms("connect_timeout", connect_timeout);
    positive_ms("idle_timeout", idle_timeout);
    positive_ms("total_timeout", total_timeout);
  }
};

/// Which requests may leave.
///   all        every HTTP method, CONNECT tunnels and SOCKS5.
///   read-only  plain HTTP GET, HEAD and OPTIONS only. CONNECT and SOCKS5
///              are refused: a tunnel is opaque (TLS inside), so a tunnel
///              could carry any method. read-only therefore means no HTTPS
///              at all.
enum class network_methods { all, read_only };

template <>
struct detail::enum_names<network_methods> {
  static constexpr enum_table<network_methods, 2> table{
      {{network_methods::all, "all"}, {network_methods::read_only, "read-only"}}};
};

/// Every setting, widest first.
inline constexpr std::array network_method_settings = detail::enum_values(detail::enum_names<network_methods>::table);

/// Parses the spelling `to_string` produces; anything else is empty.
constexpr std::optional<network_methods> parse_network_methods(std::string_view text) noexcept {
  return detail::value_named(detail::enum_names<network_methods>::table, text);
}

/// Parses a setting from configuration text; an unknown spelling throws
/// std::invalid_argument naming `field` and the accepted spellings.
inline network_methods network_methods_from(std::string_view text, std::string_view field = "network.methods") {
  return detail::value_named_or_throw(detail::enum_names<network_methods>::table, text, field, "network methods");
}

/// What the proxy lets through. A request leaves only when its host is
/// allowed, its method is, and the address it connects to is vetted:
///   - a name in denied_domains is refused, whatever allowed_domains says;
///   - else a name must match allowed_domains (detail/text/domain_name.hpp:
///     "*.example.com" matches strict subdomains, not example.com);
///   - an IP-literal host must lie inside allowed_ranges;
///   - every address a name resolves to that is special (loopback, private,
///     link-local — the cloud metadata 169.254.169.254 —, CGNAT, multicast,
///     unspecified, broadcast; network/decision.hpp) is dropped unless it
///     lies inside allowed_ranges; the proxy connects only to an address it
///     vetted, never resolving twice (DNS rebinding).
struct network_policy {
  /// Names or `*.` wildcards (domain_pattern), matched case-insensitively.
  std::vector<std::string> allowed_domains;
  /// The same shapes; a match refuses (reason denied_domain) even when an
  /// allowed entry also matches.
  std::vector<std::string> denied_domains;
  /// CIDR ranges, IPv4 or IPv6 ("10.0.0.0/8", "fd00::/8"; a bare address is
  /// a range of one): addresses admitted although special, and the only
  /// addresses an IP-literal host may name.
  std::vector<std::string> allowed_ranges;
  network_methods methods = network_methods::all;
  /// Name -> IP literal, consulted before DNS (exact name, any case). The
  /// address is vetted like a resolved one.
  std::map<std::string, std::string> host_map;
  /// Whether names host_map lacks are resolved through the system resolver;
  /// false: only host_map resolves (tests, fully pinned deployments).
  bool system_dns = true;
  network_limits limits;

  /// Throws std::invalid_argument naming the offending field exactly:
  ///   network.allowed_domains[2]: "*x.com" is not a domain name or *.wildcard
  void validate() const {
    auto check_domains = [](std::string_view field, const std::vector<std::string>& entries) {
      for (std::size_t i = 0; i < entries.size(); ++i)
        if (!network::domain_pattern::parse(entries[i]))
          throw std::invalid_argument(
              fmt::format("network.{}[{}]: \"{}\" is not a domain name or *.wildcard", field, i, entries[i]));
    };
    check_domains("allowed_domains", allowed_domains);
    check_domains("denied_domains", denied_domains);
    for (std::size_t i = 0; i < allowed_ranges.size(); ++i)
      if (!network::address_range::parse(allowed_ranges[i]))
        throw std::invalid_argument(fmt::format(
            "network.allowed_ranges[{}]: \"{}\" is not a CIDR range (a.b.c.d/n or an IPv6 address/n)", i,
            allowed_ranges[i]));
    for (const auto& [name, literal] : host_map) {
      if (network::address::parse(name) || !network::canonical_domain(name))
        throw std::invalid_argument(fmt::format("network.host_map[\"{}\"]: the key is not a domain name", name));
      if (!network::address::parse(literal))
        throw std::invalid_argument(
            fmt::format("network.host_map[\"{}\"]: \"{}\" is not an IPv4 or IPv6 address", name, literal));
    }
    limits.validate();
  }
};

enum class network_decision { allowed, blocked };

template <>
struct detail::enum_names<network_decision> {
  static constexpr enum_table<network_decision, 2> table{
      {{network_decision::allowed, "allowed"}, {network_decision::blocked, "blocked"}}};
};

/// Why an attempt was blocked (`none` when it was not).
enum class network_block_reason {
  none,
  not_allowed,         // the name matches no allowed domain; an IP literal outside allowed_ranges
  denied_domain,       // the name matches a denied domain
  private_address,     // every address it resolves to (or the literal) is special and not ranged
  method_not_allowed,  // methods = read-only and this is not GET / HEAD / OPTIONS
  resolve_failed,      // the name resolves to nothing
  limit,               // max_connections, or max_header_bytes
  bad_request,         // not a request the proxy serves (origin-form, Host mismatch, bad SOCKS)
};

template <>
struct detail::enum_names<network_block_reason> {
  static constexpr enum_table<network_block_reason, 8> table{{
      {network_block_reason::none, "none"},
      {network_block_reason::not_allowed, "not_allowed"},
      {network_block_reason::denied_domain, "denied_domain"},
      {network_block_reason::private_address, "private_address"},
      {network_block_reason::method_not_allowed, "method_not_allowed"},
      {network_block_reason::resolve_failed, "resolve_failed"},
      {network_block_reason::limit, "limit"},
      {network_block_reason::bad_request, "bad_request"},
  }};
};

/// Parses the spelling `to_string` produces; anything else is empty.
constexpr std::optional<network_block_reason> parse_network_block_reason(std::string_view text) noexcept {
  return detail::value_named(detail::enum_names<network_block_reason>::table, text);
}

/// The reason in words, as the marker and the proxy's refusals say it
/// ("not in allowed domains"); empty for `none`.
constexpr std::string_view reason_phrase(network_block_reason reason) noexcept {
  switch (reason) {
    case network_block_reason::none: return "";
    case network_block_reason::not_allowed: return "not in allowed domains";
    case network_block_reason::denied_domain: return "denied domain";
    case network_block_reason::private_address: return "private address";
    case network_block_reason::method_not_allowed: return "method not allowed";
    case network_block_reason::resolve_failed: return "could not resolve";
    case network_block_reason::limit: return "limit reached";
    case network_block_reason::bad_request: return "bad request";
  }
  return "";
}

/// One request the proxy judged. Recorded once, when its request was parsed;
/// an allowed attempt's `address` and byte counts fill in as it proceeds,
/// and it turns blocked if resolution then refuses it (resolve_failed,
/// private_address). An upstream that cannot be connected to leaves the
/// attempt allowed with an empty address (the client got 502 / SOCKS 0x04).
struct network_attempt {
  std::string host;  // as the client named it (canonical for a name); empty if no request could be parsed
  std::uint16_t port = 0;
  std::string method;  // "CONNECT", "GET", ..., or "SOCKS"
  network_decision decision = network_decision::blocked;
  network_block_reason reason = network_block_reason::none;
  std::string address;  // the vetted address connected to, empty if none
  std::uint64_t bytes_up = 0;    // client -> upstream
  std::uint64_t bytes_down = 0;  // upstream -> client

  friend bool operator==(const network_attempt&, const network_attempt&) = default;
};

/// What one proxy saw, attempts in arrival order.
struct network_report {
  std::vector<network_attempt> attempts;
  /// Attempts past limits.max_attempts_recorded: judged, served or refused
  /// alike, but not kept.
  std::size_t attempts_dropped = 0;
};

/// The hosts a marker names before it only counts the rest.
inline constexpr std::size_t network_marker_hosts = 8;

/// One line for a command's output naming what was blocked, in order,
/// each host:port once (its first reason):
///   [network: blocked pypi.org:443 (not in allowed domains)]
///   [network: blocked a.test:443 (not in allowed domains), 10.0.0.1:80 (private address)]
/// after network_marker_hosts of them ", and N more"; an attempt whose
/// request could not be parsed is "a request". Empty when nothing was blocked.
inline std::string network_marker(const network_report& report) {
  std::vector<std::string> seen;
  std::string listed;
  std::size_t more = 0;
  for (const auto& attempt : report.attempts) {
    if (attempt.decision != network_decision::blocked) continue;
    std::string target;
    if (attempt.host.empty())
      target = "a request";
    else if (attempt.host.find(':') != std::string::npos)
      target = fmt::format("[{}]:{}", attempt.host, attempt.port);
    else
      target = fmt::format("{}:{}", attempt.host, attempt.port);
    bool repeated = false;
    for (const auto& earlier : seen) repeated = repeated || earlier == target;
    if (repeated) continue;
    seen.push_back(target);
    if (seen.size() > network_marker_hosts) {
      ++more;
      continue;
    }
    if (!listed.empty()) listed += ", ";
    listed += fmt::format("{} ({})", target, reason_phrase(attempt.reason));
  }
  if (seen.empty()) return {};
  if (more > 0) listed += fmt::format(", and {} more", more);
  return "[network: blocked " + listed + "]";
}

namespace detail {
/// The first field of `policy` that restricts what a proxy lets through
/// (its name under `sandbox.egress`), if any: what only `network =
/// allowlist` enforces.
inline std::optional<std::string_view> egress_restriction(const network_policy& policy) {
  if (!policy.allowed_domains.empty()) return "allowed_domains";
  if (!policy.denied_domains.empty()) return "denied_domains";
  if (!policy.allowed_ranges.empty()) return "allowed_ranges";
  if (policy.methods != network_methods::all) return "methods";
  if (!policy.host_map.empty()) return "host_map";
  return std::nullopt;
}
}  // namespace detail

}  // namespace bashexec

template <>
struct fmt::formatter<bashexec::network_methods> : bashexec::detail::enum_formatter<bashexec::network_methods> {};
template <>
struct fmt::formatter<bashexec::network_decision> : bashexec::detail::enum_formatter<bashexec::network_decision> {};
template <>
struct fmt::formatter<bashexec::network_block_reason>
    : bashexec::detail::enum_formatter<bashexec::network_block_reason> {};

// network/decision: the egress policy's judgements as pure functions — no
// I/O, no resolver — so every rule is testable on its own and the proxy
// (network/egress_proxy.hpp) only sequences them: judge the request, then
// vet each address it resolves to, then connect to a vetted one only.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bashexec/detail/text/ip_address.hpp"
#include "bashexec/detail/text/domain_name.hpp"
#include "bashexec/network_policy.hpp"

namespace bashexec::network {

/// What the domain lists say about a name.
enum class domain_verdict { allowed, denied, not_allowed };

/// Judges `host` by denied_domains, then allowed_domains: a denied match
/// wins over an allowed one. A host that is not a domain name (an IP
/// literal, garbage) is never `allowed` by name.
inline domain_verdict judge_name(const network_policy& policy, std::string_view host) {
  auto name = canonical_domain(host);
  if (!name) return domain_verdict::not_allowed;
  auto listed = [&](const std::vector<std::string>& patterns) {
    for (const auto& text : patterns) {
      auto pattern = domain_pattern::parse(text);
      if (pattern && pattern->matches(*name)) return true;
    }
    return false;
  };
  if (listed(policy.denied_domains)) return domain_verdict::denied;
  if (listed(policy.allowed_domains)) return domain_verdict::allowed;
  return domain_verdict::not_allowed;
}

/// Whether `candidate` is an address no name should lead to unless the
/// operator ranged it: loopback (127/8, ::1), private (10/8, 172.16/12,
/// 192.168/16, fc00::/7), link-local (169.254/16 — the cloud metadata
/// service 169.254.169.254 —, fe80::/10), CGNAT 100.64/10, multicast
/// (224/4, ff00::/8), unspecified (0/8, ::), broadcast 255.255.255.255, and
/// reserved 240/4. An IPv4-mapped address (::ffff:a.b.c.d) is judged as its
/// IPv4 address.
inline bool address_is_special(const address& candidate) {
  static constexpr std::string_view special_ranges[] = {
      "0.0.0.0/8",  "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
      "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
      "::/128",     "::1/128",    "fc00::/7",      "fe80::/10",   "ff00::/8",
  };
  for (auto text : special_ranges)
    if (address_range::parse(text)->contains(candidate)) return true;
  return false;
}

/// Whether `candidate` lies inside one of policy.allowed_ranges.
inline bool address_in_allowed_ranges(const network_policy& policy, const address& candidate) {
  for (const auto& text : policy.allowed_ranges) {
    auto range = address_range::parse(text);
    if (range && range->contains(candidate)) return true;
  }
  return false;
}

/// Whether the proxy may connect to `candidate`, an address a name resolved
/// to: not special, or special but inside an allowed range.
inline bool address_allowed(const network_policy& policy, const address& candidate) {
  return !address_is_special(candidate) || address_in_allowed_ranges(policy, candidate);
}

/// Whether `method` ("GET", "CONNECT", "SOCKS", ...; exact, upper case as on
/// the wire) may be used. read-only admits GET, HEAD and OPTIONS on plain
/// HTTP only: CONNECT and SOCKS carry opaque bytes.
inline bool method_allowed(const network_policy& policy, std::string_view method) {
  if (policy.methods == network_methods::all) return true;
  return method == "GET" || method == "HEAD" || method == "OPTIONS";
}

/// The judgement of a request before anything is resolved: none (go on and
/// resolve) or why it is refused. The host is judged first — an IP literal
/// by allowed_ranges (outside them: private_address for a special address,
/// else not_allowed), a name by judge_name — then the method.
inline network_block_reason judge_request(const network_policy& policy, std::string_view method,
                                          std::string_view host) {
  if (auto literal = address::parse(host)) {
    if (!address_in_allowed_ranges(policy, *literal))
      return address_is_special(*literal) ? network_block_reason::private_address : network_block_reason::not_allowed;
  } else {
    switch (judge_name(policy, host)) {
      case domain_verdict::denied: return network_block_reason::denied_domain;
      case domain_verdict::not_allowed: return network_block_reason::not_allowed;
      case domain_verdict::allowed: break;
    }
  }
  if (!method_allowed(policy, method)) return network_block_reason::method_not_allowed;
  return network_block_reason::none;
}

/// The addresses of `resolved`, in order, the proxy may connect to.
/// None vetted: `reason` says why (resolve_failed for an empty input,
/// private_address when every address was special).
struct vetted_addresses {
  std::vector<address> addresses;
  network_block_reason reason = network_block_reason::none;
};

inline vetted_addresses vet_addresses(const network_policy& policy, std::span<const address> resolved) {
  vetted_addresses vetted;
  for (const auto& candidate : resolved)
    if (address_allowed(policy, candidate)) vetted.addresses.push_back(candidate);
  if (vetted.addresses.empty())
    vetted.reason = resolved.empty() ? network_block_reason::resolve_failed : network_block_reason::private_address;
  return vetted;
}

/// The host_map entry for `host` (exact name, any case, a trailing dot
/// ignored); empty when there is none.
inline std::optional<address> mapped_address(const network_policy& policy, std::string_view host) {
  auto name = canonical_domain(host);
  if (!name) return std::nullopt;
  for (const auto& [key, literal] : policy.host_map) {
    auto canonical_key = canonical_domain(key);
    if (canonical_key && *canonical_key == *name) return address::parse(literal);
  }
  return std::nullopt;
}

}  // namespace bashexec::network

// detail/text/ip_address: an IPv4 or IPv6 address and a CIDR range of them, parsed
// with inet_pton — the small vocabulary the egress policy is judged in
// (network/decision.hpp) without pulling Asio into network_policy.hpp.
// Hand-written on purpose: a range check is a masked compare of 4 or 16
// bytes, and the proxy converts to Asio's address only where it connects.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <arpa/inet.h>

namespace bashexec::network {

/// One IPv4 or IPv6 address, in network byte order. An IPv4 address keeps
/// its 4 bytes at the front of `bytes`; an IPv4-mapped IPv6 address
/// (::ffff:a.b.c.d) stays IPv6 here — `unmapped()` gives its IPv4 form.
struct address {
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes{};

  /// The literal `text` ("10.0.0.1", "::1", "fe80::1"; no brackets, no zone
  /// index, no port); empty for anything else.
  static std::optional<address> parse(std::string_view text) {
    // inet_pton needs a NUL-terminated string; the longest IPv6 text is 45 characters.
    if (text.empty() || text.size() > 45) return std::nullopt;
    char buffer[46];
    std::copy(text.begin(), text.end(), buffer);
    buffer[text.size()] = '\0';
    address parsed;
    if (::inet_pton(AF_INET, buffer, parsed.bytes.data()) == 1) return parsed;
    parsed.v6 = true;
    if (::inet_pton(AF_INET6, buffer, parsed.bytes.data()) == 1) return parsed;
    return std::nullopt;
  }

  /// The number of meaningful bytes: 4 or 16.
  std::size_t size() const noexcept { return v6 ? 16 : 4; }

  /// Whether this is ::ffff:a.b.c.d (an IPv4 address in IPv6 clothing).
  bool is_v4_mapped() const noexcept {
    if (!v6) return false;
    for (std::size_t i = 0; i < 10; ++i)
      if (bytes[i] != 0) return false;
    return bytes[10] == 0xff && bytes[11] == 0xff;
  }

  /// The IPv4 address an IPv4-mapped one stands for; any other address as is.
  /// Policy judges the unmapped form, so ::ffff:10.0.0.1 is 10.0.0.1.
  address unmapped() const noexcept {
    if (!is_v4_mapped()) return *this;
    address v4;
    std::copy(bytes.begin() + 12, bytes.end(), v4.bytes.begin());
    return v4;
  }

  /// The canonical text (inet_ntop): "10.0.0.1", "::1".
  std::string to_string() const {
    char buffer[INET6_ADDRSTRLEN];
    if (::inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buffer, sizeof buffer) == nullptr) return {};
    return buffer;
  }

  friend bool operator==(const address&, const address&) = default;
};

/// A CIDR range: the addresses whose first `prefix` bits equal `base`'s.
struct address_range {
  address base;
  unsigned prefix = 0;

  /// "10.0.0.0/8", "fc00::/7"; a bare address is the range of itself (/32 or
  /// /128). Bits of the base beyond the prefix are ignored ("10.1.2.3/8" is
  /// 10.0.0.0/8). Empty for anything else (a prefix over 32 for IPv4, over
  /// 128 for IPv6, a missing or signed number).
  static std::optional<address_range> parse(std::string_view text) {
    auto slash = text.find('/');
    auto base = address::parse(text.substr(0, slash));
    if (!base) return std::nullopt;
    unsigned bits = static_cast<unsigned>(base->size() * 8);
    if (slash == std::string_view::npos) return address_range{*base, bits};
    auto digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3) return std::nullopt;
    unsigned prefix = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      prefix = prefix * 10 + static_cast<unsigned>(c - '0');
    }
    if (prefix > bits) return std::nullopt;
    return address_range{*base, prefix};
  }

  /// Whether `candidate` lies inside. Both sides are compared in their
  /// unmapped form, so ::ffff:127.0.0.1 lies inside 127.0.0.0/8 and an
  /// IPv4 address never inside an IPv6 range (other than a mapped one).
  bool contains(const address& candidate) const noexcept {
    address want = base.unmapped();
    address have = candidate.unmapped();
    unsigned bits = prefix;
    if (base.is_v4_mapped()) bits = bits >= 96 ? bits - 96 : 0;
    if (want.v6 != have.v6) return false;
    std::size_t whole = bits / 8;
    for (std::size_t i = 0; i < whole; ++i)
      if (want.bytes[i] != have.bytes[i]) return false;
    unsigned rest = bits % 8;
    if (rest == 0) return true;
    auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
    return (want.bytes[whole] & mask) == (have.bytes[whole] & mask);
  }
};

}  // namespace bashexec::network

// detail/text/domain_name: what counts as a domain name in an egress policy, its
// canonical spelling, and the patterns allowed_domains / denied_domains
// hold (an exact name or a `*.` wildcard), so validation and matching agree.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace bashexec::network {

/// `name` lowercased with one trailing dot dropped, if it is a domain name:
/// dot-separated labels of ASCII letters, digits and hyphens, each 1-63
/// characters and neither starting nor ending with a hyphen, 253 characters
/// at most. Empty for anything else (an IP literal with a colon, an
/// underscore, an empty label, a non-ASCII byte). "1.2.3.4" has the shape of
/// a name; callers that care try `address::parse` first.
inline std::optional<std::string> canonical_domain(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  if (name.empty() || name.size() > 253) return std::nullopt;
  std::string canonical;
  canonical.reserve(name.size());
  std::size_t label = 0;
  char previous = '.';
  for (char c : name) {
    if (c == '.') {
      if (label == 0 || previous == '-') return std::nullopt;
      label = 0;
    } else {
      bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      bool digit = c >= '0' && c <= '9';
      if (!letter && !digit && c != '-') return std::nullopt;
      if (c == '-' && label == 0) return std::nullopt;
      if (++label > 63) return std::nullopt;
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    canonical += c;
    previous = c;
  }
  if (previous == '-') return std::nullopt;
  return canonical;
}

/// One entry of allowed_domains / denied_domains.
///   "example.com"    matches example.com only (any case, a trailing dot ignored).
///   "*.example.com"  matches every strict subdomain — a.example.com,
///                    a.b.example.com — and NOT example.com itself: list
///                    both to allow both.
/// A bare "*" is not a pattern: "every name" is not an allowlist.
struct domain_pattern {
  std::string name;  // canonical, without the "*."
  bool wildcard = false;

  /// Empty when `text` is neither a domain name nor `*.` plus one.
  static std::optional<domain_pattern> parse(std::string_view text) {
    bool wildcard = text.starts_with("*.");
    if (wildcard) text.remove_prefix(2);
    auto name = canonical_domain(text);
    if (!name) return std::nullopt;
    return domain_pattern{std::move(*name), wildcard};
  }

  /// Whether `host`, already canonical (canonical_domain), matches.
  bool matches(std::string_view host) const noexcept {
    if (!wildcard) return host == name;
    return host.size() > name.size() + 1 && host.ends_with(name) && host[host.size() - name.size() - 1] == '.';
  }
};

}  // namespace bashexec::network

// server/http_guard: who may talk to `bashexec mcp --http` — the admission
// rules of the Streamable HTTP transport (MCP 2025-11-25), each a pure
// function the transport applies to every request before the MCP layer sees
// it (docs/tool-protocol.md, "Over HTTP"):
//
//   - Host and Origin against allowlists (DNS rebinding: a web page that got
//     a name of its own resolved to 127.0.0.1 sends its own Host, and a
//     browser always sends its Origin). A missing Origin is a client that is
//     not a browser, and passes; a present one must be listed (else 403).
//   - A bearer token, compared in constant time (else 401), required when the
//     server listens on anything but the loopback.
//   - MCP-Protocol-Version: absent means 2025-03-26 (the transport's rule);
//     one the server does not speak is 400.
//   - Session ids: 128 random bits from getrandom(2) as 32 hex digits —
//     visible ASCII, as the transport requires, and unguessable; a presented
//     id of any other shape is no session of ours.
// Hand-written: Beast parses the request; these few comparisons are the
// policy, and no maintained library holds this policy.
#pragma once

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <arpa/inet.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/errors.hpp"
#include "bashexec/server/mcp_protocol.hpp"

namespace bashexec::server::http {

/// ASCII case-insensitive equality (host names and schemes are).
inline bool iequal(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

/// The Host values a server bound to `address:port` answers by default:
/// that address, and for a loopback bind also `localhost` and the other
/// loopback spelling. Operators add their own names (`--allow-host`).
inline std::vector<std::string> default_hosts(std::string_view address, std::uint16_t port) {
  const std::string p = std::to_string(port);
  std::vector<std::string> hosts;
  const bool v6 = address.find(':') != std::string_view::npos;
  hosts.push_back(v6 ? fmt::format("[{}]:{}", address, p) : fmt::format("{}:{}", address, p));
  if (address == "127.0.0.1" || address == "::1") {
    hosts.push_back("localhost:" + p);
    hosts.push_back(address == "::1" ? "127.0.0.1:" + p : "[::1]:" + p);
  }
  return hosts;
}

/// An IPv4 address in 127.0.0.0/8 or the IPv6 ::1 (either spelled as
/// inet_pton(3) reads it): the only addresses served without a token.
inline bool is_loopback_address(const std::string& address) noexcept {
  unsigned char bytes[16] = {};
  if (::inet_pton(AF_INET, address.c_str(), bytes) == 1) return bytes[0] == 127;
  if (::inet_pton(AF_INET6, address.c_str(), bytes) != 1) return false;
  for (int i = 0; i < 15; ++i)
    if (bytes[i] != 0) return false;
  return bytes[15] == 1;
}

/// `host` (the request's Host header) is one of `allowed`, compared without
/// case. A Host without a port never matches: every allowed entry has one.
inline bool host_allowed(std::string_view host, const std::vector<std::string>& allowed) {
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& entry) { return iequal(host, entry); });
}

/// The Origins a browser page on an allowed host sends: `http://HOST` for
/// each allowed host (TLS ends at a proxy in front, which may add https
/// ones with `--allow-origin`).
inline std::vector<std::string> default_origins(const std::vector<std::string>& hosts) {
  std::vector<std::string> origins;
  for (const auto& host : hosts) origins.push_back("http://" + host);
  return origins;
}

/// No Origin header: not a browser — allowed. Present: it must be listed.
inline bool origin_allowed(const std::optional<std::string_view>& origin, const std::vector<std::string>& allowed) {
  if (!origin) return true;
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& entry) { return iequal(*origin, entry); });
}

/// Equal in time that depends on the lengths only, not on where they differ.
inline bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
  unsigned char differ = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    differ = static_cast<unsigned char>(differ | (x ^ y));
  }
  return differ == 0;
}

/// An `Authorization` header carries `expected` as its bearer token. The
/// scheme is case-insensitive; nothing but the token may follow it.
inline bool bearer_matches(const std::optional<std::string_view>& authorization, std::string_view expected) {
  if (!authorization || expected.empty()) return false;
  constexpr std::string_view scheme = "Bearer ";
  if (authorization->size() <= scheme.size() || !iequal(authorization->substr(0, scheme.size()), scheme)) return false;
  return constant_time_equal(authorization->substr(scheme.size()), expected);
}

/// Whether `group` is this process's effective group or a supplementary one.
inline bool in_own_group(gid_t group) {
  if (group == ::getegid()) return true;
  const int count = ::getgroups(0, nullptr);
  if (count <= 0) return false;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  const int got = ::getgroups(count, groups.data());
  return got > 0 && std::find(groups.begin(), groups.begin() + got, group) != groups.begin() + got;
}

/// The token in `path`: its first line, without the line end. Refused with
/// std::invalid_argument naming `--token-file` when it cannot be read, is
/// empty, holds a character outside visible ASCII, or may be read by
/// others than its owner (a token other users can read is no secret) —
/// except by a group this process is in, read only: a Kubernetes Secret
/// mounted with `fsGroup` is mode 0440 in the pod's own group
/// (docs/deploy-kubernetes.md).
inline std::string read_token_file(const std::filesystem::path& path) {
  struct stat facts {};
  if (::stat(path.c_str(), &facts) != 0)
    throw std::invalid_argument(fmt::format("--token-file {}: cannot be read", path.string()));
  if (!S_ISREG(facts.st_mode))
    throw std::invalid_argument(fmt::format("--token-file {}: not a regular file", path.string()));
  const bool group_reads_only = (facts.st_mode & (S_IWGRP | S_IXGRP)) == 0;
  if ((facts.st_mode & S_IRWXO) != 0 || !group_reads_only ||
      ((facts.st_mode & S_IRGRP) != 0 && !in_own_group(facts.st_gid)))
    throw std::invalid_argument(fmt::format(
        "--token-file {}: readable or writable by others than its owner and its own group (chmod 600 it)",
        path.string()));
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token))
    throw std::invalid_argument(fmt::format("--token-file {}: cannot be read", path.string()));
  if (!token.empty() && token.back() == '\r') token.pop_back();
  if (token.size() < 16)
    throw std::invalid_argument(
        fmt::format("--token-file {}: the token must be at least 16 characters", path.string()));
  if (!std::all_of(token.begin(), token.end(), [](char c) { return c > 0x20 && c < 0x7f; }))
    throw std::invalid_argument(
        fmt::format("--token-file {}: the token may hold visible ASCII characters only", path.string()));
  return token;
}

/// What an MCP-Protocol-Version header asks for: the version to serve under,
/// or none when the server does not speak it (400). Absent: 2025-03-26, as
/// the transport specifies for clients that predate the header.
inline std::optional<std::string> header_protocol_version(const std::optional<std::string_view>& header) {
  if (!header) return std::string("2025-03-26");
  for (auto version : mcp::protocol_versions)
    if (*header == version) return std::string(version);
  return std::nullopt;
}

/// A new session id: 32 lowercase hex digits of getrandom(2).
/// infrastructure_error when the kernel gives no randomness.
inline std::string new_session_id() {
  std::array<unsigned char, 16> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw infrastructure_error("getrandom for an MCP session id failed");
    }
    got += static_cast<std::size_t>(n);
  }
  std::string id;
  id.reserve(32);
  for (unsigned char b : bytes) id += fmt::format("{:02x}", b);
  return id;
}

/// A presented MCP-Session-Id has the shape new_session_id gives; anything
/// else is no session of this server (404), never looked up.
inline bool plausible_session_id(std::string_view id) noexcept {
  return id.size() == 32 &&
         std::all_of(id.begin(), id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace bashexec::server::http

// detail/kernel/socket_owner: which processes of this host hold the other end
// of a TCP connection — the kernel's socket table (/proc/net/tcp, tcp6) and
// each process's descriptors (/proc/PID/fd) — and whether a process is one
// of an executor's commands (a descendant of this process, or in a cgroup
// an executor made: `bashexec-…`). The MCP HTTP transport asks, so that a
// command cannot connect to the server that runs it and ask it for more
// (server/mcp_http_server.hpp).
//
// Hand-written: sock_diag would answer the first question without parsing
// text, but not the second, and no maintained library wraps either; the
// /proc formats are stable kernel ABI (proc(5)).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/detail/kernel/read_text_file.hpp"

namespace bashexec::detail {

/// How /proc/net/tcp spells an endpoint: each 32-bit word of the address as
/// the host stores it, in hex, then the port; IPv6 in tcp6, four words.
inline std::string proc_net_endpoint(const sockaddr_storage& at) {
  if (at.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(at);
    return fmt::format("{:08X}:{:04X}", static_cast<std::uint32_t>(v4.sin_addr.s_addr), ntohs(v4.sin_port));
  }
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(at);
  std::string out;
  for (int i = 0; i < 4; ++i) {
    std::uint32_t word = 0;
    __builtin_memcpy(&word, v6.sin6_addr.s6_addr + 4 * i, 4);
    out += fmt::format("{:08X}", word);
  }
  return out + fmt::format(":{:04X}", ntohs(v6.sin6_port));
}

/// The inode of the TCP socket of this network namespace whose own end is
/// `own` and whose peer is `peer`: none when the table has no such socket
/// (its process is in another namespace or on another host, or it is
/// gone), 0 for one no descriptor holds (TIME_WAIT, an orphan).
inline std::optional<unsigned long> tcp_socket_inode(const sockaddr_storage& own, const sockaddr_storage& peer) {
  const std::string local = proc_net_endpoint(own);
  const std::string remote = proc_net_endpoint(peer);
  const auto table = read_text_file(own.ss_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6");
  if (!table) return std::nullopt;
  std::optional<unsigned long> found;
  any_line(*table, [&](std::string_view line) {
    // "  sl: local remote st tx:rx tr:when retrnsmt uid timeout inode ..."
    std::vector<std::string_view> fields;
    std::size_t at = 0;
    while (fields.size() < 10) {
      at = line.find_first_not_of(' ', at);
      if (at == std::string_view::npos) break;
      const std::size_t end = line.find(' ', at);
      fields.push_back(line.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
      if (end == std::string_view::npos) break;
      at = end;
    }
    if (fields.size() < 10 || fields[1] != local || fields[2] != remote) return false;
    found = std::strtoul(std::string(fields[9]).c_str(), nullptr, 10);
    return true;
  });
  return found;
}

/// The processes with `socket:[inode]` among their descriptors. `unreadable`
/// is set when some process's descriptors could not be listed (another
/// user's, or one that made itself undumpable): it may hold it too.
inline std::vector<pid_t> socket_holders(unsigned long inode, bool& unreadable) {
  std::vector<pid_t> holders;
  const std::string wanted = fmt::format("socket:[{}]", inode);
  DIR* proc = ::opendir("/proc");
  if (!proc) {
    unreadable = true;
    return holders;
  }
  while (const dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    const std::string dir = fmt::format("/proc/{}/fd", pid);
    DIR* fds = ::opendir(dir.c_str());
    if (!fds) {
      unreadable = true;
      continue;
    }
    char target[64];
    while (const dirent* fd = ::readdir(fds)) {
      if (fd->d_name[0] == '.') continue;
      const std::string link = dir + "/" + fd->d_name;
      const ssize_t n = ::readlink(link.c_str(), target, sizeof target);
      if (n > 0 && std::string_view(target, static_cast<std::size_t>(n)) == wanted) {
        holders.push_back(static_cast<pid_t>(pid));
        break;
      }
    }
    ::closedir(fds);
  }
  ::closedir(proc);
  return holders;
}

/// `ancestor` is `pid`'s parent, or its parent's, and so on.
inline bool descends_from(pid_t pid, pid_t ancestor) {
  for (int depth = 0; depth < 4096 && pid > 1; ++depth) {
    const auto status = read_text_file(fmt::format("/proc/{}/status", pid).c_str());
    if (!status) return false;
    pid_t parent = 0;
    any_line(*status, [&](std::string_view line) {
      if (!line.starts_with("PPid:")) return false;
      parent = static_cast<pid_t>(std::strtol(std::string(line.substr(5)).c_str(), nullptr, 10));
      return true;
    });
    if (parent == ancestor) return true;
    pid = parent;
  }
  return false;
}

/// `pid` is in a cgroup with a path component starting with `prefix` (the
/// cgroups executors make for their commands: `bashexec-`). False when its
/// cgroup cannot be read.
inline bool in_cgroup_named(pid_t pid, std::string_view prefix) {
  const auto cgroups = read_text_file(fmt::format("/proc/{}/cgroup", pid).c_str());
  if (!cgroups) return false;
  return any_line(*cgroups, [&](std::string_view line) {
    const auto path = line.substr(std::min(line.size(), line.rfind(':') + 1));
    for (std::size_t at = 0; at < path.size();) {
      const std::size_t next = path.find('/', at);
      const auto part = path.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at);
      if (part.starts_with(prefix)) return true;
      if (next == std::string_view::npos) break;
      at = next + 1;
    }
    return false;
  });
}

}  // namespace bashexec::detail

// The bodies of detail/kernel/cgroup_mount.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/cgroup_mount.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "bashexec/detail/kernel/read_text_file.hpp"

namespace bashexec::detail {

BASHEXEC_DECL std::optional<cgroup2_mount> find_cgroup2_mount() {
  const auto mountinfo = read_text_file("/proc/self/mountinfo");
  if (!mountinfo) return std::nullopt;
  std::optional<cgroup2_mount> found;
  any_line(*mountinfo, [&](std::string_view view) {
    const std::string line(view);
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    const auto dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) return false;
    char root[4096], point[4096];
    if (std::sscanf(line.c_str(), "%*s %*s %*s %4095s %4095s", root, point) != 2) return false;
    // mountinfo escapes space, tab, newline and backslash as \ooo.
    auto unescape = [](std::string_view s) {
      std::string out;
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 3 < s.size()) {
          out += static_cast<char>(std::strtol(std::string(s.substr(i + 1, 3)).c_str(), nullptr, 8));
          i += 3;
        } else {
          out += s[i];
        }
      }
      return out;
    };
    found = cgroup2_mount{unescape(point), unescape(root)};
    return true;
  });
  return found;
}

BASHEXEC_DECL std::optional<std::string> current_cgroup2_path() {
  const auto cgroups = read_text_file("/proc/self/cgroup");
  if (!cgroups) return std::nullopt;
  std::optional<std::string> path;
  any_line(*cgroups, [&](std::string_view line) {
    if (!line.starts_with("0::")) return false;
    path = std::string(line.substr(3));
    return true;
  });
  return path;
}

}  // namespace bashexec::detail

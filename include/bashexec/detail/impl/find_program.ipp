// The bodies of detail/find_program.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/find_program.hpp"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <sys/stat.h>
#include <unistd.h>

namespace bashexec::detail {

BASHEXEC_DECL bool is_executable_file(const std::filesystem::path& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

BASHEXEC_DECL std::optional<std::filesystem::path> find_program(const std::filesystem::path& program) {
  if (program.empty()) return std::nullopt;
  const std::string text = program.string();
  if (text.find('/') != std::string::npos) {
    std::error_code ec;
    auto absolute = std::filesystem::absolute(program, ec);
    if (ec || !is_executable_file(absolute)) return std::nullopt;
    return absolute;
  }
  const char* env_path = std::getenv("PATH");
  std::string_view dirs = env_path && *env_path ? env_path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    auto colon = dirs.find(':');
    std::string_view dir = dirs.substr(0, colon);
    if (!dir.empty() && dir.front() == '/') {
      std::filesystem::path candidate = std::filesystem::path(dir) / program;
      if (is_executable_file(candidate)) return candidate;
    }
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return std::nullopt;
}

}  // namespace bashexec::detail

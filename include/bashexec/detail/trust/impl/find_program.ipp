// The bodies of detail/trust/find_program.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/trust/find_program.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/detail/trust/writable_roots.hpp"

namespace bashexec::detail {

/// Why `path` (a file or directory on the way to a program) could be
/// replaced by someone other than root or the running user; empty when it
/// cannot. `lstat`: a symlink is judged as itself (its target is judged on
/// the resolved path).
BASHEXEC_DECL std::optional<std::string> replaceable_by_others(const std::filesystem::path& path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) return fmt::format("{}: {}", path.string(), std::strerror(errno));
  if (S_ISLNK(info.st_mode)) return std::nullopt;  // a link's own mode means nothing; its directory is checked
  if (info.st_uid != 0 && info.st_uid != ::geteuid())
    return fmt::format("{} belongs to uid {}, not to root or the running user", path.string(), info.st_uid);
  // A sticky directory (/tmp, /var/tmp) lets others add entries but not
  // rename or remove ours; the entry below it is checked on its own.
  const bool sticky_directory = S_ISDIR(info.st_mode) && (info.st_mode & S_ISVTX) != 0;
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !sticky_directory)
    return fmt::format("{} is writable by {} (mode {:04o})", path.string(),
                       (info.st_mode & S_IWOTH) != 0 ? "every user" : "its group", info.st_mode & 07777);
  return std::nullopt;
}

/// `replaceable_by_others` for `path` and every directory above it.
BASHEXEC_DECL std::optional<std::string> chain_replaceable_by_others(const std::filesystem::path& path) {
  for (std::filesystem::path at = path;; at = at.parent_path()) {
    if (auto why = replaceable_by_others(at)) return why;
    if (at == at.root_path() || at.empty()) return std::nullopt;
  }
}

BASHEXEC_DECL bool is_executable_file(const std::filesystem::path& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

BASHEXEC_DECL program_lookup lookup_trusted_program(const std::filesystem::path& program) {
  const std::string text = program.string();
  if (text.empty()) return {std::nullopt, "the program name is empty"};
  std::filesystem::path given;
  if (text.find('/') != std::string::npos) {
    if (!program.is_absolute())
      return {std::nullopt, fmt::format("{} is a relative path: give an absolute path, or a bare name to look up in "
                                        "{}",
                                        text, trusted_search_path)};
    given = program.lexically_normal();
    if (!is_executable_file(given)) return {std::nullopt, fmt::format("{} is not an executable file", text)};
  } else {
    for (std::string_view dirs = trusted_search_path; given.empty() && !dirs.empty();) {
      const auto colon = std::min(dirs.find(':'), dirs.size());
      std::filesystem::path candidate = std::filesystem::path(dirs.substr(0, colon)) / program;
      if (is_executable_file(candidate)) given = std::move(candidate);
      dirs.remove_prefix(std::min(colon + 1, dirs.size()));
    }
    if (given.empty())
      return {std::nullopt,
              fmt::format("{} not found in {} ($PATH is not searched)", text, trusted_search_path)};
  }
  std::error_code ec;
  std::filesystem::path resolved = std::filesystem::canonical(given, ec);
  if (ec) return {std::nullopt, fmt::format("{}: {}", given.string(), ec.message())};
  for (const auto* path : {&given, &resolved})
    if (auto why = chain_replaceable_by_others(*path))
      return {std::nullopt, fmt::format("{} is not trusted: {}, so another user could replace it", given.string(),
                                        *why)};
  return {std::move(given), {}};
}

BASHEXEC_DECL std::string program_refusal(const program_lookup& program, const std::filesystem::path& workspace_root) {
  if (!program.path) return program.refusal;
  // A workspace of / holds every program: there is nothing narrower to
  // refuse, and workspace-write over it is refused by the spill placement.
  const bool whole_tree = workspace_root == workspace_root.root_path();
  if (auto writable = writable_root_holding(*program.path, whole_tree ? std::filesystem::path("/tmp") : workspace_root))
    return fmt::format("{} lies under {}, which workspace-write commands may write, so a command could replace it",
                       program.path->string(), writable->string());
  return {};
}

BASHEXEC_DECL void validate_program_name(const std::filesystem::path& program, std::string_view field) {
  if (program.empty()) throw std::invalid_argument(fmt::format("{} must not be empty", field));
  if (!program.is_absolute() && program.string().find('/') != std::string::npos)
    throw std::invalid_argument(fmt::format("{} {} is a relative path: give an absolute path, or a bare name looked "
                                            "up in {}",
                                            field, program.string(), trusted_search_path));
}

BASHEXEC_DECL std::optional<std::filesystem::path> find_program(const std::filesystem::path& program) {
  return lookup_trusted_program(program).path;
}

}  // namespace bashexec::detail

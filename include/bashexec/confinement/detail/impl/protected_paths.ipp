// The bodies of confinement/detail/protected_paths.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/confinement/detail/protected_paths.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <fmt/core.h>

#include "bashexec/confinement/detail/git_config.hpp"
#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/errors.hpp"

namespace bashexec::detail {

namespace fs = std::filesystem;

BASHEXEC_DECL std::vector<fs::path> existing_protected_paths(const fs::path& root,
                                                             const std::vector<fs::path>& protected_paths) {
  std::vector<fs::path> found;
  std::error_code ec;
  const fs::path real_root = fs::canonical(root, ec);
  if (ec) return found;
  for (const auto& relative : protected_paths) {
    const fs::path target = fs::canonical(root / relative, ec);
    if (ec) continue;  // missing or dangling
    const fs::path inside = target.lexically_relative(real_root);
    if (inside.empty() || *inside.begin() == "..") continue;
    fs::path path = (root / inside).lexically_normal();
    if (path.filename().empty()) path = path.parent_path();  // "…/ws/." normalises to "…/ws/"
    found.push_back(std::move(path));
  }
  return found;
}

namespace protection {

/// Config files and gitdir pointers are small; a command could have made
/// one huge (or a FIFO, or a link to /dev/zero) in a repository of its own.
inline constexpr std::size_t max_config_bytes = 1 << 20;
inline constexpr int max_include_depth = 10;

/// A regular file's first `max_config_bytes`, opened without blocking (a
/// FIFO would hang the spawn); empty when it is not one.
inline std::optional<std::string> read_small_regular_file(const fs::path& path) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  struct stat info;
  if (!fd || ::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) return std::nullopt;
  std::string text(std::min<std::size_t>(static_cast<std::size_t>(info.st_size), max_config_bytes), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const auto n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return text;
}

class scan {
 public:
  scan(const fs::path& root, std::size_t limit) : root_(root), limit_(limit) {
    std::error_code ec;
    real_root_ = fs::canonical(root, ec);
    if (ec) real_root_.clear();
  }

  bool usable() const { return !real_root_.empty(); }

  /// Walks the workspace depth-first, never following a symlink, never
  /// entering a `.git`.
  void walk() {
    std::vector<fs::path> pending{root_};
    while (!pending.empty()) {
      const fs::path dir = std::move(pending.back());
      pending.pop_back();
      unique_fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) {
        if (errno == EACCES) protect(dir);  // unknown content: fail safe
        continue;                           // gone, or replaced by a link, since it was listed
      }
      const std::unique_ptr<DIR, int (*)(DIR*)> stream(::fdopendir(fd.get()), &::closedir);
      if (!stream) continue;
      fd.release();
      const int dir_fd = ::dirfd(stream.get());
      while (const dirent* entry = ::readdir(stream.get())) {
        const std::string_view name = entry->d_name;
        if (name == "." || name == "..") continue;
        if (++read_ > limit_)
          refuse(fmt::format("the workspace {} holds more than {} directory entries, the most bashexec reads "
                             "looking for nested .git to protect (sandbox.protected_scan_limit); raise it, or "
                             "choose a smaller sandbox.workspace_root",
                             root_.string(), limit_));
        unsigned char type = entry->d_type;
        if (type == DT_UNKNOWN) {
          struct stat info;
          if (::fstatat(dir_fd, entry->d_name, &info, AT_SYMLINK_NOFOLLOW) != 0) continue;
          type = S_ISDIR(info.st_mode) ? DT_DIR : S_ISREG(info.st_mode) ? DT_REG : S_ISLNK(info.st_mode) ? DT_LNK : 0;
        }
        if (name == ".git")
          git_entry(dir, dir / name);
        else if (type == DT_DIR)
          pending.push_back(dir / name);
      }
    }
  }

  /// The repository enclosing the workspace, found the way git finds it:
  /// the nearest `.git` above. Its config may name hooks or includes inside.
  void enclosing_repository() {
    for (fs::path dir = real_root_.parent_path();; dir = dir.parent_path()) {
      std::error_code ec;
      if (fs::exists(fs::symlink_status(dir / ".git", ec))) {
        git_entry(dir, dir / ".git");
        return;
      }
      if (dir == dir.root_path() || dir.empty()) return;
    }
  }

  /// Adds `path` (existing) when it resolves inside the workspace.
  void protect(const fs::path& path) {
    std::error_code ec;
    const fs::path target = fs::canonical(path, ec);
    if (ec) return;
    const fs::path inside = target.lexically_relative(real_root_);
    if (inside.empty() || *inside.begin() == "..") return;
    fs::path location = (root_ / inside).lexically_normal();
    if (location.filename().empty()) location = location.parent_path();
    found_.push_back(std::move(location));
  }

  /// The found locations, none under another.
  std::vector<fs::path> minimal() && {
    std::set<std::string> all;
    for (const auto& path : found_) all.insert(path.string());
    std::vector<fs::path> kept;
    for (const auto& path : all) {
      bool covered = false;
      for (fs::path up = fs::path(path).parent_path(); !covered && up.has_relative_path(); up = up.parent_path())
        covered = all.count(up.string()) != 0;
      if (!covered) kept.emplace_back(path);
    }
    return kept;
  }

 private:
  [[noreturn]] static void refuse(const std::string& why) {
    throw sandbox_unavailable(sandbox_mode::workspace_write, "protected paths: " + why);
  }

  /// A `.git` entry of `worktree`: a gitdir, a gitdir file, or a link to either.
  void git_entry(const fs::path& worktree, const fs::path& entry) {
    std::error_code ec;
    const fs::path target = fs::canonical(entry, ec);
    if (ec) return;
    protect(entry);
    const fs::file_status status = fs::status(target, ec);
    if (fs::is_directory(status)) return repository(target, worktree);
    if (!fs::is_regular_file(status)) return;
    // "gitdir: <path>" (worktrees, submodules), relative to the file's directory.
    const auto text = read_small_regular_file(target);
    if (!text || text->rfind("gitdir:", 0) != 0) return;
    std::string_view named = std::string_view(*text).substr(7);
    named = named.substr(0, named.find('\n'));
    while (!named.empty() && (named.front() == ' ' || named.front() == '\t')) named.remove_prefix(1);
    while (!named.empty() && (named.back() == ' ' || named.back() == '\r')) named.remove_suffix(1);
    if (named.empty()) return;
    const fs::path gitdir = fs::canonical(worktree / fs::path(named), ec);
    if (ec || !fs::is_directory(gitdir, ec)) return;
    protect(gitdir);
    repository(gitdir, worktree);
  }

  /// A gitdir: its config files, and those of its common dir (a linked
  /// worktree's `commondir`).
  void repository(const fs::path& gitdir, const fs::path& worktree) {
    config_file(gitdir / "config", worktree, 0);
    config_file(gitdir / "config.worktree", worktree, 0);
    const auto common = read_small_regular_file(gitdir / "commondir");
    if (!common) return;
    std::string_view named = *common;
    named = named.substr(0, named.find('\n'));
    if (named.empty()) return;
    std::error_code ec;
    const fs::path common_dir = fs::canonical(gitdir / fs::path(named), ec);
    if (ec) return;
    protect(common_dir);
    config_file(common_dir / "config", worktree, 0);
  }

  void config_file(const fs::path& file, const fs::path& worktree, int depth) {
    if (depth > max_include_depth || !visited_.insert(file.lexically_normal().string()).second) return;
    const auto text = read_small_regular_file(file);
    if (!text) return;
    const git_config_facts facts = parse_git_config(*text);
    // git reads a relative hooks path from the worktree root, an include
    // from the directory of the file that names it.
    for (const auto& value : facts.hooks_paths)
      if (auto path = named_path(value, worktree)) named_location(*path, "core.hooksPath", file);
    for (const auto& value : facts.include_paths)
      if (auto path = named_path(value, file.parent_path()); path && named_location(*path, "include.path", file))
        config_file(*path, worktree, depth + 1);
  }

  /// Where a config value points: `~/` is the executor's HOME; the
  /// `%(prefix)/` form (relative to git's installation) is not a workspace path.
  static std::optional<fs::path> named_path(const std::string& value, const fs::path& base) {
    if (value.empty() || value.rfind("%(prefix)/", 0) == 0) return std::nullopt;
    if (value.rfind("~/", 0) == 0) {
      const char* home = std::getenv("HOME");
      if (home == nullptr) return std::nullopt;
      return (fs::path(home) / value.substr(2)).lexically_normal();
    }
    return (base / value).lexically_normal();
  }

  /// Protects what a config names; returns whether it exists. One that
  /// does not but would lie inside the workspace is refused: a command
  /// could create it, and nothing can be bound over what does not exist.
  bool named_location(const fs::path& path, std::string_view key, const fs::path& config) {
    std::error_code ec;
    if (fs::exists(path, ec)) {
      protect(path);
      return true;
    }
    const fs::path would_be = fs::weakly_canonical(path, ec);
    if (ec) return false;
    const fs::path inside = would_be.lexically_relative(real_root_);
    if (!inside.empty() && *inside.begin() != "..")
      refuse(fmt::format("{} in {} names {}, which does not exist: a command could create it, and it would be "
                         "trusted like the repository's own; create it (an empty directory will do) or unset it",
                         key, config.string(), path.string()));
    return false;
  }

  fs::path root_;
  fs::path real_root_;
  std::size_t limit_;
  std::size_t read_ = 0;
  std::vector<fs::path> found_;
  std::set<std::string> visited_;
};

}  // namespace protection

BASHEXEC_DECL std::vector<fs::path> protected_locations(const fs::path& root,
                                                        const std::vector<fs::path>& protected_paths,
                                                        std::size_t scan_limit) {
  protection::scan scan(root, scan_limit);
  if (!scan.usable()) return {};
  for (const auto& path : existing_protected_paths(root, protected_paths)) scan.protect(path);
  bool repositories = false;
  for (fs::path path : protected_paths) {
    path = path.lexically_normal();
    if (path.filename().empty()) path = path.parent_path();
    repositories = repositories || path == ".git";
  }
  // A workspace of / grants the whole tree to workspace-write: every file
  // the host trusts is writable there, so a walk of every mount would guard
  // nothing and cost seconds. Only the configured paths at / stay read-only.
  const bool whole_tree = root == root.root_path();
  if (repositories && !whole_tree) {
    scan.walk();
    scan.enclosing_repository();
  }
  return std::move(scan).minimal();
}

}  // namespace bashexec::detail

// Where the CLI keeps files in shared temp space: the spill directories
// `run` keeps after it exits (bounded in age and in total size) and the
// private session directories of `serve` and `mcp`. Each is per user, opened
// without following links, checked for owner and mode, removed only through
// descriptors, and swept once the process that owned it is gone.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bashexec/detail/engine/spill_placement.hpp>
#include <bashexec/detail/kernel/shared_temp.hpp>
#include <bashexec/spill_directory.hpp>
#include <bashexec/errors.hpp>

namespace bashexec::cli {

/// How long `run` keeps the spill files it printed a path to, and how many
/// bytes the kept files of all ended runs may hold together.
constexpr auto kept_spill_lifetime = std::chrono::hours(24);
constexpr std::uint64_t kept_spill_total = std::uint64_t{1} << 30;

inline constexpr std::string_view session_dir_prefix = "bashexec-sessions-";

/// `stem` inside a parent of this user's alone, `stem-<uid>` in a shared one.
inline std::string per_user_name(int parent_fd, std::string_view stem) {
  return detail::private_to_user(parent_fd) ? std::string(stem) : fmt::format("{}-{}", stem, ::geteuid());
}

/// Where private session directories go: $XDG_RUNTIME_DIR when it is this
/// user's private directory, else /var/tmp — never /tmp, which
/// workspace-write grants under Landlock.
inline std::filesystem::path session_base() {
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime && runtime[0] == '/') {
    const auto fd = detail::open_directory(runtime);
    if (fd && detail::private_to_user(fd.get())) return runtime;
  }
  return "/var/tmp";
}

/// Removes this user's spill and session directories whose owner process is
/// gone (a SIGKILLed serve, mcp or run) from the places they are made in.
inline void sweep_leftovers() {
  auto places = detail::default_spill_parents();
  places.push_back(session_base());
  for (const auto& place : places) {
    const auto fd = detail::open_directory(place);
    if (!fd || !detail::shared_parent_problem(fd.get()).empty()) continue;
    detail::sweep_dead_owners(fd.get(), detail::spill_dir_prefix);
    detail::sweep_dead_owners(fd.get(), session_dir_prefix);
  }
}

/// A directory of this user's, held open: work inside it goes through `fd`.
struct held_directory {
  std::filesystem::path path;
  detail::unique_fd fd;
  explicit operator bool() const noexcept { return static_cast<bool>(fd); }
};

/// The directory where `run` keeps printed spill files: `bashexec-run[-uid]`
/// in the first default spill parent (outside `workspace` where one is) that
/// holds one of this user's. A link, a file or someone else's directory at
/// that name is passed over; empty, with every reason in `why`, when no
/// parent has one.
inline held_directory open_kept_spills(const std::filesystem::path& workspace, std::string& why) {
  auto candidates = detail::default_spill_parents();
  std::stable_partition(candidates.begin(), candidates.end(),
                        [&](const auto& candidate) { return !detail::writable_root_holding(candidate, workspace); });
  std::vector<std::string> problems;
  for (const auto& base : candidates) {
    const auto parent = detail::open_directory(base);
    std::string problem = parent ? detail::shared_parent_problem(parent.get()) : detail::syscall_message("open");
    const std::string name = parent ? per_user_name(parent.get(), "bashexec-run") : std::string();
    detail::unique_fd fd;
    if (problem.empty()) fd = detail::open_private_directory(parent.get(), name, problem);
    if (fd) return {base / name, std::move(fd)};
    problems.push_back(fmt::format("{}: {}", (base / name).string(), problem));
  }
  why = fmt::format("{}", fmt::join(problems, "; "));
  return {};
}

/// `path` relative to `workspace` when the workspace holds it, as a
/// protected path (bound read-only under workspace-write).
inline std::optional<std::filesystem::path> path_inside(const std::filesystem::path& path,
                                                        const std::filesystem::path& workspace) {
  std::error_code path_error, workspace_error;
  const auto real_path = std::filesystem::canonical(path, path_error);
  const auto inside = real_path.lexically_relative(std::filesystem::canonical(workspace, workspace_error));
  if (path_error || workspace_error || inside.empty() || *inside.begin() == ".." || inside == ".") return std::nullopt;
  return inside;
}

/// Removes the kept spill directories of ended runs: those older than
/// kept_spill_lifetime, then the oldest until all kept ones together hold
/// at most kept_spill_total bytes. A running `run`'s directory stays.
inline void prune_kept_spills(int kept_fd) {
  auto entries = detail::stamped_entries(kept_fd, detail::kept_spill_dir_prefix);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return std::pair(a.modified.tv_sec, a.modified.tv_nsec) < std::pair(b.modified.tv_sec, b.modified.tv_nsec);
  });
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  std::uint64_t total = 0;
  std::vector<std::pair<std::string, std::uint64_t>> ended;
  for (const auto& entry : entries) {
    const bool gone = detail::owner_gone(entry.stamp);
    if (gone && now - std::chrono::seconds(entry.modified.tv_sec) > kept_spill_lifetime) {
      detail::remove_tree_at(kept_fd, entry.name);
      continue;
    }
    const std::uint64_t bytes = detail::tree_bytes_at(kept_fd, entry.name);
    total += bytes;
    if (gone) ended.emplace_back(entry.name, bytes);
  }
  for (const auto& [name, bytes] : ended) {
    if (total <= kept_spill_total) break;
    detail::remove_tree_at(kept_fd, name);
    total -= bytes;
  }
}

/// A new private session directory, removed with this object.
class session_directory {
 public:
  explicit session_directory(const std::filesystem::path& base) : parent_(detail::open_directory(base)) {
    if (!parent_) detail::throw_syscall(fmt::format("open {}", base.string()));
    if (auto problem = detail::shared_parent_problem(parent_.get()); !problem.empty())
      throw infrastructure_error(fmt::format("{}: {}", base.string(), problem));
    auto made = detail::make_stamped_directory(parent_.get(), session_dir_prefix);
    name_ = std::move(made.second);
    path_ = base / name_;
  }
  session_directory(const session_directory&) = delete;
  session_directory& operator=(const session_directory&) = delete;
  ~session_directory() { detail::remove_tree_at(parent_.get(), name_); }

  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  detail::unique_fd parent_;
  std::string name_;
  std::filesystem::path path_;
};

}  // namespace bashexec::cli

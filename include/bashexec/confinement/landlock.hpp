// confinement/landlock: native Landlock confinement (DESIGN.md contract 13,
// 14). The ruleset is built in the parent; the child only runs an
// async-signal-safe hook (no_new_privs + landlock_restrict_self), so it needs
// a spawn policy with `supports_pre_exec` (fork_exec).
//
// Rules: every filesystem right the kernel ABI knows is handled; reading and
// executing are allowed from "/"; write-type rights only on the mode's roots:
//   read-only        → /dev/null (file rights: write, truncate)
//   workspace-write  → /dev/null, the workspace root and /tmp (all rights)
// Device ioctls (ABI 5) are handled and granted nowhere, so a reopened
// terminal cannot be driven (TIOCSTI); inherited descriptors are unaffected.
// Enforcement is `full` from ABI 3 (truncate(2) governed); below, `partial`.
//
// Protected paths (`sandbox.protected_paths`, `.git` by default) are NOT
// enforced: a workspace-write spawn with one present reports `partial`.
// Landlock rules only add access, and a right granted on a directory holds
// for its whole subtree, so "the root writable except .git" is not
// expressible. The alternative — granting write on each top-level entry but
// the protected ones instead of on the root — fails both ways: without
// MAKE_*/REMOVE_* on the root itself no top-level file could be created,
// removed or atomically replaced (`sed -i`, editors' save-by-rename, a new
// `build/`), which breaks the mode's promise; with them, the grant reaches
// inside `.git` too (delete `.git/config`, create it anew), which protects
// nothing. So the root is granted whole and `partial` says honestly that a
// promised file effect is not governed.
//
// Runner failure is structural: when the hook fails the spawn throws
// `pre_exec_failed` (the command never ran), so `runner_failure` has nothing
// to add and returns empty. Denial dialect: "permission denied" (EACCES).
#pragma once

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include "bashexec/config.hpp"
#include "bashexec/confinement.hpp"
#include "bashexec/detail/landlock.hpp"
#include "bashexec/detail/protected_paths.hpp"
#include "bashexec/detail/text_match.hpp"
#include "bashexec/detail/unique_fd.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/launch.hpp"

namespace bashexec {

namespace detail {

/// What the child's hook reads: the ruleset descriptor number, valid in the
/// child because fork_exec runs hooks before renumbering descriptors.
struct landlock_ruleset {
  unique_fd fd;
  int number = -1;
};

/// The pre-exec hook. Async-signal-safe: two bare system calls.
inline int landlock_apply(const void* context) noexcept {
  const auto* ruleset = static_cast<const landlock_ruleset*>(context);
  // Unprivileged restriction requires no_new_privs; it also keeps a setuid
  // binary from escaping the domain.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (landlock_restrict_self(ruleset->number, 0) != 0) return errno;
  return 0;
}

}  // namespace detail

class landlock {
 public:
  static constexpr bool confines = true;
  static constexpr bool needs_pre_exec = true;
  static constexpr std::string_view name = "landlock";
  /// What a denied file effect reads like on stderr (EACCES).
  static constexpr std::array<std::string_view, 1> denial_dialects{"permission denied"};
  /// The lowest ABI that governs every file effect the modes promise.
  static constexpr int full_enforcement_abi = 3;
  static constexpr std::string_view remedy =
      "enable Landlock: Linux >= 5.13 built with CONFIG_SECURITY_LANDLOCK=y and \"landlock\" in "
      "the lsm= boot parameter (ABI 3, Linux >= 6.2, for full enforcement)";

  explicit landlock(const executor_config& config) : protected_(config.sandbox.protected_paths) {}

  /// The kernel's Landlock ABI version, or -errno when there is none.
  static int abi() noexcept { return detail::landlock_abi(); }

  confined_launch prepare(sandbox_mode mode, const std::filesystem::path& root, launch_plan& plan) const {
    if (mode == sandbox_mode::danger_full_access)
      throw std::invalid_argument("landlock: danger-full-access is not confined; do not prepare it");
    const int version = abi();
    if (version < 0) throw sandbox_unavailable(mode, unavailable_message(mode, -version));
    if (plan.hook)
      throw std::logic_error(fmt::format("landlock: the launch plan already has a pre-exec hook ({})",
                                         plan.hook.stage ? plan.hook.stage : "unnamed"));

    const std::uint64_t handled = detail::landlock_fs_rights_for_abi(version);
    const detail::landlock_ruleset_attr attr{handled};
    auto ruleset = std::make_shared<detail::landlock_ruleset>();
    ruleset->fd.reset(detail::landlock_create_ruleset(&attr, sizeof attr, 0));
    if (!ruleset->fd) detail::throw_syscall("landlock_create_ruleset");
    ruleset->number = ruleset->fd.get();

    const int fd = ruleset->fd.get();
    allow(fd, mode, "/", detail::landlock_read_rights & handled, true);
    const std::uint64_t null_rights =
        (detail::landlock_access_fs_write_file | detail::landlock_access_fs_truncate) & handled;
    allow(fd, mode, "/dev/null", null_rights, false);
    if (mode == sandbox_mode::workspace_write) {
      allow(fd, mode, root, handled, true);
      allow(fd, mode, "/tmp", handled, false);
    }

    plan.hook = pre_exec_hook{&detail::landlock_apply, ruleset.get(), "landlock_restrict_self"};
    confined_launch launch;
    launch.info.mode = mode;
    launch.info.level = version >= full_enforcement_abi && !leaves_protected_path_writable(mode, root)
                            ? enforcement::full
                            : enforcement::partial;
    launch.keep_alive = std::move(ruleset);
    return launch;
  }

  /// Whether a workspace-write spawn under `root` leaves an existing
  /// protected path writable (it always does; see the header comment).
  bool leaves_protected_path_writable(sandbox_mode mode, const std::filesystem::path& root) const {
    return mode == sandbox_mode::workspace_write && detail::any_protected_path_exists(root, protected_);
  }

  /// Always empty: Landlock has no runner process. Its structural failure
  /// arrives earlier, as `pre_exec_failed` thrown by the spawn.
  std::optional<std::string> runner_failure(confined_launch&, std::string_view) const { return std::nullopt; }

  bool is_denial(std::string_view err) const noexcept { return detail::icontains_any(err, denial_dialects); }

 private:
  static std::string unavailable_message(sandbox_mode mode, int error) {
    const char* why = error == ENOSYS       ? "this kernel was built without it"
                      : error == EOPNOTSUPP ? "it is built in but disabled at boot"
                                            : "the kernel refused to report its version";
    return fmt::format("landlock cannot confine {} mode: {} (landlock_create_ruleset: {}); {}", mode, why,
                       std::strerror(error), remedy);
  }

  /// Grants `rights` beneath `path`. A path that is not a directory can only
  /// carry file rights, so the others are masked off rather than refused.
  static void allow(int ruleset_fd, sandbox_mode mode, const std::filesystem::path& path, std::uint64_t rights,
                    bool required) {
    detail::unique_fd target(::open(path.c_str(), O_PATH | O_CLOEXEC));
    if (!target) {
      if (!required) return;
      throw sandbox_unavailable(mode, fmt::format("landlock: cannot open {} for a rule: {}", path.string(),
                                                  std::strerror(errno)));
    }
    struct stat info;
    if (::fstat(target.get(), &info) != 0) detail::throw_syscall(fmt::format("fstat {}", path.string()));
    if (!S_ISDIR(info.st_mode)) rights &= detail::landlock_file_rights;
    if (rights == 0) return;
    const detail::landlock_path_beneath_attr rule{rights, target.get()};
    if (detail::landlock_add_rule(ruleset_fd, detail::landlock_rule_path_beneath, &rule, 0) != 0)
      detail::throw_syscall(fmt::format("landlock_add_rule {}", path.string()));
  }

  std::vector<std::filesystem::path> protected_;
};

static_assert(confining_policy<landlock>);

}  // namespace bashexec

// confinement/landlock: native Landlock confinement (docs/contract.md item 13,
// 14). The ruleset and the seccomp filter are built in the parent — the
// filter and the read-only ruleset once per policy object, shared by every
// later spawn — and the child only runs an async-signal-safe hook
// (no_new_privs + landlock_restrict_self + loading the filter), so it needs
// a spawn policy with the `pre_exec` capability (fork_exec).
//
// Rules: every filesystem right the kernel ABI knows is handled; reading and
// executing are allowed from "/"; write-type rights only on the mode's roots:
//   read-only        → /dev/null (file rights: write, truncate)
//   workspace-write  → /dev/null, the workspace root and /tmp (all rights)
// Device ioctls (ABI 5) are handled and granted nowhere, so a reopened
// terminal cannot be driven (TIOCSTI); inherited descriptors are unaffected.
// A command on a terminal of its own (launch_plan::controlling_terminal)
// may also write and drive /dev/tty, which names only its own terminal.
// Metadata. Landlock governs no metadata change at any ABI: chmod, chown,
// utimes/utimensat and setxattr/removexattr pass any domain. So:
//   read-only        → the seccomp filter (detail/kernel/seccomp_filter.hpp, part
//                      `metadata_writes`) makes every metadata-changing
//                      syscall fail with EACCES ("Permission denied", the
//                      denial dialect). Exact: under read-only nothing may
//                      change — even an fchmod on a pipe or socket (stdout)
//                      is refused, which no common tool needs.
//   workspace-write  → no filter can help: metadata changes INSIDE the
//                      workspace must keep working (`chmod +x` of a script),
//                      and a seccomp filter sees no paths. So `chmod 000`
//                      on a host file outside the workspace succeeds, and the
//                      level is `partial`, always.
// Inode flags set by ioctl on regular files (`chattr`: FS_IOC_SETFLAGS,
// FS_IOC_FSSETXATTR, FS_IOC_SETVERSION) pass Landlock too (its ABI 5 ioctl
// right covers device files only); under read-only the same filter refuses
// those ioctl commands. Other filesystem-admin ioctls (FIFREEZE,
// FS_IOC_SETFSLABEL, btrfs subvolume ioctls; root only) are not filtered.
// Enforcement: read-only is `full` from ABI 3 (truncate(2) governed) where
// the filter exists (x86_64, aarch64); `partial` below ABI 3 or without the
// filter. workspace-write is always `partial` (metadata, and protected
// paths — below).
//
// Capabilities. The hook leaves the command none (detail/kernel/capabilities.hpp):
// bounding, ambient, inheritable, permitted and effective sets emptied, so a
// command run by root cannot remount, nsenter, unshare, chroot or open raw
// sockets. Emptying the bounding set needs CAP_SETPCAP, and the protected
// paths' mount namespace CAP_SYS_ADMIN: a spawner without both (an ordinary
// user, root in a container without CAP_SYS_ADMIN) has its child enter a
// user namespace of its own first, mapping the caller's uid and gid 1:1
// (detail/kernel/user_namespace.hpp), where it holds both; the steps are then the
// same as root's. Where the kernel refuses user namespaces (probed once per
// process) the bounding set stays full — no_new_privs keeps exec from using
// it — and protected paths stay writable (below). Signals: from ABI 6 the domain is scoped for signals, so a
// command cannot signal any process outside its own sandbox (the executor,
// its parent, other sessions' commands). The host's /proc entries stay
// visible (no pid namespace here: its init would be the shell, which
// ignores SIGTERM as pid 1 and takes every leftover with it), but Landlock
// denies ptrace-class access across domains, which covers
// /proc/<pid>/environ, mem, fd/ and friends of every process outside.
//
// Protected paths (`sandbox.protected_paths`, `.git` by default) under
// workspace-write: the hook first moves the child into a private mount
// namespace where each protected location (confinement/detail/protected_paths.hpp;
// with `.git`, every repository's gitdir and hooks path) is a read-only
// bind of itself (before
// Landlock, which forbids mount calls; the command then has no capability
// to undo it) — as root directly, as anyone else inside the user namespace
// above. Where neither is possible they are NOT enforced: the spawn leaves
// them writable and says so with `partial` (as workspace-write under
// Landlock always is, for metadata).
// Why Landlock alone cannot: Landlock rules only add access, and a right granted on a directory holds
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
// Network (`sandbox.network`, network_access.hpp). Landlock has no network
// namespace and its ABI 4 rights cover TCP bind/connect only, by port, never
// by address — "loopback only" is not expressible. So `loopback` and `none`
// are enforced alike, stricter than `loopback` asks (the command cannot use
// even a loopback of its own):
//   - the seccomp filter's `network` part (detail/kernel/seccomp_filter.hpp; one
//     program per spawn, combined with the metadata part under read-only),
//     built in the parent and installed by the hook after no_new_privs and
//     landlock_restrict_self:
//     socket/socketpair of every family but AF_UNIX fail with EPERM (TCP,
//     UDP, raw, packet, netlink, vsock …), io_uring_setup with ENOSYS;
//   - ABI >= 4: TCP bind and connect handled with no rule (denied), a second
//     wall behind the filter;
//   - ABI >= 6: abstract unix sockets scoped to the domain, as a network
//     namespace would (bwrap) — named unix sockets stay reachable under both.
// With the filter the network promise is fully governed and the level is the
// file level. On an architecture without the filter (not x86_64/aarch64)
// only Landlock's TCP rights remain: ABI >= 4 → `partial` (UDP and the rest
// are not governed); below ABI 4 nothing would be governed → fail closed,
// `sandbox_unavailable`, for `loopback` as for `none`. A kernel without
// seccomp filters fails the hook → the command never runs (read-only always
// installs a filter where one exists, so such a kernel fails the backend's
// probe: fail-closed, never a silent ungoverned metadata write).
// Under `allowlist` the network is the executor's namespace's work
// (detail/kernel/egress_namespace.hpp: only `lo` and the proxy's listener),
// so no socket filter and no TCP right is added: narrowing connect to the
// proxy's port would also cut the command off from servers it starts on its
// own loopback, which bwrap leaves reachable, for no wall the namespace does
// not already give.
// A refused socket prints "Operation not permitted", not the file-denial
// dialect, so a network failure is never reported as `denied`.
//
// Runner failure is structural: when the hook fails the spawn throws
// `pre_exec_failed` (the command never ran), so `runner_failure` has nothing
// to add and returns empty. Denial dialect: "permission denied" (EACCES);
// a write refused by a protected path's bind fails EROFS instead, so such a
// spawn sets `confined_launch::read_only_binds` and "read-only file system"
// counts as a denial too (detail/engine/verdict.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bashexec/config.hpp"
#include "bashexec/confinement.hpp"
#include "bashexec/confinement/detail/protected_paths.hpp"
#include "bashexec/detail/kernel/capabilities.hpp"
#include "bashexec/detail/kernel/landlock.hpp"
#include "bashexec/detail/kernel/seccomp_support.hpp"
#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/kernel/user_namespace.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/detail/text/text_match.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/launch.hpp"

namespace bashexec {

namespace detail {

/// What a landlock policy builds once and every spawn shares (the seccomp
/// programs, the read-only ruleset): confinement/impl/landlock.ipp.
struct landlock_built_once;
BASHEXEC_DECL std::shared_ptr<landlock_built_once> make_landlock_built_once();
class seccomp_filter;

/// What the child's hook reads: the ruleset descriptor number, valid in the
/// child because fork_exec runs hooks before renumbering descriptors, and
/// the seccomp filter when one applies (read-only, a confined network). All
/// of it is built in the parent; the hook only loads it.
struct landlock_ruleset {
  /// Keeps the shared ruleset descriptor and the filter alive (empty in the
  /// shared read-only context, which lives inside them).
  std::shared_ptr<const landlock_built_once> built;
  /// This spawn's own ruleset (workspace-write: it grants the call's root);
  /// empty when `number` is the shared read-only one.
  unique_fd fd;
  int number = -1;
  const seccomp_filter* filter = nullptr;
  /// Not privileged: enter a user namespace of the caller's own first
  /// (detail/kernel/user_namespace.hpp), for the mount namespace and the bounding set.
  bool user_namespace = false;
  /// Paths to bind read-only in a private mount namespace, and the C
  /// strings the child reads (owned by `read_only_binds`).
  std::vector<std::string> read_only_binds;
  std::vector<const char*> read_only_bind_names;
};

/// The pre-exec hook. Async-signal-safe: bare system calls only.
BASHEXEC_DECL int landlock_apply(const void* context) noexcept;

}  // namespace detail

class landlock {
 public:
  static constexpr bool confines = true;
  static constexpr bool needs_pre_exec = true;
  static constexpr std::string_view name = "landlock";
  /// What a denied file effect reads like on stderr (EACCES).
  static constexpr std::array<std::string_view, 1> denial_dialects{"permission denied"};
  /// The lowest ABI that governs every file CONTENT effect the modes promise
  /// (truncate(2) from 3). Metadata is governed only under read-only, by the
  /// seccomp filter: see `file_level`.
  static constexpr int full_enforcement_abi = 3;
  static constexpr std::string_view remedy =
      "enable Landlock: Linux >= 5.13 built with CONFIG_SECURITY_LANDLOCK=y and \"landlock\" in "
      "the lsm= boot parameter (ABI 3, Linux >= 6.2, for full enforcement)";

  /// Landlock reads only the shared knobs (protected paths, network).
  using config = no_config;

  explicit landlock(const sandbox_config& shared, const config& = {})
      : protected_(shared.protected_paths), scan_limit_(shared.protected_scan_limit), network_(shared.network) {}

  /// Whether this policy confines the network under `abi` fully (`full`), only
  /// partly (`partial`: TCP alone), or not at all (empty: `prepare` throws
  /// sandbox_unavailable). Meaningless for network_access::full.
  static std::optional<enforcement> network_level(int abi) noexcept {
    if (detail::seccomp_filter_supported) return enforcement::full;
    if (abi >= detail::landlock_net_abi) return enforcement::partial;
    return std::nullopt;
  }

  /// The file level of a `mode` spawn under `abi` (protected paths aside):
  /// read-only is `full` from `full_enforcement_abi` where the metadata
  /// filter exists; workspace-write is always `partial` (metadata changes
  /// outside the workspace are not governed — see the header comment).
  static enforcement file_level(sandbox_mode mode, int abi) noexcept {
    if (mode == sandbox_mode::read_only && abi >= full_enforcement_abi && detail::seccomp_filter_supported)
      return enforcement::full;
    return enforcement::partial;
  }

  /// The kernel's Landlock ABI version, or -errno when there is none.
  static int abi() noexcept { return detail::landlock_abi(); }

  confined_launch prepare(sandbox_mode mode, const std::filesystem::path& root, launch_plan& plan) const;

  /// Whether a workspace-write spawn under `root` leaves an existing
  /// protected path writable: only when the executor cannot bind it
  /// read-only (not privileged and no user namespace; see the header
  /// comment). Such a spawn is `partial` anyway (`file_level`); this names
  /// one more reason.
  bool leaves_protected_path_writable(sandbox_mode mode, const std::filesystem::path& root) const;

  /// Whether protected paths can be bound read-only in a private mount
  /// namespace, and the bounding set emptied: the spawning process is
  /// privileged, or the kernel lets its child enter a user namespace of its
  /// own (probed once per process).
  static bool can_bind_read_only() noexcept { return privileged() || detail::user_namespace_available(); }

  /// Whether a confined command's bounding set ends up empty: the spawner
  /// may drop it (CAP_SETPCAP), or its child gets a user namespace of its own.
  static bool empties_bounding_set() noexcept {
    return detail::has_effective_capability(CAP_SETPCAP) || detail::user_namespace_available();
  }

  /// Whether the hook can do root's steps as it is: CAP_SYS_ADMIN for the
  /// mount namespace and CAP_SETPCAP for the bounding set. Anyone else —
  /// an ordinary user, or root in a container without CAP_SYS_ADMIN — gets
  /// them from a user namespace of the child's own, where one is allowed.
  static bool privileged() noexcept {
    return detail::has_effective_capability(CAP_SYS_ADMIN) && detail::has_effective_capability(CAP_SETPCAP);
  }

  /// Always empty: Landlock has no runner process. Its structural failure
  /// arrives earlier, as `pre_exec_failed` thrown by the spawn.
  std::optional<std::string> runner_failure(confined_launch&, std::string_view, std::string_view = {}) const {
    return std::nullopt;
  }

  bool is_denial(std::string_view err) const noexcept { return detail::icontains_any(err, denial_dialects); }

 private:
  static const char* hook_stage(const detail::landlock_ruleset& ruleset) noexcept;

  /// A ruleset handling every right `version` knows (and TCP when `network`
  /// is confined), granting reads from "/", writes to /dev/null and, under
  /// workspace-write, everything beneath `root` and /tmp.
  static detail::unique_fd build_ruleset(sandbox_mode mode, const std::filesystem::path& root, int version,
                                         bool network, bool terminal);

  static std::string unavailable_message(sandbox_mode mode, int error);

  /// Grants `rights` beneath `path`. A path that is not a directory can only
  /// carry file rights, so the others are masked off rather than refused.
  static void allow(int ruleset_fd, sandbox_mode mode, const std::filesystem::path& path, std::uint64_t rights,
                    bool required);

  std::vector<std::filesystem::path> protected_;
  std::size_t scan_limit_;
  network_access network_;
  /// Built on first use and shared by copies of this policy: a read-only
  /// spawn builds nothing at all, a workspace-write one only its ruleset.
  std::shared_ptr<detail::landlock_built_once> built_ = detail::make_landlock_built_once();
};

static_assert(confining_policy<landlock>);

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/confinement/impl/landlock.ipp"
#endif

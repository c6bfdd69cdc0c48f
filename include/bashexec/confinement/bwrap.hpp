// confinement/bwrap: confinement by bubblewrap (docs/contract.md item 13, 14,
// 16). The profile itself is built by confinement/detail/bwrap_profile.hpp and applied
// by confinement/detail/bwrap_style.hpp, which `runner_command` shares. Own configuration: `bwrap::config::program`.
//
// Profile: `--ro-bind / / --dev /dev --unshare-pid --proc /proc --cap-drop ALL
// --die-with-parent`:
//   - a pid namespace with its own /proc: the host's processes are out of
//     sight (no /proc/<pid>/environ of the executor or its parent), and when
//     the namespace's init (bwrap's) exits, the kernel kills every process
//     left in it — setsid'd, double-forked and daemonised ones included;
//   - no capabilities, even when bashexec runs as root (bwrap keeps them for
//     a privileged caller unless told): no remount, no nsenter, no unshare,
//     no raw sockets, no ptrace of anything outside. An unprivileged bwrap
//     empties every set itself; a privileged one (root) empties all but the
//     bounding set, so there the command is started through util-linux's
//     `setpriv --bounding-set=-all` (same process, one more exec) with just
//     CAP_SETPCAP kept for it to do so. With no_new_privs (bwrap sets it)
//     the bounding set could not be used anyway; emptying it makes "no
//     capabilities" hold for every set a command can read. Without setpriv
//     on the host the bounding set stays (documented; nothing else changes);
//   - die-with-parent: bwrap gets SIGKILL when the thread that spawned it
//     ends, so the executor spawns background tasks on its reactor thread,
//     which lives as long as the executor (a short-lived caller thread would
//     otherwise take the task down with it);
//   - `launch_plan::read_only_paths` (the executor's spill directory) bound
//     read-only at their own path last, so a printed spill path can be read
//     by a later command under every mode, but never written, renamed or
//     removed — not even under a private /tmp or a writable workspace.
// workspace-write adds `--tmpfs /tmp --bind ROOT ROOT` (tmpfs first, so a
// workspace under /tmp is bound over the fresh tmpfs, not hidden by it), then
// `--ro-bind P P` for each protected location under ROOT
// (confinement/detail/protected_paths.hpp: the configured paths that exist, a symlink at
// its target, and with `.git` every repository's gitdir and hooks path;
// after the workspace bind, so each is mounted over the writable tree,
// docs/contract.md "Beyond"). Where they cannot be established the spawn
// throws sandbox_unavailable. The
// check runs at each spawn; a path created during the command (`git init`)
// is protected from the next spawn on. Group kills still reach the command
// from outside: bwrap leads the process group, and its death ends the
// namespace.
//
// A command on a terminal (launch_plan::controlling_terminal): bwrap is
// spawned without one, and inside the sandbox util-linux's `setsid --ctty`
// (resolved once from the fixed system locations, like setpriv; same
// process, one more exec) starts the command's own session there and takes
// the terminal, so the terminal's foreground group is the command's and
// not bwrap's: a ^C reaches the command, never the runner. bwrap's child is
// no group leader, so setsid does not fork and the exit status is the
// command's own.
//
// Network (`sandbox.network`, network_access.hpp): `loopback` and `none` add
// `--unshare-net`, a fresh network namespace whose only interface is its own
// loopback (bwrap brings it up). Nothing outside the sandbox is reachable —
// not the internet, not the host's 127.0.0.1 services, not the host's
// abstract unix sockets (they are per network namespace). The private
// loopback is kept under `none` too: bwrap cannot leave it out, and it
// reaches nothing but the sandbox itself, so "nothing outside is reachable"
// holds. A network namespace touches neither the process group (kills work
// as before) nor the status fd; the level stays `full`. Named unix sockets
// on the read-only tree stay reachable (connect(2) is not a write that a
// read-only mount refuses): local IPC, not network.
//
// Runner failure is structural. `prepare` passes `--json-status-fd N` with the
// pipe's write end appended to `plan.inherited_fds` (N = 3 + its index) and
// keeps the read end in `confined_launch::status`. bwrap writes `"exit-code"`
// there only once the sandbox is set up and the command was exec'd, so a
// settled run without it never ran the command — whatever the command itself
// printed (a command printing "bwrap: hello" is not a runner failure). The
// same report makes a stop that reached bwrap only after the command had
// ended no kill of the command: `reported_exit_code`.
#pragma once

#include <array>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "bashexec/config.hpp"
#include "bashexec/confinement.hpp"
#include "bashexec/confinement/detail/bwrap_style.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/detail/trust/find_program.hpp"
#include "bashexec/launch.hpp"

namespace bashexec {

class bwrap : public detail::bwrap_style {
 public:
  static constexpr std::string_view name = "bwrap";
  /// What a denied file effect reads like on stderr (EROFS).
  static constexpr std::array<std::string_view, 1> denial_dialects{"read-only file system"};
  /// How bwrap's own failures begin on stderr. Only a fallback: the status
  /// fd decides whenever bwrap reported a started child.
  static constexpr std::array<std::string_view, 1> runner_failure_signatures{"bwrap: "};
  static constexpr std::string_view remedy =
      "install bubblewrap (apt-get install bubblewrap) or set bwrap::config::program to its path";

  /// bwrap's own knobs.
  struct config {
    /// The bubblewrap binary: an absolute path, or a bare name looked up in
    /// the fixed system search path (never $PATH; detail/trust/find_program.hpp).
    std::filesystem::path program = "bwrap";
    /// util-linux's setpriv, which empties the bounding set of a bwrap run as
    /// root; the same rules.
    std::filesystem::path setpriv = "setpriv";
    /// util-linux's setsid, which gives a command on a terminal its
    /// controlling terminal inside the sandbox; the same rules.
    std::filesystem::path setsid = "setsid";

    void validate() const {
      detail::validate_program_name(program, "bwrap.program");
      detail::validate_program_name(setpriv, "bwrap.setpriv");
      detail::validate_program_name(setsid, "bwrap.setsid");
    }
  };

  /// Resolves `own.program` once; a missing program is not an error here
  /// (prepare reports it), so a chain can still be built.
  explicit bwrap(const sandbox_config& shared) : bwrap(shared, config{}) {}
  bwrap(const sandbox_config& shared, const config& own);

  /// The resolved absolute bwrap path, empty when none was found.
  const std::optional<std::filesystem::path>& program() const noexcept { return program_.path; }

  /// argv becomes `bwrap --json-status-fd N <profile> -- <argv>`; the status
  /// pipe's write end is appended to `plan.inherited_fds` and also held by
  /// `keep_alive` (which may be released as soon as the spawn returned).
  confined_launch prepare(sandbox_mode mode, const std::filesystem::path& root, launch_plan& plan) const;

  /// Call once, after a non-zero exit: drains the status channel. The
  /// reason is bwrap's first stderr line (or a fallback when it was silent).
  /// The signature is only a fallback where the channel cannot decide; it
  /// matches anywhere in the combined output, ignoring case (contract 16).
  std::optional<std::string> runner_failure(confined_launch& launch, std::string_view err,
                                            std::string_view out = {}) const;

  bool is_denial(std::string_view err) const noexcept;

  /// Call once, instead of `runner_failure`, after bwrap died of a signal:
  /// the command's exit code when bwrap had reported it on the status
  /// channel — the command ended on its own before the stop reached bwrap.
  std::optional<int> reported_exit_code(confined_launch& launch) const;

 private:
  static std::string reason(std::string_view err, std::string_view out);

  detail::program_lookup program_;
  std::optional<detail::program_lookup> setpriv_;  // privileged bwrap: empties the bounding set
  detail::program_lookup setsid_;                  // a command on a terminal takes it inside
};

static_assert(confining_policy<bwrap>);

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/confinement/impl/bwrap.ipp"
#endif

// config: everything an executor can be configured with, validated once at
// construction (`validate` throws std::invalid_argument naming the field) —
// except a confinement's own knobs, which its `config` type holds
// (confinement.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bashexec/containment.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/egress.hpp"
#include "bashexec/network_access.hpp"
#include "bashexec/network_policy.hpp"
#include "bashexec/sandbox_mode.hpp"
#include "bashexec/terminal.hpp"

namespace bashexec {

/// Knobs every confining policy shares (ignored by `unconfined`). What only
/// one backend needs (bwrap's program, a runner's argv) lives in that
/// confinement's own `config` type (confinement.hpp), given to the executor
/// beside this one: a new confinement never edits this struct.
struct sandbox_config {
  /// The mode a request without one runs under. A sandboxing executor uses
  /// `read-only` when this is empty.
  std::optional<sandbox_mode> default_mode;
  /// The root `workspace-write` may write under; defaults to the executor cwd.
  std::optional<std::filesystem::path> workspace_root;
  /// Bound on one functional probe of a `chain` candidate.
  std::chrono::milliseconds probe_timeout{5000};
  /// Paths, relative to the workspace root, that stay read-only under
  /// `workspace-write` (docs/contract.md "Beyond": `.git` cannot be rewritten by a
  /// confined command). Each must be relative and free of `..`; one that does
  /// not exist at spawn time is skipped; a symlink is protected at its target
  /// when that lies inside the workspace. bwrap and `runner_command` bind each
  /// existing one read-only; Landlock does the same in a private mount
  /// namespace where it can have one — see confinement/landlock.hpp.
  /// `.git` stands for every repository in the workspace: each nested `.git`
  /// (directory or gitdir file, and the gitdir it names), the hooks path
  /// and included files their config names (confinement/detail/protected_paths.hpp).
  std::vector<std::filesystem::path> protected_paths{".git"};
  /// The most directory entries one workspace-write spawn reads looking for
  /// nested `.git` (when `.git` is protected). A larger workspace is refused
  /// (`sandbox_unavailable`) rather than left with a repository writable.
  /// The walk runs at each workspace-write spawn: about 58 ms per 10,000
  /// directories on the machine of docs/benchmarks.md "Protected paths".
  std::size_t protected_scan_limit = 200000;
  /// Network confinement of every confined call, orthogonal to the mode
  /// (danger-full-access ignores it). `full` (the default) changes nothing;
  /// `loopback` and `none` give bwrap and `runner_command` `--unshare-net`
  /// (a private network namespace: only its own loopback); Landlock denies
  /// every non-unix socket (seccomp) plus TCP bind/connect (ABI >= 4), so
  /// there `loopback` acts as `none`. See network_access.hpp and
  /// docs/security.md "Network".
  network_access network = network_access::full;
  /// Under `network = allowlist`: what the egress proxy lets through
  /// (allowed and denied domains, address ranges, methods, a static host
  /// map, limits; network_policy.hpp, docs/network.md). Validated then, with
  /// the field named (`network.allowed_domains[2]`); under any other network
  /// a restriction here is refused at construction (nothing would enforce it).
  network_policy egress;
  /// Under `network = allowlist`: what serves each command's proxy listener.
  /// Required then; `network::asio_egress_gateway` (network/egress_proxy.hpp,
  /// Boost.Asio and Beast) is the shipped one. Shared by every call.
  std::shared_ptr<egress_gateway> gateway;
};

/// Optional resource limits for every spawn (docs/contract.md "Beyond": a fork bomb
/// or a runaway command cannot take the host down). Empty fields inherit the
/// host's limits; all empty (the default) changes nothing. Each given value
/// becomes the child's soft and hard limit (so the command cannot raise it
/// back — unless it runs as root), clamped to the host's own hard limit: a
/// limit never loosens the host's. Applied with setrlimit in the child right
/// before exec, so they need a spawn policy with a pre-exec hook
/// (`spawn_with<fork_exec>`); an executor over `posix_spawner` rejects them.
/// All but `max_processes` bound each process of the command separately.
struct resource_limits {
  /// RLIMIT_NPROC. Counted per real user id across the whole system — the
  /// host's own processes and other sessions of the same user included —
  /// and not enforced at all for root (CAP_SYS_RESOURCE / CAP_SYS_ADMIN).
  std::optional<std::uint64_t> max_processes;
  /// RLIMIT_AS: virtual address space per process, in bytes (not resident
  /// memory: runtimes that reserve large mappings need headroom).
  std::optional<std::uint64_t> max_address_space_bytes;
  /// RLIMIT_CPU: CPU time per process. SIGXCPU at the limit, SIGKILL one
  /// second later for a process that survives it. Wall time is `timeout`.
  std::optional<std::chrono::seconds> max_cpu_time;
  /// RLIMIT_FSIZE: the largest file a process may write, in bytes; a write
  /// past it raises SIGXFSZ (or fails with EFBIG when that is ignored).
  std::optional<std::uint64_t> max_file_size_bytes;
  /// RLIMIT_NOFILE: one more than the highest descriptor number a process
  /// may open.
  std::optional<std::uint64_t> max_open_files;

  bool any() const noexcept {
    return max_processes || max_address_space_bytes || max_cpu_time || max_file_size_bytes || max_open_files;
  }
};

/// How long settled background tasks are remembered, so an executor that
/// lives for days (a `serve` process) holds bounded memory. Past any limit the
/// task that settled first is forgotten first: its output tails are freed,
/// its spill files removed, and its id then throws `task_forgotten` (an
/// `unknown_task`) from get / read_output / kill / wait. Ids are never reused.
/// Never forgotten: a running task, a settled one whose detached members
/// (`daemon >/dev/null &`) are still alive (disposal must still reach them;
/// they count towards the limits meanwhile), and — for the count and the
/// bytes — the task that settled last (its output is bounded by the caps
/// already). See docs/architecture.md "Retention".
struct task_retention {
  /// Settled tasks kept.
  std::size_t max_tasks = 1000;
  /// Bytes settled tasks hold in memory: their output tails (up to the cap
  /// per stream) and command text.
  std::uint64_t max_bytes = std::uint64_t{16} << 20;
  /// Time since a task settled.
  std::chrono::milliseconds max_age{3600000};
};

/// The warm pool of the prespawned spawn policy (spawn/prespawned.hpp),
/// used only by an executor composed with spawn_with<prespawned>.
struct prespawn_settings {
  /// The most waiting processes a key may keep.
  static constexpr std::size_t max_per_key = 64;
  /// Waiting processes kept per key (1 … max_per_key).
  std::size_t per_key = 2;
  /// A key nobody asked for this long loses its processes.
  std::chrono::milliseconds idle_timeout{60000};
  /// Keys pooled at once (at least 1); a plan of a further key is served cold.
  std::size_t max_keys = 8;
};

/// Which parts of the host environment never reach a command (contract 7,
/// widened: docs/security.md "The environment"). Matching ignores case.
/// Deliberately broad: a false positive costs a variable, a false negative
/// leaks a secret to a model-driven command.
struct environment_scrub {
  /// A name holding one of these anywhere is dropped (`AWS_SECRET_ACCESS_KEY`,
  /// `PGPASSWORD`, `AZURE_CLIENT_CREDENTIALS`).
  std::vector<std::string> name_fragments{"KEY",        "SECRET",     "TOKEN",        "PASSWORD", "PASSWD",
                                          "PASSPHRASE", "CREDENTIAL", "AUTHORIZATION", "COOKIE"};
  /// A name with one of these as a whole `_`-separated word is dropped
  /// (`MYSQL_PWD`, `GH_PAT`, `NPM_AUTH`, `DOCKER_PASS`), while names that
  /// merely contain the letters stay (`PATH`, `GIT_AUTHOR_NAME`).
  std::vector<std::string> name_words{"PWD", "PASS", "PAT", "AUTH", "CREDS"};
  /// Names kept whatever the rules above say: the shell's own `PWD` and `OLDPWD`.
  std::vector<std::string> keep{"PWD", "OLDPWD"};
  /// In every value kept, `scheme://user:password@host` loses its password
  /// (`DATABASE_URL=postgres://u:pw@db/x` reaches the command as
  /// `postgres://u@db/x`).
  bool strip_url_passwords = true;
};

struct executor_config {
  /// Default workdir; the process cwd when empty.
  std::optional<std::filesystem::path> cwd;
  std::filesystem::path shell = "/bin/bash";
  std::chrono::milliseconds default_timeout{120000};
  /// Larger requested timeouts are clamped to this.
  std::chrono::milliseconds max_timeout{600000};
  /// SIGTERM → SIGKILL delay.
  std::chrono::milliseconds kill_grace{3000};
  /// How long a foreground run waits for descendants holding its output open
  /// after the shell exited, before killing what is left of the group.
  std::chrono::milliseconds drain_timeout{2000};
  /// What of the host environment is kept from commands (contract 7).
  environment_scrub scrub;
  /// Per-stream in-memory output cap.
  std::size_t output_cap = 64000;
  /// Where the private spill directory is created. Empty: a per-user 0700
  /// `$XDG_RUNTIME_DIR/bashexec` when XDG_RUNTIME_DIR is a private directory
  /// of this user, else /var/tmp — never /tmp, which workspace-write grants.
  /// A parent must belong to this user or root, and be sticky when others
  /// may write it. A confined command must never write, rename or remove a
  /// spill file (docs/contract.md "Beyond"): under a root workspace-write
  /// grants, each such spawn binds the directory read-only (Landlock refuses
  /// the spawn where it cannot).
  std::optional<std::filesystem::path> spill_parent;
  /// Keep the spill directory after disposal (post-mortems).
  bool keep_spill_dir = false;
  /// Total bytes of spill files kept; past it, the oldest settled owners'
  /// spill files are removed first.
  std::uint64_t spill_budget_bytes = std::uint64_t{1} << 30;
  /// Which settled background tasks are remembered; see task_retention.
  task_retention retention;
  /// Receives contained errors (a throwing listener); stderr when empty.
  std::function<void(std::string_view)> error_sink;
  sandbox_config sandbox;
  /// Per-spawn resource limits; none by default.
  resource_limits limits;
  /// What kills, disposal and the death of the executor's process reach;
  /// see containment.hpp. `automatic` (cgroup where it works) by default.
  process_containment containment = process_containment::automatic;
  /// containment = cgroup or automatic: the cgroup v2 directory the
  /// executor's own cgroup (`bashexec-<pid>-<random>`, holding one cgroup
  /// per spawn) is created in. Empty: this process's own v2 cgroup (from
  /// /proc/self/cgroup, under the cgroup2 mount found in
  /// /proc/self/mountinfo). Must be absolute; the host must be allowed to
  /// move its children into it (it lies under a cgroup the host may write).
  std::optional<std::filesystem::path> cgroup_parent;
  /// The warm pool, for spawn_with<prespawned>; ignored by other spawn policies.
  prespawn_settings prespawn;
  /// Commands on a terminal, input and input waits (terminal.hpp).
  terminal_settings terminal;
  /// The largest shell state (exec_request::capture_state) taken, in bytes
  /// of its record; a larger one is dropped with a notice.
  std::size_t shell_state_limit = std::size_t{1} << 20;
};

namespace detail {

/// Positive, and at most INT_MAX ms (about 24.8 days): deadlines are added
/// to the clock and poll/epoll take an int.
BASHEXEC_DECL void require_positive(std::chrono::milliseconds value, std::string_view field);

/// A mode on the ladder; anything else (a cast integer, memory from
/// elsewhere) is refused rather than printed as "unknown" and hoped to fail
/// closed.
BASHEXEC_DECL void require_known_mode(sandbox_mode mode, std::string_view field);

}  // namespace detail

/// Throws std::invalid_argument naming the first invalid field.
BASHEXEC_DECL void validate(const executor_config& config);

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/impl/config.ipp"
#endif

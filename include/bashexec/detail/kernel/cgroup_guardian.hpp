// detail/kernel/cgroup_guardian: kills an executor's cgroup when the executor's
// process dies, by any signal, SIGKILL included (docs/contract.md "Beyond": no
// orphans, ever).
//
// A cgroup does not die with the process that created it: without help,
// every command still running when the host is SIGKILLed (or crashes) lives
// on in its cgroup. So the executor starts one tiny watcher per executor
// cgroup: `/bin/sh` with a short script whose stdin is the read end of a
// pipe. Only the executor's process holds the write end (O_CLOEXEC, so no
// command it spawns inherits it: fork_exec and posix_spawn close every
// other descriptor anyway). The watcher blocks reading; the write end closes
// when the process dies, however it dies, and the watcher's read hits end
// of file. It then writes "1" to cgroup.kill of the executor's cgroup (which
// kills every per-spawn cgroup under it, recursively), removes the empty
// directories (retrying while killed processes finish exiting, about 5 s at
// most) and exits. Normal disposal closes the pipe too — after the executor
// killed its tasks and removed its cgroups, so the watcher finds nothing to
// do — and reaps it: no zombie, no leaked descriptor.
//
// Why a pipe and not PR_SET_PDEATHSIG: the death signal is bound to the
// *thread* that created the child, not to the process (a short-lived
// spawning thread would fire it early — bwrap's --die-with-parent shows
// exactly that), it only reaches the direct child, which a double fork
// leaves behind, and it cannot kill a cgroup. The pipe's end of file comes
// exactly when the last descriptor of the process is gone.
//
// The watcher is not in the cgroup it kills: it is spawned without joining
// one, so it stays in the host's own cgroup. It leads its own session
// (POSIX_SPAWN_SETSID) and ignores the terminal and termination signals, so
// a Ctrl-C or a signal to the host's process group kills the host but not
// the watcher; a deliberate SIGKILL of the watcher itself disables it.
// Known gap: a host that forks without exec after creating the executor
// shares the write end with that child, so the watcher waits for both.
#pragma once

#include <filesystem>
#include <utility>

#include <sys/types.h>

#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// The watcher's script; $1 is the executor's cgroup directory. It loops on
/// `read` (nobody writes; a line would not end it), then kills and removes
/// the subtree: sub-cgroups first, as cgroupfs requires.
inline constexpr const char* guardian_script =
    "trap '' HUP INT QUIT TERM PIPE TSTP TTIN TTOU USR1 USR2 ALRM\n"
    "while read -r _; do :; done\n"
    "[ -d \"$1\" ] || exit 0\n"
    "echo 1 > \"$1/cgroup.kill\"\n"
    "rmtree() { for c in \"$1\"/*/; do [ -d \"$c\" ] && rmtree \"${c%/}\"; done; rmdir \"$1\"; }\n"
    "i=0\n"
    "while [ -d \"$1\" ] && [ $i -lt 500 ]; do\n"
    "  rmtree \"$1\" 2>/dev/null && exit 0\n"
    "  i=$((i+1)); sleep 0.01\n"
    "done\n";

class cgroup_guardian {
 public:
  cgroup_guardian() = default;

  /// Spawns the watcher of `cgroup_dir` (which need not exist yet: create it
  /// after this returns, so no moment exists in which a cgroup of ours has
  /// no watcher). Throws infrastructure_error naming the failed step.
  static cgroup_guardian start(const std::filesystem::path& cgroup_dir, const std::filesystem::path& sh = "/bin/sh");

  cgroup_guardian(cgroup_guardian&& other) noexcept
      : write_end_(std::move(other.write_end_)), pid_(std::exchange(other.pid_, -1)) {}
  cgroup_guardian& operator=(cgroup_guardian&& other) noexcept;
  cgroup_guardian(const cgroup_guardian&) = delete;
  cgroup_guardian& operator=(const cgroup_guardian&) = delete;
  ~cgroup_guardian() { stop(); }

  pid_t pid() const noexcept { return pid_; }
  explicit operator bool() const noexcept { return pid_ > 0; }

  /// Closes the pipe (the watcher kills and removes what is left of the
  /// cgroup — nothing, after a clean disposal — and exits) and reaps it.
  void stop() noexcept;

 private:
  unique_fd write_end_;
  pid_t pid_ = -1;
};

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/cgroup_guardian.ipp"
#endif

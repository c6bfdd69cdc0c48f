// spawn/fork_exec: the spawn policy that supports a pre-exec hook (Landlock
// is applied natively in the child). clone3(CLONE_PIDFD) gives the pid and a
// pidfd atomically; kernels or seccomp profiles without clone3 fall back to
// _Fork()+pidfd_open.
//
// A spawn policy `S` provides:
//   static constexpr bool supports_pre_exec;
//   static constexpr std::string_view name;
//   static spawned_process spawn(const launch_plan&);
// and keeps every guarantee listed in launch.hpp.
//
// The child, in order (async-signal-safe work only; every array it touches is
// built by the parent before the clone):
//   1. setpgid(0, 0);
//   2. every signal disposition back to SIG_DFL, then an empty signal mask;
//   3. the plan's hook — BEFORE renumbering, so descriptor numbers named in
//      the hook's context (a Landlock ruleset fd) are still the parent's;
//   4. stdin/stdout/stderr to 0/1/2 and inherited_fds[i] to 3+i (each source
//      first duplicated above the target range, so overlaps cannot clobber);
//   5. chdir(workdir) (skipped when the plan's workdir is empty);
//   6. every descriptor >= 3+inherited marked close-on-exec (close_range);
//   7. execve(argv[0], argv, env).
// A failing step writes {stage, errno} to a close-on-exec error pipe and the
// child _exit(127)s. The parent reads the pipe to EOF, reaps the child and
// throws: `pre_exec_failed(hook.stage, errno)` for the hook, otherwise
// `infrastructure_error` naming the step ("chdir /x: No such file or
// directory", "execve /bin/nope: …").
#pragma once

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "bashexec/detail/unique_fd.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/launch.hpp"

namespace bashexec {

namespace detail {

#ifdef SYS_clone3
inline constexpr long sys_clone3 = SYS_clone3;
#else
inline constexpr long sys_clone3 = 435;
#endif
#ifdef SYS_close_range
inline constexpr long sys_close_range = SYS_close_range;
#else
inline constexpr long sys_close_range = 436;
#endif
#ifdef SYS_pidfd_open
inline constexpr long sys_pidfd_open = SYS_pidfd_open;
#else
inline constexpr long sys_pidfd_open = 434;
#endif

inline constexpr std::uint64_t clone_pidfd_flag = 0x00001000;  // CLONE_PIDFD
inline constexpr unsigned close_range_cloexec_flag = 1U << 2;  // CLOSE_RANGE_CLOEXEC

/// struct clone_args, version 0 (the fields clone3 has had since 5.3).
struct clone3_args {
  std::uint64_t flags;
  std::uint64_t pidfd;
  std::uint64_t child_tid;
  std::uint64_t parent_tid;
  std::uint64_t exit_signal;
  std::uint64_t stack;
  std::uint64_t stack_size;
  std::uint64_t tls;
};

/// Which child step failed; travels through the error pipe.
enum class child_stage : int { setpgid = 1, hook, dup, chdir, cloexec, execve };

struct child_report {
  child_stage stage;
  int error;
};

/// Everything the child needs, resolved in the parent before the clone.
struct child_context {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* workdir = nullptr;  // empty string: stay where we are
  const int* sources = nullptr;   // plan fds, in target order 0, 1, 2, 3, …
  int* scratch = nullptr;         // same length; the child's own COW copy
  int count = 0;
  int error_fd = -1;
  pre_exec_hook hook;
};

[[noreturn]] inline void child_fail(int error_fd, child_stage stage, int error) noexcept {
  const child_report report{stage, error};
  while (::write(error_fd, &report, sizeof report) < 0 && errno == EINTR) {
  }
  ::_exit(127);
}

/// Runs in the freshly cloned child. Async-signal-safe system calls only.
[[noreturn]] inline void child_main(const child_context& ctx) noexcept {
  int error_fd = ctx.error_fd;
  if (::setpgid(0, 0) != 0) child_fail(error_fd, child_stage::setpgid, errno);

  // Dispositions first, mask second: a signal arriving in between must find
  // the default action, never a parent handler running in the child. Errors
  // are ignored: glibc refuses its two reserved real-time signals, and exec
  // resets handlers anyway; it is SIG_IGN that would otherwise survive.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);

  if (ctx.hook)
    if (int error = ctx.hook.run(ctx.hook.context); error != 0)
      child_fail(error_fd, child_stage::hook, error);

  // Move the error pipe and every source above the target range before any
  // dup2, so a source that already sits on a target number is not clobbered.
  const int first_free = ctx.count;
  if (int moved = ::fcntl(error_fd, F_DUPFD_CLOEXEC, first_free); moved >= 0)
    error_fd = moved;
  else
    child_fail(error_fd, child_stage::dup, errno);
  for (int i = 0; i < ctx.count; ++i) {
    ctx.scratch[i] = ::fcntl(ctx.sources[i], F_DUPFD_CLOEXEC, first_free);
    if (ctx.scratch[i] < 0) child_fail(error_fd, child_stage::dup, errno);
  }
  for (int i = 0; i < ctx.count; ++i)
    if (::dup2(ctx.scratch[i], i) < 0) child_fail(error_fd, child_stage::dup, errno);

  if (ctx.workdir[0] != '\0' && ::chdir(ctx.workdir) != 0)
    child_fail(error_fd, child_stage::chdir, errno);

  // Everything from `count` up — host descriptors without O_CLOEXEC, the
  // scratch copies, the error pipe — closes at exec. The error pipe keeps
  // working until then, which is the point of close-on-exec over close.
  if (::syscall(sys_close_range, static_cast<unsigned>(first_free), ~0U, close_range_cloexec_flag) != 0) {
    if (errno != ENOSYS && errno != EINVAL) child_fail(error_fd, child_stage::cloexec, errno);
    // Kernels before 5.11: mark each possible descriptor.
    struct rlimit limit;
    rlim_t top = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 1024;
    if (top > 65536) top = 65536;
    for (int fd = first_free; fd < static_cast<int>(top); ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }

  ::execve(ctx.path, ctx.argv, ctx.envp);
  child_fail(error_fd, child_stage::execve, errno);
}

/// Blocks every signal for its lifetime, so the child starts with no parent
/// handler able to run before its dispositions are reset.
class all_signals_blocked {
 public:
  all_signals_blocked() noexcept {
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &saved_);
  }
  ~all_signals_blocked() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  all_signals_blocked(const all_signals_blocked&) = delete;
  all_signals_blocked& operator=(const all_signals_blocked&) = delete;

 private:
  sigset_t saved_;
};

/// Pointers into `strings`, null-terminated, as execve wants them.
inline std::vector<char*> c_string_array(const std::vector<std::string>& strings) {
  std::vector<char*> array;
  array.reserve(strings.size() + 1);
  for (const auto& s : strings) array.push_back(const_cast<char*>(s.c_str()));
  array.push_back(nullptr);
  return array;
}

inline void reap(pid_t pid) noexcept {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace detail

/// Spawn policy with pre-exec hook support: clone3(CLONE_PIDFD) + execve.
struct fork_exec {
  static constexpr bool supports_pre_exec = true;
  static constexpr std::string_view name = "fork_exec";

  static spawned_process spawn(const launch_plan& plan) {
    if (plan.argv.empty()) throw std::invalid_argument("launch_plan.argv must not be empty");

    std::vector<char*> argv = detail::c_string_array(plan.argv);
    std::vector<char*> envp = detail::c_string_array(plan.env);
    const std::string workdir = plan.workdir.string();

    // A plan stream left at -1 reads/writes /dev/null rather than whatever
    // the host has on that number.
    detail::unique_fd dev_null;
    auto stream = [&](int fd) {
      if (fd >= 0) return fd;
      if (!dev_null) {
        dev_null.reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
        if (!dev_null) detail::throw_syscall("open /dev/null");
      }
      return dev_null.get();
    };
    std::vector<int> sources{stream(plan.stdin_fd), stream(plan.stdout_fd), stream(plan.stderr_fd)};
    sources.insert(sources.end(), plan.inherited_fds.begin(), plan.inherited_fds.end());
    std::vector<int> scratch(sources.size(), -1);

    detail::pipe_pair errors = detail::make_pipe();
    const detail::child_context ctx{plan.argv.front().c_str(),
                                    argv.data(),
                                    envp.data(),
                                    workdir.c_str(),
                                    sources.data(),
                                    scratch.data(),
                                    static_cast<int>(sources.size()),
                                    errors.write.get(),
                                    plan.hook};

    auto [pid, pidfd] = clone_child(ctx);
    errors.write.reset();  // our copy: EOF must mean "the child exec'd or died"

    detail::child_report report{};
    std::size_t got = 0;
    auto* bytes = reinterpret_cast<char*>(&report);
    while (got < sizeof report) {
      ssize_t n = ::read(errors.read.get(), bytes + got, sizeof report - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    if (got == 0) return spawned_process{pid, std::move(pidfd)};

    detail::reap(pid);
    if (got != sizeof report) throw infrastructure_error("fork_exec: truncated error report from the child");
    throw_child_failure(plan, workdir, report);
  }

 private:
  struct cloned {
    pid_t pid;
    detail::unique_fd pidfd;
  };

  static cloned clone_child(const detail::child_context& ctx) {
    // clone3 is tried until the kernel (or a seccomp filter) says it is not
    // there; container runtimes commonly answer ENOSYS for it.
    static std::atomic<bool> clone3_missing{false};
    int pidfd = -1;
    pid_t pid = -1;
    int error = 0;
    {
      detail::all_signals_blocked blocked;
      if (!clone3_missing.load(std::memory_order_relaxed)) {
        detail::clone3_args args{};
        args.flags = detail::clone_pidfd_flag;
        args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
        args.exit_signal = SIGCHLD;
        pid = static_cast<pid_t>(::syscall(detail::sys_clone3, &args, sizeof args));
        if (pid == 0) detail::child_main(ctx);
        if (pid < 0 && (errno == ENOSYS || errno == EPERM)) clone3_missing.store(true);
      }
      if (pid < 0 && clone3_missing.load(std::memory_order_relaxed)) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
        pid = ::_Fork();  // no atfork handlers: nothing may allocate in the child
#else
        pid = ::fork();
#endif
        if (pid == 0) detail::child_main(ctx);
      }
      error = errno;
    }
    if (pid < 0) detail::throw_syscall(clone3_missing.load() ? "fork" : "clone3", error);
    if (pidfd < 0) {
      pidfd = static_cast<int>(::syscall(detail::sys_pidfd_open, pid, 0));
      if (pidfd < 0) {
        error = errno;
        ::kill(pid, SIGKILL);
        detail::reap(pid);
        detail::throw_syscall("pidfd_open", error);
      }
    }
    return {pid, detail::unique_fd(pidfd)};
  }

  [[noreturn]] static void throw_child_failure(const launch_plan& plan, const std::string& workdir,
                                               const detail::child_report& report) {
    using detail::child_stage;
    const char* text = std::strerror(report.error);
    switch (report.stage) {
      case child_stage::hook:
        throw pre_exec_failed(plan.hook.stage ? plan.hook.stage : "pre-exec", report.error);
      case child_stage::chdir:
        throw infrastructure_error(fmt::format("chdir {}: {}", workdir, text));
      case child_stage::execve:
        throw infrastructure_error(fmt::format("execve {}: {}", plan.argv.front(), text));
      case child_stage::setpgid:
        throw infrastructure_error(fmt::format("setpgid: {}", text));
      case child_stage::dup:
        throw infrastructure_error(fmt::format("dup2: {}", text));
      case child_stage::cloexec:
        throw infrastructure_error(fmt::format("close_range: {}", text));
    }
    throw infrastructure_error(fmt::format("fork_exec: child failed at stage {}: {}",
                                           static_cast<int>(report.stage), text));
  }
};

}  // namespace bashexec

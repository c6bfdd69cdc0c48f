// laws/spawn: the laws every spawn policy keeps (launch.hpp, spawn.hpp), as
// a function a policy's author runs against their own type, from any test
// framework or none:
//   auto report = bashexec::laws::check_spawn_laws<my_spawner>(my_settings);
//   if (!report.passed()) …print report.violations…
// The laws, each checked with real processes through launch plans and the
// policy's process_handle (and, last, through an executor holding it):
//   - session: the child leads its own session and process group, without
//     a controlling terminal (contract 4);
//   - descriptors: fds 0-2 and the plan's inherited ones renumbered from 3
//     (even when their numbers overlap the targets), nothing else; the
//     parent keeps no descriptor on any path, success or failure (contract 8);
//   - failures: a missing workdir or program throws infrastructure_error
//     naming it (not a hook failure), an empty argv std::invalid_argument,
//     a plan needing a capability the policy lacks std::invalid_argument
//     naming the field and the policy — and nothing runs (contract 2);
//   - the plan: exactly its environment, in order; its working directory;
//     its stdin, /dev/null when it gives none;
//   - signals: default dispositions and an empty mask whatever the host set;
//     exit codes and signal deaths reported through the pidfd;
//     signal_group reaches every member of the group (contracts 3, 4, 8);
//   - hooks (with the pre_exec capability): run in order before the command;
//     a failing one names its stage and the later ones never run;
//   - one const instance spawns from several threads at once;
//   - no child is left behind by any of the above, and an executor over the
//     policy runs a command through its one instance.
// Caveats: the descriptor laws count /proc/self/fd and put descriptors on
// numbers 3 and 4 for a moment (restored), and one law ignores SIGPIPE and
// blocks SIGWINCH on the calling thread for a moment: run the check where no
// other thread of the process opens descriptors or reaps children.
// The shipped policies pass them (tests/laws/test_spawn_laws.cpp); so must a new
// one (docs/extending.md). Scratch directories go under `scratch`.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/hana/for_each.hpp>
#include <boost/hana/type.hpp>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "bashexec/basic_executor.hpp"
#include "bashexec/config.hpp"
#include "bashexec/detail/engine/spawn_step.hpp"
#include "bashexec/detail/kernel/pseudo_terminal.hpp"
#include "bashexec/detail/kernel/read_text_file.hpp"
#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/impl/basic_executor.hpp"  // composes its own executor over the policy
#include "bashexec/launch.hpp"
#include "bashexec/laws/detail/scratch.hpp"
#include "bashexec/laws/report.hpp"
#include "bashexec/policies.hpp"
#include "bashexec/process_handle.hpp"
#include "bashexec/spawn.hpp"

namespace bashexec::laws {

namespace detail {

using bashexec::unique_fd;

/// What one child did.
struct spawn_outcome {
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string out;
  std::string err;
};

/// Reads `out` and `err` to end of file (30 s without a byte is an error).
inline std::pair<std::string, std::string> read_both(unique_fd out, unique_fd err) {
  std::pair<std::string, std::string> text;
  pollfd fds[2] = {{out.get(), POLLIN, 0}, {err.get(), POLLIN, 0}};
  std::string* sinks[2] = {&text.first, &text.second};
  int open_count = 2;
  while (open_count > 0) {
    const int ready = ::poll(fds, 2, 30000);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) throw std::runtime_error("the child's pipes saw nothing for 30 s");
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  return text;
}

/// Waits for the handle's pidfd and reaps through the handle (the engine's path).
inline spawn_outcome collect(process_handle& child, unique_fd out, unique_fd err) {
  spawn_outcome result;
  std::tie(result.out, result.err) = read_both(std::move(out), std::move(err));
  pollfd exit_fd{child.pidfd(), POLLIN, 0};
  if (::poll(&exit_fd, 1, 10000) != 1) throw std::runtime_error("the child's pidfd did not report its exit in 10 s");
  auto facts = child.try_reap();
  if (!facts) throw std::runtime_error("try_reap found nothing after the pidfd reported the exit");
  if (child.unreaped()) throw std::runtime_error("the handle is still unreaped after try_reap reaped it");
  result.exit_code = facts->exit_code;
  result.signal = facts->signal;
  return result;
}

inline launch_plan plan_for(std::vector<std::string> argv) {
  launch_plan plan;
  plan.argv = std::move(argv);
  plan.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  plan.workdir = "/";
  return plan;
}

inline launch_plan bash_plan(const std::string& command) { return plan_for({"/bin/bash", "-c", command}); }

/// Children of this process (any thread), zombies included.
inline std::vector<long> children_of_self() {
  std::vector<long> out;
  std::error_code ignored;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ignored)) {
    // A thread that ends between listing and reading has no children.
    std::istringstream in(bashexec::detail::read_text_file((task.path() / "children").c_str()).value_or(""));
    long pid = 0;
    while (in >> pid) out.push_back(pid);
  }
  return out;
}

template <class Pred>
bool eventually(Pred done, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

inline bool no_children_left() {
  return eventually([] { return children_of_self().empty(); }, std::chrono::seconds(5));
}

/// Live (not zombie) processes whose process group is `pgid`.
inline std::vector<long> live_group_members(long pgid) {
  std::vector<long> members;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ignored)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] < '0' || name[0] > '9') continue;
    // A process that exits while it is read (ESRCH) is no member.
    const std::string stat = bashexec::detail::read_text_file((entry.path() / "stat").c_str()).value_or("");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 1));
    char state = 0;
    long ppid = 0, pgrp = 0;
    fields >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != 'Z' && state != 'X') members.push_back(std::atol(name.c_str()));
  }
  return members;
}

inline std::size_t open_fd_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

inline std::string read_all(int fd) {
  std::string text;
  char buffer[256];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
  return text;
}

/// Temporarily puts `fd` on descriptor number `slot`, restoring what was there.
class fd_slot {
 public:
  fd_slot(int slot, int fd) : slot_(slot) {
    saved_ = ::fcntl(slot, F_DUPFD_CLOEXEC, 200);  // -1 when the slot was free
    if (::dup2(fd, slot) != slot) bashexec::detail::throw_syscall("dup2");
  }
  ~fd_slot() {
    if (saved_ >= 0) {
      ::dup2(saved_, slot_);
      ::close(saved_);
    } else {
      ::close(slot_);
    }
  }
  fd_slot(const fd_slot&) = delete;
  fd_slot& operator=(const fd_slot&) = delete;

 private:
  int slot_;
  int saved_;
};

/// A hook that appends its letter to the pipe named in its context.
struct marker_context {
  int fd;
  char letter;
};
inline int write_marker(const void* ctx) noexcept {
  const auto* marker = static_cast<const marker_context*>(ctx);
  return ::write(marker->fd, &marker->letter, 1) == 1 ? 0 : errno;
}

/// The configuration the laws build policies and executors from: short
/// grace and drain, messages silenced.
inline executor_config laws_executor_config() {
  executor_config config;
  config.kill_grace = std::chrono::milliseconds(300);
  config.drain_timeout = std::chrono::milliseconds(300);
  config.error_sink = [](std::string_view) {};
  return config;
}

template <class S>
class spawn_laws {
 public:
  explicit spawn_laws(const spawn_config_t<S>& own) : own_(own) {}

  /// A fresh instance, as an executor would build it.
  S make() const { return bashexec::detail::make_spawn_policy<S>(config_, own_); }

  /// Spawns `plan` with a const instance: stdout and stderr to pipes, stdin
  /// from `stdin_fd` (-1: left to the policy).
  spawn_outcome run(launch_plan plan, int stdin_fd = -1) const {
    const S spawner = make();
    if constexpr (requires { spawner.wait_until_warm(std::chrono::seconds(5)); }) {
      // A pool: serve this plan from a waiting process, not the cold path.
      // The throwaway spawn makes the key known; its process is reaped here.
      if (plan.hooks.empty() || plan.hook_owner) {
        launch_plan warm_up = plan_for({"/bin/true"});
        warm_up.hooks = plan.hooks;
        warm_up.limits = plan.limits;
        warm_up.hook_owner = plan.hook_owner;
        spawner.spawn(warm_up).wait_blocking();
        if (!spawner.wait_until_warm(std::chrono::seconds(10)))
          throw std::runtime_error("the pool did not warm up in 10 s");
      }
    }
    auto out = bashexec::detail::make_pipe();
    auto err = bashexec::detail::make_pipe();
    plan.stdin_fd = stdin_fd;
    plan.stdout_fd = out.write.get();
    plan.stderr_fd = err.write.get();
    process_handle child = spawner.spawn(plan);
    if (child.pid() <= 0 || child.pidfd() < 0)
      throw std::runtime_error("spawn returned a handle without a pid or a pidfd");
    out.write.reset();
    err.write.reset();
    return collect(child, std::move(out.read), std::move(err.read));
  }

  const executor_config& config() const noexcept { return config_; }
  const spawn_config_t<S>& own() const noexcept { return own_; }

 private:
  executor_config config_ = laws_executor_config();
  spawn_config_t<S> own_;
};

}  // namespace detail

/// Checks spawn policy `S`, built from `own` (its settings, spawn.hpp) as an
/// executor would build it, against the spawn laws above. Never
/// `unavailable`: spawning needs no backend.
template <class S>
  requires spawn_policy<S> && spawn_constructible<S>
report check_spawn_laws(const spawn_config_t<S>& own = {}, const std::filesystem::path& scratch = "/var/tmp") {
  namespace d = detail;
  using bashexec::detail::make_pipe;
  using bashexec::unique_fd;
  report result;
  const std::string_view name = S::name;
  const d::spawn_laws<S> laws(own);
  auto law = [&](std::string_view what, auto&& body) { d::check_law(result, name, what, body); };

  law("the child leads its own session and process group, without a terminal", [&](auto violated) {
    auto seen = laws.run(d::bash_plan("echo $$; cut -d' ' -f5,6 /proc/$$/stat; : < /dev/tty || echo no-tty"));
    std::istringstream lines(seen.out);
    long pid = 0, pgid = 0, sid = 0;
    std::string tty;
    lines >> pid >> pgid >> sid >> tty;
    if (seen.exit_code != 0 || pid <= 0 || pgid != pid || sid != pid || tty != "no-tty")
      violated(fmt::format("pid {}, process group {}, session {}, terminal {} (exit {})", pid, pgid, sid,
                           tty == "no-tty" ? "none" : "reachable", seen.exit_code.value_or(-1)));
  });

  law("the child gets fds 0-2 and the inherited ones renumbered from 3, nothing else", [&](auto violated) {
    unique_fd leaky(::open("/dev/null", O_RDONLY));  // deliberately not close-on-exec
    auto first = make_pipe();
    auto second = make_pipe();
    launch_plan plan = d::bash_plan("ls -1 /proc/$$/fd; echo one >&3; echo two >&4");
    plan.inherited_fds = {first.write.get(), second.write.get()};
    auto seen = laws.run(std::move(plan));
    std::vector<int> fds;
    std::istringstream lines(seen.out);
    for (int fd; lines >> fd;) fds.push_back(fd);
    std::sort(fds.begin(), fds.end());
    if (seen.exit_code != 0 || fds != std::vector<int>{0, 1, 2, 3, 4})
      violated(fmt::format("the child had fds {} (exit {})", fds, seen.exit_code.value_or(-1)));
    first.write.reset();
    second.write.reset();
    const std::string on3 = d::read_all(first.read.get()), on4 = d::read_all(second.read.get());
    if (on3 != "one\n" || on4 != "two\n")
      violated(fmt::format("fd 3 carried \"{}\" and fd 4 \"{}\" instead of the plan's first and second", on3, on4));
  });

  law("inherited descriptors are renumbered 3, 4, … even when their numbers overlap the targets",
      [&](auto violated) {
        auto a = make_pipe();
        auto b = make_pipe();
        d::spawn_outcome seen;
        {
          // Host fd 3 holds A and host fd 4 holds B; the child must get fd 3
          // = B and fd 4 = A, which a naive dup2 sequence would clobber.
          d::fd_slot slot3(3, a.write.get());
          d::fd_slot slot4(4, b.write.get());
          launch_plan plan = d::bash_plan("printf to-3 >&3; printf to-4 >&4");
          plan.inherited_fds = {4, 3};
          seen = laws.run(std::move(plan));
        }
        a.write.reset();
        b.write.reset();
        const std::string on_b = d::read_all(b.read.get()), on_a = d::read_all(a.read.get());
        if (seen.exit_code != 0 || !seen.err.empty() || on_b != "to-3" || on_a != "to-4")
          violated(fmt::format("fd 3 reached \"{}\" and fd 4 \"{}\" (stderr \"{}\")", on_b, on_a, seen.err));
      });

  law("the parent keeps no descriptor on any path, success or failure", [&](auto violated) {
    const std::size_t before = d::open_fd_count();
    (void)laws.run(d::bash_plan("true"));
    launch_plan missing_dir = d::bash_plan("true");
    missing_dir.workdir = "/nonexistent";
    try {
      (void)laws.run(std::move(missing_dir));
      violated("a missing workdir did not throw");
    } catch (const infrastructure_error&) {
    }
    if constexpr (spawn_can<S, spawn_capability::pre_exec>) {
      launch_plan failing_hook = d::bash_plan("true");
      failing_hook.hooks.add(pre_exec_hook{[](const void*) noexcept { return EACCES; }, nullptr, "hook"});
      try {
        (void)laws.run(std::move(failing_hook));
        violated("a failing hook did not throw");
      } catch (const pre_exec_failed&) {
      }
    }
    {
      process_handle child = laws.make().spawn(d::bash_plan("true"));  // -1 streams: /dev/null for the spawn
      child.wait_blocking();
    }
    if (const std::size_t after = d::open_fd_count(); after != before)
      violated(fmt::format("{} descriptors open before, {} after", before, after));
    if (!d::no_children_left()) violated("a child was left unreaped");
  });

  law("a missing workdir throws infrastructure_error naming the path, and nothing runs", [&](auto violated) {
    launch_plan plan = d::bash_plan("true");
    plan.workdir = "/nonexistent/bashexec-workdir";
    try {
      (void)laws.run(std::move(plan));
      violated("spawn did not throw");
    } catch (const pre_exec_failed& error) {
      violated(fmt::format("a chdir failure was reported as a hook failure: {}", error.what()));
    } catch (const infrastructure_error& error) {
      if (std::string_view(error.what()).find("/nonexistent/bashexec-workdir: No such file or directory") ==
          std::string_view::npos)
        violated(fmt::format("the error does not name the path and errno: {}", error.what()));
    }
    if (!d::no_children_left()) violated("a child was left unreaped");
  });

  law("the environment is exactly the plan's, in its order", [&](auto violated) {
    launch_plan plan = d::plan_for({"/usr/bin/env"});
    plan.env = {"ZED=last first", "A=1", "EMPTY=", "WITH=equals=inside"};
    auto seen = laws.run(std::move(plan));
    if (seen.exit_code != 0 || seen.out != "ZED=last first\nA=1\nEMPTY=\nWITH=equals=inside\n")
      violated(fmt::format("env printed \"{}\"", seen.out));
  });

  law("the child starts in the plan's working directory", [&](auto violated) {
    d::scratch_directory dir(scratch, "bashexec-laws-cwd-");
    launch_plan plan = d::plan_for({"/bin/pwd", "-P"});
    plan.workdir = dir.path();
    auto seen = laws.run(std::move(plan));
    const std::string expected = std::filesystem::canonical(dir.path()).string() + "\n";
    if (seen.exit_code != 0 || seen.out != expected)
      violated(fmt::format("pwd printed \"{}\", not \"{}\"", seen.out, expected));
  });

  law("stdin is the plan's descriptor, and /dev/null when the plan leaves it at -1", [&](auto violated) {
    auto input = make_pipe();
    if (::write(input.write.get(), "piped\n", 6) != 6) bashexec::detail::throw_syscall("write");
    input.write.reset();
    auto piped = laws.run(d::plan_for({"/bin/cat"}), input.read.get());
    if (piped.out != "piped\n") violated(fmt::format("cat of the plan's stdin printed \"{}\"", piped.out));
    auto none = laws.run(d::plan_for({"/bin/readlink", "/proc/self/fd/0"}));
    if (none.out != "/dev/null\n") violated(fmt::format("without a stdin, fd 0 is \"{}\"", none.out));
  });

  law("default signal dispositions and an empty mask, whatever the host set", [&](auto violated) {
    // The host ignores SIGPIPE and blocks another signal; the child must see
    // neither (an ignored SIGPIPE would make `yes | head -1` spin on EPIPE).
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    struct sigaction saved {};
    if (::sigaction(SIGPIPE, &ignore, &saved) != 0) bashexec::detail::throw_syscall("sigaction");
    sigset_t block, old_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGWINCH);
    ::pthread_sigmask(SIG_BLOCK, &block, &old_mask);
    struct restore {
      struct sigaction& action;
      sigset_t& mask;
      ~restore() {
        ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
        ::sigaction(SIGPIPE, &action, nullptr);
      }
    } restored{saved, old_mask};
    auto status = laws.run(d::plan_for({"/bin/grep", "-E", "^Sig(Ign|Blk):", "/proc/self/status"}));
    auto pipeline = laws.run(d::bash_plan("yes | head -1"));
    if (pipeline.exit_code != 0 || pipeline.out != "y\n" || !pipeline.err.empty())
      violated(fmt::format("`yes | head -1` printed \"{}\" and \"{}\" on stderr", pipeline.out, pipeline.err));
    if (status.exit_code != 0 || status.out != "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n")
      violated(fmt::format("the child started with \"{}\"", status.out));
  });

  law("the handle reports exit codes and signal deaths through the pidfd", [&](auto violated) {
    auto exited = laws.run(d::bash_plan("exit 42"));
    if (exited.exit_code != 42 || exited.signal)
      violated(fmt::format("`exit 42` reported exit {} signal {}", exited.exit_code.value_or(-1),
                           exited.signal.value_or(0)));
    auto killed = laws.run(d::bash_plan("kill -TERM $$"));
    if (killed.exit_code || killed.signal != SIGTERM)
      violated(fmt::format("`kill -TERM $$` reported exit {} signal {}", killed.exit_code.value_or(-1),
                           killed.signal.value_or(0)));
  });

  law("signal_group reaches every member of the child's group", [&](auto violated) {
    {
      // A pool's waiting processes are its children until it goes.
      const S spawner = laws.make();
      auto out = make_pipe();
      launch_plan plan = d::bash_plan("sleep 30 & echo started; wait");
      plan.stdout_fd = out.write.get();
      process_handle child = spawner.spawn(plan);
      out.write.reset();
      char buffer[8];
      if (::read(out.read.get(), buffer, sizeof buffer) <= 0) violated("the child never said it started");
      child.signal_group(SIGKILL);
      child.wait_blocking();
      if (child.unreaped()) violated("wait_blocking left the child unreaped");
      if (!d::eventually([&] { return d::live_group_members(child.pid()).empty(); }, std::chrono::seconds(5)))
        violated("a member of the group outlived signal_group(SIGKILL)");
    }
    if (!d::no_children_left()) violated("a child was left unreaped");
  });

  law("a plan without argv, or with a missing program, throws and leaves nothing", [&](auto violated) {
    {
      const S spawner = laws.make();
      try {
        (void)spawner.spawn(launch_plan{});
        violated("an empty argv did not throw");
      } catch (const std::invalid_argument&) {
      }
    }
    try {
      (void)laws.run(d::plan_for({"/bin/bashexec-no-such-program"}));
      violated("spawned a missing program");
    } catch (const infrastructure_error& error) {
      const std::string_view what = error.what();
      if (what.find("/bin/bashexec-no-such-program") == what.npos || what.find("No such file or directory") == what.npos)
        violated(fmt::format("the error does not name the program and errno: {}", what));
    }
    if (!d::no_children_left()) violated("a child was left unreaped");
  });

  law("a policy refuses a plan that needs a capability it lacks, and runs nothing", [&](auto violated) {
    d::scratch_directory dir(scratch, "bashexec-laws-cap-");
    unique_fd some_fd(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    boost::hana::for_each(all_spawn_capabilities, [&](auto capability) {
      using tag = typename decltype(capability)::type;
      if constexpr (!spawn_can<S, tag>) {
        launch_plan plan = d::bash_plan("touch ran");
        plan.workdir = dir.path();
        if constexpr (std::is_same_v<tag, spawn_capability::pre_exec>)
          plan.hooks.add(pre_exec_hook{[](const void*) noexcept { return 0; }, nullptr, "no-op"});
        if constexpr (std::is_same_v<tag, spawn_capability::limits>) plan.limits.add({RLIMIT_CORE, 0, 0});
        if constexpr (std::is_same_v<tag, spawn_capability::cgroup>) plan.cgroup_procs_fd = some_fd.get();
        if constexpr (std::is_same_v<tag, spawn_capability::controlling_terminal>) plan.controlling_terminal = true;
        if (!tag::needed_by(plan)) return;  // no plan field needs it (prespawned)
        try {
          process_handle child = laws.make().spawn(plan);
          child.wait_blocking();
          violated(fmt::format("ran a plan needing {} it cannot honour", tag::field));
        } catch (const std::invalid_argument& error) {
          const std::string_view what = error.what();
          if (what.find(tag::field) == what.npos || what.find(name) == what.npos)
            violated(fmt::format("the refusal does not name {} and the policy: {}", tag::field, what));
        }
        if (std::filesystem::exists(dir.path() / "ran"))
          violated(fmt::format("a plan needing {} ran", tag::field));
      }
    });
    if (!d::no_children_left()) violated("a child was left unreaped");
  });

  if constexpr (spawn_can<S, spawn_capability::controlling_terminal>) {
    law("a plan with controlling_terminal makes its terminal the child's, its group the foreground",
        [&](auto violated) {
          bashexec::detail::pseudo_terminal pty = bashexec::detail::open_pseudo_terminal({});
          launch_plan plan = d::bash_plan(
              "exec 3</dev/tty || exit 9; read -r _ _ _ _ _ _ _ tpgid _ </proc/$$/stat; echo \"tpgid=$tpgid pid=$$\"");
          plan.stdin_fd = plan.stdout_fd = plan.stderr_fd = pty.slave.get();
          plan.controlling_terminal = true;
          process_handle child = laws.make().spawn(plan);
          pty.slave.reset();
          std::string seen;
          for (;;) {  // to EIO: every holder of the slave is gone
            pollfd ready{pty.master.get(), POLLIN, 0};
            if (::poll(&ready, 1, 10000) != 1) break;
            char buffer[512];
            const ssize_t n = ::read(pty.master.get(), buffer, sizeof buffer);
            if (n > 0) seen.append(buffer, static_cast<std::size_t>(n));
            else if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            else break;
          }
          pollfd exited{child.pidfd(), POLLIN, 0};
          if (::poll(&exited, 1, 10000) != 1) throw std::runtime_error("the child did not exit in 10 s");
          const auto exit = child.try_reap();
          const std::string expected = fmt::format("tpgid={0} pid={0}\n", child.pid());
          if (!exit || exit->exit_code != 0 || seen != expected)
            violated(fmt::format("the child printed \"{}\" (exit {}), not \"{}\"", seen,
                                 exit ? exit->exit_code.value_or(-1) : -1, expected));
        });
  }

  if constexpr (spawn_can<S, spawn_capability::pre_exec>) {
    law("hooks run in the order they were added, before the command", [&](auto violated) {
      auto marks = make_pipe();
      d::marker_context a{marks.write.get(), 'a'}, b{marks.write.get(), 'b'}, c{marks.write.get(), 'c'};
      launch_plan plan = d::bash_plan("true");
      plan.hooks.add({&d::write_marker, &a, "a"});
      plan.hooks.add({&d::write_marker, &b, "b"});
      plan.hooks.add({&d::write_marker, &c, "c"});
      auto seen = laws.run(std::move(plan));
      marks.write.reset();
      const std::string order = d::read_all(marks.read.get());
      if (seen.exit_code != 0 || order != "abc") violated(fmt::format("the hooks ran as \"{}\"", order));
    });

    law("a failing hook names its own stage, and the hooks after it never run", [&](auto violated) {
      auto marks = make_pipe();
      d::marker_context a{marks.write.get(), 'a'}, c{marks.write.get(), 'c'};
      launch_plan plan = d::bash_plan("echo should-not-run");
      plan.hooks.add({&d::write_marker, &a, "first"});
      plan.hooks.add({[](const void*) noexcept { return EPERM; }, nullptr, "second-stage"});
      plan.hooks.add({&d::write_marker, &c, "third"});
      try {
        (void)laws.run(std::move(plan));
        violated("spawn did not throw");
      } catch (const pre_exec_failed& error) {
        if (error.stage() != "second-stage" || error.error() != EPERM ||
            std::string(error.what()) != "second-stage: Operation not permitted")
          violated(fmt::format("the failure names stage \"{}\", error {}: {}", error.stage(), error.error(),
                               error.what()));
      }
      marks.write.reset();
      const std::string ran = d::read_all(marks.read.get());
      if (ran != "a") violated(fmt::format("the hooks that ran: \"{}\"", ran));
      if (!d::no_children_left()) violated("a child was left unreaped");
    });
  }

  law("one const instance spawns from several threads at once", [&](auto violated) {
    std::atomic<int> succeeded{0};
    {
      const S spawner = laws.make();
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t)
        threads.emplace_back([&spawner, &succeeded] {
          for (int i = 0; i < 8; ++i) {
            try {
              process_handle child = spawner.spawn(d::plan_for({"/bin/true"}));
              pollfd exit_fd{child.pidfd(), POLLIN, 0};
              if (::poll(&exit_fd, 1, 10000) != 1) continue;
              auto facts = child.try_reap();
              if (facts && facts->exit_code == 0) ++succeeded;
            } catch (...) {
            }
          }
        });
      for (auto& thread : threads) thread.join();
    }  // a pool's waiting processes are its children until it goes
    if (succeeded != 32) violated(fmt::format("{} of 32 concurrent spawns succeeded", succeeded.load()));
    if (!d::no_children_left()) violated("a child was left unreaped");
  });

  law("an executor over the policy runs a command through its one instance", [&](auto violated) {
    basic_executor<policies<spawn_with<S>>> executor(laws.config(), {}, laws.own());
    auto seen = executor.run(executor.resolve({.command = "echo hello; exit 3"}));
    auto task = executor.wait(executor.start(executor.resolve({.command = "echo background"})));
    if (seen.exit_code != 3 || seen.out.text != "hello\n")
      violated(fmt::format("the run exited {} printing \"{}\"", seen.exit_code.value_or(-1), seen.out.text));
    if (task.exit_code != 0) violated(fmt::format("the background task exited {}", task.exit_code.value_or(-1)));
  });
  return result;
}

}  // namespace bashexec::laws

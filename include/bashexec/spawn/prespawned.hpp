// spawn/prespawned: a spawn policy with a warm pool — processes forked ahead
// of the call, in their own session, their plan's pre-exec hooks already run
// (a Landlock domain already enforced), waiting for the command-dependent half
// of a plan: argv, env, workdir and the descriptors. Each runs one command
// (execve of exactly the plan's argv, so `bash -c` is a cold `bash -c`) and
// is never reused.
//
// Lifecycle (docs/policies.md, "prespawned"):
//   - Key: everything fixed before the command is known — the hooks
//     (function, context, stage), the limits and the read_only_paths. A plan
//     is pooled only when it has no hooks or a `hook_owner` (launch.hpp) that
//     keeps their contexts alive for later calls; else it is served cold.
//   - A call whose key has a waiting process takes it (a warm spawn); any
//     other is served cold by fork_exec — the same child steps — and asks for
//     a refill. Refill runs on one background thread owned by the policy, off
//     the caller's path, up to `config::per_key` per key.
//   - A key nobody asked for in `config::idle_timeout` loses its processes.
//   - The destructor kills and reaps every waiting process; none of them
//     holds any host descriptor (detail/prespawn_child.hpp), and none holds
//     another's socket, so a command from the pool sees no pool machinery.
//   - Cgroup: the parent writes the taken process's pid to the plan's
//     cgroup_procs_fd before it sends the command, so the process is in the
//     call's cgroup before any command code runs (the cold path's child
//     writes "0" itself instead). Limits are applied right before exec, as
//     in the cold path (an RLIMIT_NOFILE under the descriptor numbers would
//     break the renumbering).
// What may differ from a cold spawn: state the process inherited from the
// host when it was forked rather than at the call — umask, rlimits and
// cgroup of the host at fork time (the call's own limits and cgroup are
// applied at the call).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/hana/set.hpp>
#include <boost/hana/type.hpp>

#include <fmt/format.h>

#include "bashexec/detail/fork_exec_child.hpp"
#include "bashexec/detail/pidfd.hpp"
#include "bashexec/detail/prespawn_child.hpp"
#include "bashexec/detail/unique_fd.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/launch.hpp"
#include "bashexec/process_handle.hpp"
#include "bashexec/spawn.hpp"
#include "bashexec/spawn/fork_exec.hpp"

namespace bashexec {

namespace detail {

/// One waiting process: its pidfd and the parent's end of its socket.
/// Killed and reaped when let go of without being handed out.
struct warm_process {
  pid_t pid = -1;
  unique_fd pidfd;
  unique_fd channel;
  /// A page shared with the process: its first int is set once the process
  /// has read its command (detail/prespawn_child.hpp).
  void* shared = nullptr;

  warm_process() = default;
  warm_process(warm_process&& other) noexcept
      : pid(other.pid),
        pidfd(std::move(other.pidfd)),
        channel(std::move(other.channel)),
        shared(std::exchange(other.shared, nullptr)) {}
  warm_process& operator=(warm_process&& other) noexcept {
    discard();
    pid = other.pid;
    pidfd = std::move(other.pidfd);
    channel = std::move(other.channel);
    shared = std::exchange(other.shared, nullptr);
    return *this;
  }
  ~warm_process() {
    discard();
    if (shared) ::munmap(shared, shared_bytes);
  }

  static constexpr std::size_t shared_bytes = 4096;
  bool claimed() const noexcept { return __atomic_load_n(static_cast<int*>(shared), __ATOMIC_ACQUIRE) != 0; }

  /// SIGKILL through the pidfd (never a pid that may have been reused),
  /// then the reap.
  void discard() noexcept {
    channel.reset();
    if (!pidfd) return;
    ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
    siginfo_t info{};
    while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd.get()), &info, WEXITED) < 0 &&
           errno == EINTR) {
    }
    pidfd.reset();
  }
};

/// A pool key and its waiting processes.
struct prespawn_entry {
  pre_exec_hook_set hooks;
  resource_limit_set limits;
  std::vector<std::filesystem::path> read_only_paths;
  std::shared_ptr<const void> hook_owner;
  std::deque<warm_process> ready;
  std::chrono::steady_clock::time_point last_used;
  std::chrono::steady_clock::time_point retry_at;  // after a failed start

  bool matches(const launch_plan& plan) const {
    if (plan.hooks.size() != hooks.size() || plan.limits.size() != limits.size()) return false;
    for (std::size_t i = 0; i < hooks.size(); ++i)
      if (plan.hooks[i].run != hooks[i].run || plan.hooks[i].context != hooks[i].context ||
          plan.hooks[i].stage != hooks[i].stage)
        return false;
    for (std::size_t i = 0; i < limits.size(); ++i)
      if (plan.limits[i].resource != limits[i].resource || plan.limits[i].soft != limits[i].soft ||
          plan.limits[i].hard != limits[i].hard)
        return false;
    return plan.read_only_paths == read_only_paths;
  }
};

/// Forks one waiting process for `entry`'s key (detail/prespawn_child.hpp).
inline warm_process start_warm_process(const prespawn_entry& entry) {
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) throw_syscall("socketpair");
  unique_fd parent_end(ends[0]);
  unique_fd child_end(ends[1]);

  warm_process process;
  process.shared = ::mmap(nullptr, warm_process::shared_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                          -1, 0);
  if (process.shared == MAP_FAILED) {
    process.shared = nullptr;
    throw_syscall("mmap (prespawned flag)");
  }
  int* const claimed = static_cast<int*>(process.shared);
  child_context ctx;
  ctx.error_fd = child_end.get();
  ctx.hooks = entry.hooks.begin();
  ctx.hook_count = static_cast<int>(entry.hooks.size());
  ctx.limits = entry.limits.begin();
  ctx.limit_count = static_cast<int>(entry.limits.size());
  real_fork forked = [&] {
    all_signals_blocked blocked;
    real_fork f;
    if (f.pid == 0) waiting_child_main(ctx, claimed);
    return f;
  }();
  child_end.reset();
  if (forked.pid < 0) throw_syscall(forked.call, forked.error);
  process.pid = forked.pid;
  if (forked.pidfd >= 0) {
    process.pidfd.reset(forked.pidfd);
  } else {
    const int fd = static_cast<int>(::syscall(sys_pidfd_open, forked.pid, 0));
    if (fd < 0) {
      const int error = errno;
      ::kill(forked.pid, SIGKILL);
      reap_blocking(forked.pid);
      throw_syscall("pidfd_open", error);
    }
    process.pidfd.reset(fd);
  }
  process.channel = std::move(parent_end);
  return process;
}

/// Sends the whole of `data`; false when the peer is gone (EPIPE,
/// ECONNRESET). Other errors throw.
inline bool send_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return false;
    if (n < 0) throw_syscall("send (prespawned claim)");
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

/// Reads one child_report; false on end of file (a partial one throws).
inline bool read_report(int fd, child_report& report) {
  std::size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(&report);
  while (got < sizeof report) {
    const ssize_t n = ::read(fd, bytes + got, sizeof report - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ECONNRESET) break;
    if (n < 0) throw_syscall("read (prespawned report)");
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got == 0) return false;
  if (got != sizeof report) throw infrastructure_error("prespawned: truncated report from the child");
  return true;
}

}  // namespace detail

/// Spawn policy with a warm pool of processes per key; see the file comment.
class prespawned {
 public:
  static constexpr std::string_view name = "prespawned";
  static constexpr auto capabilities = boost::hana::make_set(
      boost::hana::type_c<spawn_capability::pre_exec>, boost::hana::type_c<spawn_capability::limits>,
      boost::hana::type_c<spawn_capability::cgroup>, boost::hana::type_c<spawn_capability::prespawned>);

  struct config {
    /// Waiting processes kept per key (1 … 64).
    std::size_t per_key = 2;
    /// A key nobody asked for this long loses its processes.
    std::chrono::milliseconds idle_timeout{std::chrono::seconds(60)};
    /// Keys pooled at once; a plan of a further key is served cold.
    std::size_t max_keys = 8;
  };

  /// What the pool did so far.
  struct counters {
    std::uint64_t warm = 0;     // calls served by a waiting process
    std::uint64_t cold = 0;     // calls served by fork_exec
    std::uint64_t started = 0;  // waiting processes forked
    std::uint64_t lost = 0;     // waiting processes found dead when taken
  };

  prespawned() : prespawned(config{}) {}
  explicit prespawned(config settings) : pool_(std::make_unique<pool>(validated(settings))) {}
  prespawned(const prespawned&) = delete;
  prespawned& operator=(const prespawned&) = delete;
  ~prespawned() = default;

  process_handle spawn(const launch_plan& plan) const {
    if (plan.argv.empty()) throw std::invalid_argument("launch_plan.argv must not be empty");
    refuse_unsupported<prespawned>(plan);
    for (;;) {
      std::optional<detail::warm_process> process = pool_->take(plan);
      if (!process) break;
      // The refill waits until this claim is done: forking the next
      // process meanwhile would compete with this one for the CPU.
      struct refill_after {
        pool& p;
        ~refill_after() { p.wake.notify_one(); }
      } refill{*pool_};
      if (auto handle = claim(std::move(*process), plan)) {
        pool_->count(&counters::warm);
        return std::move(*handle);
      }
      pool_->count(&counters::lost);  // killed while it waited: try the next one
    }
    pool_->count(&counters::cold);
    return fork_exec{}.spawn(plan);
  }

  /// Blocks until every key asked for so far has `per_key` processes
  /// waiting, or `timeout` passed; whether they have. For a warm-up after
  /// a first call, and for tests.
  bool wait_until_warm(std::chrono::milliseconds timeout) const { return pool_->wait_until_warm(timeout); }

  counters stats() const { return pool_->stats(); }

  const config& settings() const noexcept { return pool_->settings; }

 private:
  static config validated(config settings) {
    if (settings.per_key < 1 || settings.per_key > 64)
      throw std::invalid_argument(fmt::format("prespawned.per_key: {} is not in 1 … 64", settings.per_key));
    if (settings.idle_timeout.count() <= 0)
      throw std::invalid_argument("prespawned.idle_timeout: must be positive");
    if (settings.max_keys < 1) throw std::invalid_argument("prespawned.max_keys: must be at least 1");
    return settings;
  }

  /// Whether `plan` may be served from (and refilled into) a pool.
  static bool poolable(const launch_plan& plan) noexcept {
    return (plan.hooks.empty() || plan.hook_owner) &&
           plan.inherited_fds.size() + 3 <= static_cast<std::size_t>(detail::max_claim_fds);
  }

  /// Hands `plan` to `process`. Empty when the process had died before it
  /// got the command (the caller takes another or goes cold); throws what
  /// fork_exec would for a failing step.
  static std::optional<process_handle> claim(detail::warm_process process, const launch_plan& plan) {
    detail::unique_fd dev_null;
    auto stream = [&](int fd) {
      if (fd >= 0) return fd;
      if (!dev_null) {
        dev_null.reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
        if (!dev_null) detail::throw_syscall("open /dev/null");
      }
      return dev_null.get();
    };
    std::vector<int> fds{stream(plan.stdin_fd), stream(plan.stdout_fd), stream(plan.stderr_fd)};
    fds.insert(fds.end(), plan.inherited_fds.begin(), plan.inherited_fds.end());

    // Into the call's cgroup before the command exists in the process.
    if (plan.cgroup_procs_fd >= 0) {
      const std::string pid = std::to_string(process.pid);
      ssize_t n;
      while ((n = ::write(plan.cgroup_procs_fd, pid.data(), pid.size())) < 0 && errno == EINTR) {
      }
      if (n < 0 && errno == ESRCH) return std::nullopt;
      if (n != static_cast<ssize_t>(pid.size()))
        throw infrastructure_error(
            fmt::format("join cgroup (write pid to cgroup.procs): {}", std::strerror(n < 0 ? errno : EIO)));
    }

    std::string payload;
    for (const auto& arg : plan.argv) payload.append(arg).push_back('\0');
    for (const auto& entry : plan.env) payload.append(entry).push_back('\0');
    const std::string workdir = plan.workdir.string();
    payload.append(workdir).push_back('\0');

    detail::claim_header header;
    header.payload_bytes = payload.size();
    header.argc = static_cast<std::int32_t>(plan.argv.size());
    header.envc = static_cast<std::int32_t>(plan.env.size());
    header.fd_count = static_cast<std::int32_t>(fds.size());
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * detail::max_claim_fds)] = {};
    iovec part{&header, sizeof header};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* rights = CMSG_FIRSTHDR(&message);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(rights), fds.data(), sizeof(int) * fds.size());

    const int channel = process.channel.get();
    ssize_t sent;
    while ((sent = ::sendmsg(channel, &message, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    if (sent < 0 && errno != EPIPE && errno != ECONNRESET) detail::throw_syscall("sendmsg (prespawned claim)");
    if (sent >= 0) {
      const auto* rest = reinterpret_cast<const char*>(&header) + sent;
      if (detail::send_all(channel, rest, sizeof header - static_cast<std::size_t>(sent)))
        detail::send_all(channel, payload.data(), payload.size());
    }

    // End of file at the exec — or a failed step's report. End of file
    // without the "got it" flag: it died before it read the command.
    detail::child_report report{};
    if (!detail::read_report(channel, report)) {
      if (!process.claimed()) return std::nullopt;
      process.channel.reset();
      process_handle handle(process.pid, std::move(process.pidfd));
      return handle;
    }
    process.discard();
    detail::throw_child_failure(plan, workdir, report);
  }

  struct pool {
    explicit pool(const config& c) : settings(c) {}
    ~pool() {
      {
        std::lock_guard lock(mutex);
        stopping = true;
      }
      wake.notify_all();
      if (worker.joinable()) worker.join();
      // Closing every socket first lets each waiting process exit on its own
      // while the kills and reaps go one by one.
      for (auto& entry : keys)
        for (auto& process : entry->ready) process.channel.reset();
      keys.clear();
    }

    const config settings;
    mutable std::mutex mutex;
    std::condition_variable wake;    // the worker: a key wants refilling, or stop
    std::condition_variable filled;  // wait_until_warm
    std::vector<std::shared_ptr<detail::prespawn_entry>> keys;
    counters totals;
    bool stopping = false;
    std::thread worker;

    void count(std::uint64_t counters::*which) {
      std::lock_guard lock(mutex);
      ++(totals.*which);
    }

    counters stats() const {
      std::lock_guard lock(mutex);
      return totals;
    }

    std::optional<detail::warm_process> take(const launch_plan& plan) {
      const auto now = std::chrono::steady_clock::now();
      std::lock_guard lock(mutex);
      auto found = std::find_if(keys.begin(), keys.end(), [&](const auto& entry) { return entry->matches(plan); });
      if (found == keys.end()) {
        if (!poolable(plan) || keys.size() >= settings.max_keys) return std::nullopt;
        auto entry = std::make_shared<detail::prespawn_entry>();
        entry->hooks = plan.hooks;
        entry->limits = plan.limits;
        entry->read_only_paths = plan.read_only_paths;
        entry->hook_owner = plan.hook_owner;
        entry->last_used = now;
        keys.push_back(std::move(entry));
        start_worker();
        wake.notify_one();
        return std::nullopt;
      }
      auto& entry = **found;
      entry.last_used = now;
      if (entry.ready.empty()) {
        wake.notify_one();
        return std::nullopt;
      }
      detail::warm_process process = std::move(entry.ready.front());
      entry.ready.pop_front();
      return process;
    }

    bool wait_until_warm(std::chrono::milliseconds timeout) {
      std::unique_lock lock(mutex);
      return filled.wait_for(lock, timeout, [&] {
        return std::all_of(keys.begin(), keys.end(),
                           [&](const auto& entry) { return entry->ready.size() >= settings.per_key; });
      });
    }

    void start_worker() {  // with `mutex` held
      if (!worker.joinable()) worker = std::thread([this] { refill(); });
    }

    /// The worker: forks for the emptiest key below `per_key` (the mutex
    /// released meanwhile), drops idle keys, sleeps until asked again or the
    /// next key may go idle.
    void refill() {
      std::unique_lock lock(mutex);
      while (!stopping) {
        const auto now = std::chrono::steady_clock::now();
        std::vector<std::shared_ptr<detail::prespawn_entry>> idle;
        std::erase_if(keys, [&](const auto& entry) {
          if (now - entry->last_used < settings.idle_timeout) return false;
          idle.push_back(entry);
          return true;
        });
        if (!idle.empty()) {
          lock.unlock();
          idle.clear();  // kills and reaps outside the lock
          lock.lock();
          continue;
        }

        std::shared_ptr<detail::prespawn_entry> wanting;
        for (const auto& entry : keys)
          if (entry->ready.size() < settings.per_key && entry->retry_at <= now &&
              (!wanting || entry->ready.size() < wanting->ready.size()))
            wanting = entry;
        if (wanting) {
          lock.unlock();
          std::optional<detail::warm_process> process;
          try {
            process = detail::start_warm_process(*wanting);
          } catch (const std::exception&) {
            // fork refused (EAGAIN under RLIMIT_NPROC, …): this key is served
            // cold for a while rather than spinning here.
          }
          lock.lock();
          if (process) {
            ++totals.started;
            const bool still_pooled = std::find(keys.begin(), keys.end(), wanting) != keys.end();
            if (still_pooled) {
              wanting->ready.push_back(std::move(*process));
              filled.notify_all();
            } else {
              lock.unlock();
              process.reset();
              lock.lock();
            }
          } else {
            wanting->retry_at = std::chrono::steady_clock::now() + std::chrono::seconds(1);
          }
          continue;
        }

        auto next = now + settings.idle_timeout;
        for (const auto& entry : keys) {
          next = std::min(next, entry->last_used + settings.idle_timeout);
          if (entry->ready.size() < settings.per_key) next = std::min(next, entry->retry_at);
        }
        wake.wait_until(lock, next);
      }
    }
  };

  std::unique_ptr<pool> pool_;
};

}  // namespace bashexec

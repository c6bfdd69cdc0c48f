// The bodies of detail/kernel/input_wait_probe.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/input_wait_probe.hpp"

#include <charconv>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include <dirent.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>

#include <fmt/core.h>

#include "bashexec/detail/kernel/read_text_file.hpp"

namespace bashexec::detail {

namespace input_probe {

/// What one thread is doing, as far as input is concerned.
enum class activity { busy, idle, reader };

/// The fields of /proc/<pid>/task/<tid>/stat the probe needs.
struct thread_stat {
  char state = '?';
  long group = 0;           // pgrp
  unsigned long tty = 0;    // tty_nr: the controlling terminal's device
  long foreground = 0;      // tpgid: that terminal's foreground group
};

inline std::optional<thread_stat> read_stat(const std::string& dir, long* threads = nullptr) {
  auto text = read_text_file((dir + "/stat").c_str());
  if (!text) return std::nullopt;
  const auto close = text->rfind(')');  // the name may hold spaces and parentheses
  if (close == std::string::npos) return std::nullopt;
  thread_stat st;
  // state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
  // cmajflt utime stime cutime cstime priority nice num_threads
  long ppid = 0, session = 0, number = 0;
  if (std::sscanf(text->c_str() + close + 1,
                  " %c %ld %ld %ld %lu %ld %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %ld", &st.state, &ppid,
                  &st.group, &session, &st.tty, &st.foreground, &number) != 7)
    return std::nullopt;
  if (threads) *threads = number;
  return st;
}

/// /proc/<pid>/task/<tid>/syscall: the call number and its first three
/// arguments; empty when the thread runs or is blocked outside a call.
struct blocked_call {
  long number = -1;
  std::uint64_t args[3] = {};
};

inline std::optional<blocked_call> read_syscall(const std::string& dir) {
  auto text = read_text_file((dir + "/syscall").c_str());
  if (!text || text->empty() || (*text)[0] < '0' || (*text)[0] > '9') return std::nullopt;  // "running", "-1 …"
  blocked_call call;
  unsigned long long a0 = 0, a1 = 0, a2 = 0;
  if (std::sscanf(text->c_str(), "%ld %llx %llx %llx", &call.number, &a0, &a1, &a2) != 4) return std::nullopt;
  call.args[0] = a0;
  call.args[1] = a1;
  call.args[2] = a2;
  return call;
}

/// Whether descriptor `fd` of process `pid` is the command's input.
inline bool is_input(pid_t pid, long fd, const input_identity& input, const thread_stat& st) {
  if (fd < 0) return false;
  struct stat info {};
  if (::stat(fmt::format("/proc/{}/fd/{}", pid, fd).c_str(), &info) != 0) return false;
  if (input.terminal != 0) {
    if (!S_ISCHR(info.st_mode)) return false;
    if (info.st_rdev == input.terminal) return true;
    // /dev/tty: the caller's controlling terminal, when that is this one.
    return info.st_rdev == makedev(5, 0) && static_cast<dev_t>(st.tty) == input.terminal;
  }
  return S_ISFIFO(info.st_mode) && info.st_ino == input.pipe_inode && info.st_dev == input.pipe_device;
}

inline bool read_memory(pid_t pid, std::uint64_t address, void* into, std::size_t size) {
  iovec local{into, size};
  iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), size};
  return ::process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}

/// poll/ppoll(fds, nfds): a reader when the set asks to read the input.
inline activity classify_poll(pid_t pid, const blocked_call& call, const input_identity& input,
                              const thread_stat& st) {
  const std::uint64_t count = call.args[1];
  if (count == 0 || count > 256) return count == 0 ? activity::busy : activity::idle;  // poll(0): a sleep
  std::vector<pollfd> fds(count);
  if (!read_memory(pid, call.args[0], fds.data(), count * sizeof(pollfd))) return activity::busy;
  for (const pollfd& p : fds)
    if ((p.events & (POLLIN | POLLRDNORM | POLLPRI)) && is_input(pid, p.fd, input, st)) return activity::reader;
  return activity::idle;
}

/// select/pselect6(nfds, readfds, …).
inline activity classify_select(pid_t pid, const blocked_call& call, const input_identity& input,
                                const thread_stat& st) {
  const std::uint64_t nfds = call.args[0];
  if (nfds == 0 || call.args[1] == 0) return nfds == 0 ? activity::busy : activity::idle;  // select(0): a sleep
  const std::uint64_t bytes = std::min<std::uint64_t>((nfds + 7) / 8, 128);
  unsigned char set[128] = {};
  if (!read_memory(pid, call.args[1], set, bytes)) return activity::busy;
  for (std::uint64_t fd = 0; fd < bytes * 8 && fd < nfds; ++fd)
    if ((set[fd / 8] >> (fd % 8)) & 1)
      if (is_input(pid, static_cast<long>(fd), input, st)) return activity::reader;
  return activity::idle;
}

/// epoll_wait(epfd, …): the interest list from /proc/<pid>/fdinfo/<epfd>.
inline activity classify_epoll(pid_t pid, const blocked_call& call, const input_identity& input,
                               const thread_stat& st) {
  auto text = read_text_file(fmt::format("/proc/{}/fdinfo/{}", pid, call.args[0]).c_str());
  if (!text) return activity::busy;
  bool reader = false;
  any_line(*text, [&](std::string_view line) {
    // "tfd:        0 events:       19 data: …"
    long fd = -1;
    unsigned events = 0;
    if (line.substr(0, 4) != "tfd:") return false;
    if (std::sscanf(std::string(line).c_str(), "tfd: %ld events: %x", &fd, &events) != 2) return false;
    reader = (events & EPOLLIN) && is_input(pid, fd, input, st);
    return reader;
  });
  return reader ? activity::reader : activity::idle;
}

inline activity classify_thread(pid_t pid, const std::string& dir, const input_identity& input, thread_stat& st,
                                const char*& call_name, const std::optional<thread_stat>& known = std::nullopt) {
  auto stat = known ? known : read_stat(dir);
  if (!stat) return activity::idle;  // gone meanwhile
  st = *stat;
  switch (st.state) {
    case 'Z':
    case 'X':
    case 'x':
    case 'T':  // stopped (a background read's SIGTTIN, ^Z): it waits for a signal
    case 't':
      return activity::idle;
    case 'S':
    case 'I':
      break;
    default:
      return activity::busy;  // R, D, W, P, …
  }
  auto call = read_syscall(dir);
  if (!call) return activity::busy;
  const long n = call->number;
  auto reads = [&](const char* name) {
    call_name = name;
    return is_input(pid, static_cast<long>(call->args[0]), input, st) ? activity::reader : activity::idle;
  };
  if (n == SYS_read || n == SYS_readv || n == SYS_pread64 || n == SYS_preadv) return reads("read");
#ifdef SYS_preadv2
  if (n == SYS_preadv2) return reads("read");
#endif
  if (n == SYS_ppoll) return call_name = "poll", classify_poll(pid, *call, input, st);
#ifdef SYS_poll
  if (n == SYS_poll) return call_name = "poll", classify_poll(pid, *call, input, st);
#endif
  if (n == SYS_pselect6) return call_name = "select", classify_select(pid, *call, input, st);
#ifdef SYS_select
  if (n == SYS_select) return call_name = "select", classify_select(pid, *call, input, st);
#endif
  if (n == SYS_epoll_pwait) return call_name = "epoll_wait", classify_epoll(pid, *call, input, st);
#ifdef SYS_epoll_wait
  if (n == SYS_epoll_wait) return call_name = "epoll_wait", classify_epoll(pid, *call, input, st);
#endif
#ifdef SYS_epoll_pwait2
  if (n == SYS_epoll_pwait2) return call_name = "epoll_wait", classify_epoll(pid, *call, input, st);
#endif
  // Waits only another process or an event ends.
  if (n == SYS_wait4 || n == SYS_waitid || n == SYS_futex || n == SYS_rt_sigsuspend || n == SYS_rt_sigtimedwait ||
      n == SYS_accept4 || n == SYS_recvfrom || n == SYS_recvmsg)
    return activity::idle;
#ifdef SYS_pause
  if (n == SYS_pause) return activity::idle;
#endif
#ifdef SYS_accept
  if (n == SYS_accept) return activity::idle;
#endif
  return activity::busy;  // nanosleep, clock_nanosleep, anything unknown: it goes on without input
}

/// The children of every thread of `pid`, appended to `out`.
inline void append_children(pid_t pid, pid_t tid, std::vector<pid_t>& out) {
  auto children = read_text_file(fmt::format("/proc/{}/task/{}/children", pid, tid).c_str());
  if (!children) return;
  const char* at = children->data();
  const char* end = at + children->size();
  while (at < end) {
    pid_t child = 0;
    auto [next, error] = std::from_chars(at, end, child);
    if (error == std::errc{} && child > 0) out.push_back(child);
    at = next == at ? at + 1 : next;
  }
}

/// The threads (or the one task) of process `pid`.
inline std::vector<pid_t> threads_of(pid_t pid) {
  std::vector<pid_t> out;
  DIR* dir = ::opendir(fmt::format("/proc/{}/task", pid).c_str());
  if (!dir) return out;
  while (dirent* entry = ::readdir(dir)) {
    pid_t tid = 0;
    const std::string_view name = entry->d_name;
    if (std::from_chars(name.data(), name.data() + name.size(), tid).ec == std::errc{} && tid > 0)
      out.push_back(tid);
  }
  ::closedir(dir);
  return out;
}

}  // namespace input_probe

BASHEXEC_DECL std::optional<blocked_reader> probe_input_wait(pid_t root, const input_identity& input) noexcept {
  using namespace input_probe;
  try {
    constexpr std::size_t max_processes = 4096;  // past it: no conclusion
    std::vector<pid_t> pending{root};
    std::optional<blocked_reader> reader;
    for (std::size_t seen = 0; !pending.empty(); ++seen) {
      if (seen >= max_processes) return std::nullopt;
      const pid_t pid = pending.back();
      pending.pop_back();
      // A process of one thread (most of them) is read through its own
      // stat, without listing /proc/<pid>/task.
      long thread_count = 0;
      const auto process_stat = read_stat(fmt::format("/proc/{}", pid), &thread_count);
      if (!process_stat) continue;  // gone meanwhile
      const bool single = thread_count == 1;
      for (pid_t tid : single ? std::vector<pid_t>{pid} : threads_of(pid)) {
        const std::string dir = fmt::format("/proc/{}/task/{}", pid, tid);
        thread_stat st;
        const char* call = "";
        const activity a = classify_thread(pid, dir, input, st, call, single ? process_stat : std::nullopt);
        if (a == activity::busy) return std::nullopt;
        // On a terminal only the foreground group reads it (a background
        // reader would be stopped by SIGTTIN).
        if (a == activity::reader && !reader && (input.terminal == 0 || st.group == st.foreground))
          reader = blocked_reader{pid, call};
        append_children(pid, tid, pending);
      }
    }
    return reader;
  } catch (...) {
    return std::nullopt;  // memory ran out: no conclusion
  }
}

BASHEXEC_DECL std::vector<pid_t> command_processes(pid_t runner) noexcept {
  using namespace input_probe;
  try {
    std::vector<pid_t> inits, out;
    for (pid_t tid : threads_of(runner)) append_children(runner, tid, inits);
    std::vector<pid_t> pending;
    for (pid_t init : inits)
      for (pid_t tid : threads_of(init)) append_children(init, tid, pending);
    while (!pending.empty() && out.size() < 4096) {
      const pid_t pid = pending.back();
      pending.pop_back();
      out.push_back(pid);
      for (pid_t tid : threads_of(pid)) append_children(pid, tid, pending);
    }
    return out;
  } catch (...) {
    return {};
  }
}

}  // namespace bashexec::detail

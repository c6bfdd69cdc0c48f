// detail/prespawn_child: the child side of the prespawned spawn policy
// (spawn/prespawned.hpp) — a process forked ahead of its command that waits
// on a socket for the command-dependent half of a launch plan, then runs the
// very same steps as fork_exec's child (detail/fork_exec_child.hpp).
//
// The waiting process, in order:
//   1. child_enter: setsid, default signal dispositions and an empty mask,
//      the plan's hooks (a Landlock domain is enforced here, before any
//      command is known);
//   2. closes every descriptor but its end of the socket: it holds nothing
//      of the host (no stdio, no other pool process's socket) while it waits;
//   3. blocks in recvmsg for a `claim_header` with the stream descriptors
//      (SCM_RIGHTS: stdin, stdout, stderr, then the inherited ones, in target
//      order) and then reads the payload — argv, env and workdir as
//      NUL-terminated strings — into an anonymous mapping (no malloc: the
//      parent may have had many threads at the fork), and sets a flag in a
//      page shared with the parent ("got it": a later end of file means the
//      exec happened, not a death before the command arrived);
//   4. child_finish: renumbering, chdir, close-on-exec, limits, execve of
//      exactly the plan's argv. The socket is close-on-exec, so the parent
//      reads EOF once the exec happened, or a `child_report` when a step
//      failed — the same report and exception as fork_exec.
// End of file on the socket before a claim (the pool closed its end) makes
// the process exit 0 without running anything.
//
// It is a real fork (not CLONE_VM): from step 1 on it has its own copy of
// the parent's memory, and uses raw system calls only.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bashexec/detail/fork_exec_child.hpp"

namespace bashexec::detail {

/// The most descriptors one claim passes (the kernel's SCM_MAX_FD is 253);
/// a plan with more is served cold.
inline constexpr int max_claim_fds = 64;

/// The fixed part of a claim; the descriptors ride along with it.
struct claim_header {
  std::uint64_t payload_bytes = 0;  // argv, env, workdir: NUL-terminated strings
  std::int32_t argc = 0;
  std::int32_t envc = 0;
  std::int32_t fd_count = 0;
  std::int32_t reserved = 0;
};

/// Closes every descriptor except `keep` (step 2).
inline void close_all_but(int keep) noexcept {
  bool done = (keep == 0 || ::syscall(sys_close_range, 0U, static_cast<unsigned>(keep - 1), 0U) == 0) &&
              ::syscall(sys_close_range, static_cast<unsigned>(keep + 1), ~0U, 0U) == 0;
  if (done) return;
  // Kernels before 5.9: close each possible descriptor.
  std::uint64_t limit[2] = {};
  std::uint64_t top = ::syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, nullptr, limit) == 0 ? limit[0] : 1024;
  if (top > 65536) top = 65536;
  for (int fd = 0; fd < static_cast<int>(top); ++fd)
    if (fd != keep) ::syscall(SYS_close, fd);
}

/// Reads exactly `size` bytes; false on end of file or an error (errno set,
/// 0 for end of file).
inline bool read_exactly(int fd, char* to, std::size_t size) noexcept {
  while (size > 0) {
    const long n = ::syscall(SYS_read, fd, to, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = 0;
      return false;
    }
    to += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

/// The waiting process. `ctx` carries the key's hooks and limits and, as
/// `error_fd`, this process's end of the socket; its cgroup_procs_fd is -1
/// (the parent moves the process into the call's cgroup before it sends the
/// claim). `claimed` lies in a page shared with the parent. Never returns.
[[noreturn]] inline void waiting_child_main(child_context ctx, int* claimed) noexcept {
  child_enter(ctx);
  const int channel = ctx.error_fd;
  close_all_but(channel);

  claim_header header;
  int fds[max_claim_fds];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_claim_fds)];
  iovec part{&header, sizeof header};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  long got;
  while ((got = ::syscall(SYS_recvmsg, channel, &message, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (got == 0) child_exit(0);  // the pool let go of this process: nothing to run
  if (got < 0) child_fail(channel, child_stage::receive, errno);
  if (static_cast<std::size_t>(got) < sizeof header &&
      !read_exactly(channel, reinterpret_cast<char*>(&header) + got, sizeof header - static_cast<std::size_t>(got)))
    child_fail(channel, child_stage::receive, errno ? errno : EPROTO);

  int received = 0;
  const cmsghdr* rights = CMSG_FIRSTHDR(&message);
  if (rights && rights->cmsg_level == SOL_SOCKET && rights->cmsg_type == SCM_RIGHTS) {
    received = static_cast<int>((rights->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    const auto* data = reinterpret_cast<const unsigned char*>(CMSG_DATA(rights));
    for (int i = 0; i < received && i < max_claim_fds; ++i) {
      int fd;
      __builtin_memcpy(&fd, data + i * sizeof(int), sizeof fd);
      fds[i] = fd;
    }
  }
  if ((message.msg_flags & MSG_CTRUNC) != 0 || received != header.fd_count || header.argc < 1 || header.envc < 0)
    child_fail(channel, child_stage::receive, EPROTO);

  // One mapping: the payload, then the argv and envp pointer arrays, then
  // the scratch descriptors child_finish needs.
  const std::size_t pointers = static_cast<std::size_t>(header.argc) + 1 + static_cast<std::size_t>(header.envc) + 1;
  const std::size_t payload = (header.payload_bytes + alignof(char*) - 1) / alignof(char*) * alignof(char*);
  const std::size_t size = payload + pointers * sizeof(char*) + static_cast<std::size_t>(received) * sizeof(int);
  const long mapped = ::syscall(SYS_mmap, nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == -1) child_fail(channel, child_stage::receive, errno);
  char* const text = reinterpret_cast<char*>(mapped);
  if (!read_exactly(channel, text, header.payload_bytes)) child_fail(channel, child_stage::receive, errno ? errno : EPROTO);

  char** const argv = reinterpret_cast<char**>(text + payload);
  char** const envp = argv + header.argc + 1;
  int* const scratch = reinterpret_cast<int*>(envp + header.envc + 1);
  // Split the payload at its NULs: argc strings, envc strings, the workdir.
  std::size_t at = 0;
  auto next = [&]() -> char* {
    if (at >= header.payload_bytes) return nullptr;
    char* string = text + at;
    while (at < header.payload_bytes && text[at] != '\0') ++at;
    if (at == header.payload_bytes) return nullptr;  // unterminated
    ++at;
    return string;
  };
  for (int i = 0; i < header.argc; ++i)
    if (!(argv[i] = next())) child_fail(channel, child_stage::receive, EPROTO);
  argv[header.argc] = nullptr;
  for (int i = 0; i < header.envc; ++i)
    if (!(envp[i] = next())) child_fail(channel, child_stage::receive, EPROTO);
  envp[header.envc] = nullptr;
  const char* workdir = next();
  if (!workdir) child_fail(channel, child_stage::receive, EPROTO);

  // "Got it": from here on the parent knows the command reached a live
  // process, so a silent end of file means the exec happened. A flag in
  // memory shared with the parent rather than a message: the parent reads
  // it after the end of file, and is not woken once more for it.
  __atomic_store_n(claimed, 1, __ATOMIC_RELEASE);

  ctx.path = argv[0];
  ctx.argv = argv;
  ctx.envp = envp;
  ctx.workdir = workdir;
  ctx.sources = fds;
  ctx.scratch = scratch;
  ctx.count = received;
  child_finish(ctx);
}

}  // namespace bashexec::detail

// The bodies of spawn/detail/prespawn_child.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/spawn/detail/prespawn_child.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace bashexec::detail {

namespace prespawn {

/// Closes every descriptor except `keep` (step 2).
BASHEXEC_CHILD_CODE inline void close_all_but(int keep) noexcept {
  const bool done = (keep == 0 || ::syscall(sys_close_range, 0U, static_cast<unsigned>(keep - 1), 0U) == 0) &&
                    ::syscall(sys_close_range, static_cast<unsigned>(keep + 1), ~0U, 0U) == 0;
  if (done) return;
  // Kernels before 5.9: close each possible descriptor.
  std::uint64_t limit[2] = {};
  std::uint64_t top = ::syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, nullptr, limit) == 0 ? limit[0] : 1024;
  if (top > 65536) top = 65536;
  for (int fd = 0; fd < static_cast<int>(top); ++fd)
    if (fd != keep) ::syscall(SYS_close, fd);
}

}  // namespace prespawn

BASHEXEC_DECL BASHEXEC_CHILD_CODE int waiting_child_main(void* arg) noexcept {
  waiter_control& control = *static_cast<waiter_control*>(arg);
  const int channel = control.channel;
  child_enter(control.enter);
  prespawn::close_all_but(channel);
  const char ready = 'r';
  while (::syscall(SYS_write, channel, &ready, 1) != 1)
    if (errno != EINTR) child_exit(0);  // the pool is gone already

  claim_message message{};
  alignas(cmsghdr) char control_bytes[CMSG_SPACE(sizeof(int) * max_claim_fds)];
  iovec part{&message, sizeof message};
  msghdr header{};
  header.msg_iov = &part;
  header.msg_iovlen = 1;
  header.msg_control = control_bytes;
  header.msg_controllen = sizeof control_bytes;
  long got;
  while ((got = ::syscall(SYS_recvmsg, channel, &header, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (got == 0) child_exit(0);  // the pool let go of this process: nothing to run
  if (got < 0) child_fail(channel, child_stage::receive, errno);

  int fds[max_claim_fds];
  int received = 0;
  for (cmsghdr* rights = CMSG_FIRSTHDR(&header); rights; rights = CMSG_NXTHDR(&header, rights)) {
    if (rights->cmsg_level != SOL_SOCKET || rights->cmsg_type != SCM_RIGHTS) continue;
    const int count = static_cast<int>((rights->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    const auto* data = reinterpret_cast<const unsigned char*>(CMSG_DATA(rights));
    for (int i = 0; i < count && received < max_claim_fds; ++i) {
      int fd;
      __builtin_memcpy(&fd, data + i * sizeof(int), sizeof fd);
      fds[received++] = fd;
    }
  }
  // One message of one sender (the pool's end of a private socketpair):
  // anything short or odd is a bug, reported rather than run.
  if (static_cast<std::size_t>(got) != sizeof message || (header.msg_flags & MSG_CTRUNC) != 0 ||
      received != message.fd_count || message.context == 0)
    child_fail(channel, child_stage::receive, EPROTO);

  __atomic_store_n(&control.claimed, 1, __ATOMIC_RELEASE);

  // The call's context lives in the parent's memory (shared: CLONE_VM) until
  // the parent reads this socket's end of file; only the descriptor numbers
  // are this process's own.
  child_context ctx = *reinterpret_cast<const child_context*>(static_cast<std::uintptr_t>(message.context));
  int scratch[max_claim_fds];
  ctx.sources = fds;
  ctx.scratch = scratch;
  ctx.count = received;
  ctx.error_fd = channel;
  child_finish(ctx);
}

}  // namespace bashexec::detail

// The bodies of detail/kernel/egress_namespace.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/egress_namespace.hpp"

#include <cerrno>
#include <cstring>

#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bashexec/detail/kernel/user_namespace.hpp"

namespace bashexec::detail {

// Steps 3-5 of the header comment, each a bare system call; the listener is
// closed on every path (the descriptor is the child's own: no CLONE_FILES).
BASHEXEC_CHILD_CODE BASHEXEC_DECL int egress_loopback_up() noexcept {
  const long probe = ::syscall(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return errno;
  struct ifreq request;
  // No libc string calls in the child: the name is written byte by byte.
  for (unsigned i = 0; i < sizeof request; ++i) reinterpret_cast<char*>(&request)[i] = 0;
  request.ifr_name[0] = 'l';
  request.ifr_name[1] = 'o';
  int error = 0;
  if (::syscall(SYS_ioctl, probe, SIOCGIFFLAGS, &request) != 0) {
    error = errno;
  } else {
    request.ifr_flags = static_cast<short>(request.ifr_flags | IFF_UP);
    if (::syscall(SYS_ioctl, probe, SIOCSIFFLAGS, &request) != 0) error = errno;
  }
  ::syscall(SYS_close, probe);
  return error;
}

BASHEXEC_CHILD_CODE BASHEXEC_DECL int egress_open_listener(std::uint16_t port) noexcept {
  const long listener = ::syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return -errno;
  struct sockaddr_in address;
  for (unsigned i = 0; i < sizeof address; ++i) reinterpret_cast<char*>(&address)[i] = 0;
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::syscall(SYS_bind, listener, &address, sizeof address) != 0 || ::syscall(SYS_listen, listener, 128) != 0) {
    const int error = errno;
    ::syscall(SYS_close, listener);
    return -error;
  }
  return static_cast<int>(listener);
}

BASHEXEC_CHILD_CODE BASHEXEC_DECL int egress_send_listener(int channel, std::uint16_t port) noexcept {
  const int listener = egress_open_listener(port);
  if (listener < 0) return -listener;
  char byte = 'L';
  struct iovec data {&byte, 1};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  for (unsigned i = 0; i < sizeof control; ++i) control[i] = 0;
  struct msghdr message;
  for (unsigned i = 0; i < sizeof message; ++i) reinterpret_cast<char*>(&message)[i] = 0;
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  struct cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  const unsigned char* from = reinterpret_cast<const unsigned char*>(&listener);
  unsigned char* to = CMSG_DATA(header);
  for (unsigned i = 0; i < sizeof listener; ++i) to[i] = from[i];
  long sent;
  while ((sent = ::syscall(SYS_sendmsg, channel, &message, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  const int error = sent < 0 ? errno : 0;
  ::syscall(SYS_close, listener);
  return error;
}

BASHEXEC_CHILD_CODE BASHEXEC_DECL int enter_egress_namespace(const void* context) noexcept {
  const auto& ctx = *static_cast<const egress_namespace_context*>(context);
  // A namespace made ahead (detail/kernel/egress_namespace_pool.hpp): join
  // it; its listener is the parent's already.
  if (ctx.ready_namespace_fd >= 0) return ::syscall(SYS_setns, ctx.ready_namespace_fd, CLONE_NEWNET) == 0 ? 0 : errno;
  int error = 0;
  if (ctx.own_user_namespace) error = enter_own_user_namespace();
  if (error == 0 && ::syscall(SYS_unshare, CLONE_NEWNET) != 0) error = errno;
  if (error == 0) error = egress_loopback_up();
  if (error == 0) error = egress_send_listener(ctx.channel_fd, ctx.port);
  return error;
}

BASHEXEC_DECL egress_channel::egress_channel() {
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, ends) != 0) throw_syscall("socketpair (egress channel)");
  parent_.reset(ends[0]);
  child_.reset(ends[1]);
}

BASHEXEC_DECL unique_fd egress_channel::take_listener() {
  child_.reset();
  char byte = 0;
  struct iovec data {&byte, 1};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  struct msghdr message {};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t got;
  while ((got = ::recvmsg(parent_.get(), &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (got <= 0) return unique_fd{};
  for (struct cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS &&
        header->cmsg_len == CMSG_LEN(sizeof(int))) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(header), sizeof fd);
      return unique_fd(fd);
    }
  }
  return unique_fd{};
}

}  // namespace bashexec::detail

// detail/kernel/egress_namespace: the network namespace an `allowlist` command
// runs in (network_access.hpp; docs/network.md) — a namespace of its own with
// only a loopback, and on it one listening TCP socket, 127.0.0.1:<port>, that
// the executor's process serves as the egress proxy from the host's
// namespace. The command reaches the outside only through that listener.
//
// How the listener gets out of the namespace: the pre-exec step below runs in
// the spawn's CLONE_VM child (the rules of detail/kernel/vm_child.hpp: bare
// system calls, errno read at once), after the clone and before exec:
//   1. not root: enter a user namespace of its own (detail/kernel/
//      user_namespace.hpp), so that the network namespace it makes next is
//      owned by a namespace in which it holds CAP_SYS_ADMIN — a plain unshare,
//      never a setns, which would need the host's powers;
//   2. unshare(CLONE_NEWNET): a namespace with only `lo`, down;
//   3. `lo` up (SIOCSIFFLAGS on a throwaway datagram socket);
//   4. socket, bind 127.0.0.1:<port>, listen — before any command code runs,
//      so nothing the command does can take the port first;
//   5. the listener sent over the executor's AF_UNIX socketpair with
//      SCM_RIGHTS and closed in the child, so the command never holds it.
// The parent takes the descriptor once the spawn returned (CLONE_VFORK: the
// child has exec'd by then, and the message waits in the socket buffer).
// No helper binary: the namespace is born in the one process that becomes
// the command (or its runner, bwrap, which then makes no network namespace of
// its own) — or, for an executor with CAP_SYS_ADMIN, ahead of the call by
// detail/kernel/egress_namespace_pool.hpp, and then the step only joins it.
//
// What keeps the command in it: the namespace has no route anywhere but its
// own loopback, and the command cannot leave it — setns(2) into another
// network namespace needs CAP_SYS_ADMIN over the target's owner, which a
// confined command has none of (Landlock's step empties every capability set;
// bwrap drops them), and its only other way out, a unix socket to a host
// service, is governed by the file sandbox as before.
#pragma once

#include <cstdint>

#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/detail/kernel/vm_child.hpp"
#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// The proxy's port inside every command's namespace (3128, the HTTP
/// proxies' customary one): each namespace is its own, so one number serves.
inline constexpr std::uint16_t egress_proxy_port = 3128;

/// What the child's step needs, built by the parent before the clone.
struct egress_namespace_context {
  int channel_fd = -1;              // the child's end of the socketpair (close-on-exec)
  bool own_user_namespace = false;  // step 1: not root
  /// A namespace made ahead (detail/kernel/egress_namespace_pool.hpp), or
  /// -1: the step then only joins it (setns), and steps 1-5 are skipped.
  int ready_namespace_fd = -1;
  std::uint16_t port = egress_proxy_port;
};

/// Steps 3 and 4-5 of the header comment; each returns 0 or an errno value.
BASHEXEC_CHILD_CODE BASHEXEC_DECL int egress_loopback_up() noexcept;
/// Step 4 alone: the listening descriptor, or -errno.
BASHEXEC_CHILD_CODE BASHEXEC_DECL int egress_open_listener(std::uint16_t port) noexcept;
BASHEXEC_CHILD_CODE BASHEXEC_DECL int egress_send_listener(int channel, std::uint16_t port) noexcept;

/// The pre-exec step (a `pre_exec_hook` run function; `context` is an
/// egress_namespace_context). Returns 0 or an errno value.
BASHEXEC_CHILD_CODE BASHEXEC_DECL int enter_egress_namespace(const void* context) noexcept;

/// The parent's side of one spawn's namespace: the socketpair, made before
/// the spawn, and the listener taken from it after.
class egress_channel {
 public:
  /// A close-on-exec AF_UNIX datagram socketpair; throws infrastructure_error.
  egress_channel();

  /// The descriptor the child's step sends on.
  int child_end() const noexcept { return child_.get(); }

  /// After the spawn: the listener the child sent, or an invalid descriptor
  /// when none came (the step failed, so the spawn failed too). Closes the
  /// child's end in the parent.
  unique_fd take_listener();

 private:
  unique_fd parent_;
  unique_fd child_;
};

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/kernel/impl/egress_namespace.ipp"
#endif

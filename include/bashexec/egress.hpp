// egress: the seam between the executor and an egress proxy, free of Asio.
// A command under network-by-name reaches the world only through a listening
// socket the executor hands to a gateway; the gateway opens a session that
// serves it under a policy and reports what was tried. The shipped gateway,
// network::asio_egress_gateway, lives in network/egress_proxy.hpp, which the
// executor's translation unit includes only where it builds one.
#pragma once

#include <memory>

#include "bashexec/network_policy.hpp"
#include "bashexec/unique_fd.hpp"

namespace bashexec {

/// One proxy serving one listener. Destroying it closes it.
class egress_session {
 public:
  virtual ~egress_session() = default;
  /// A copy of the attempts so far; safe from any thread.
  virtual network_report snapshot() const = 0;
  /// Stops serving and closes every descriptor the session holds;
  /// idempotent. snapshot() still works afterwards.
  virtual void close() = 0;
};

/// Makes sessions. `listener` is bound and listening (in any network
/// namespace); the session owns it from then on.
class egress_gateway {
 public:
  virtual ~egress_gateway() = default;
  virtual std::unique_ptr<egress_session> open(unique_fd listener, const network_policy& policy) = 0;
};

}  // namespace bashexec

// detail/seccomp_network: the network part of the Landlock seccomp filter.
// The filter itself (network and metadata-write parts, per architecture)
// lives in detail/seccomp_filter.hpp; this header keeps the old include
// working and names the network capability.
#pragma once

#include "bashexec/detail/seccomp_filter.hpp"

namespace bashexec::detail {

/// Whether a seccomp filter can take the network away on this architecture.
inline constexpr bool network_filter_supported = seccomp_filter_supported;

}  // namespace bashexec::detail

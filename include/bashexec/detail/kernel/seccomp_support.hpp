// detail/kernel/seccomp_support: whether this build has the seccomp filter of
// detail/kernel/seccomp_filter.hpp, apart from that header, so that a policy can
// state its enforcement levels without parsing the filter's class.
#pragma once

namespace bashexec::detail {

#if defined(__x86_64__) || defined(__aarch64__)
inline constexpr bool seccomp_filter_supported = true;
#else
inline constexpr bool seccomp_filter_supported = false;
#endif

}  // namespace bashexec::detail

// The bodies of detail/engine/resource_limits.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/resource_limits.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>

#include <sys/resource.h>

#include "bashexec/detail/kernel/unique_fd.hpp"

namespace bashexec::detail {

BASHEXEC_DECL resource_limit_set plan_limits(const resource_limits& limits) {
  resource_limit_set out;
  if (!limits.any()) return out;
  auto add = [&](int resource, const std::optional<std::uint64_t>& value, std::uint64_t hard_extra = 0) {
    if (!value) return;
    rlimit host{};
    if (::getrlimit(resource, &host) != 0) throw_syscall("getrlimit");
    const std::uint64_t ceiling = host.rlim_max;  // RLIM_INFINITY is the largest value
    const std::uint64_t soft = std::min<std::uint64_t>(*value, ceiling);
    const std::uint64_t hard = std::min<std::uint64_t>(soft + std::min(hard_extra, ~soft), ceiling);
    out.add({resource, soft, hard});
  };
  add(RLIMIT_NPROC, limits.max_processes);
  add(RLIMIT_AS, limits.max_address_space_bytes);
  // Hard one second above soft: SIGXCPU first (a command may catch it and
  // clean up), SIGKILL if it keeps spinning.
  if (limits.max_cpu_time)
    add(RLIMIT_CPU, static_cast<std::uint64_t>(limits.max_cpu_time->count()), 1);
  add(RLIMIT_FSIZE, limits.max_file_size_bytes);
  add(RLIMIT_NOFILE, limits.max_open_files);
  return out;
}

}  // namespace bashexec::detail

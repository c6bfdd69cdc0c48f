// detail/engine/spawn_step: the executor's one spawn policy instance — how it
// is made, what the executor refuses at construction because the policy
// cannot do it, and the one call through which a plan reaches it (the
// foreground driver and background `start` alike).
#pragma once

#include <concepts>
#include <exception>
#include <string_view>

#include <fmt/core.h>

#include "bashexec/config.hpp"
#include "bashexec/detail/engine/launch_builder.hpp"
#include "bashexec/executor_traits.hpp"
#include "bashexec/spawn.hpp"

namespace bashexec::detail {

/// The executor's instance of spawn policy `S`, built by the first
/// constructor of spawn.hpp's list that `S` has, from the executor's config
/// and the policy's own settings (validated by the caller). Returned as a
/// prvalue, so a policy that can neither move nor copy (a pool with a mutex)
/// works.
template <class S>
S make_spawn_policy(const executor_config& config, const spawn_config_t<S>& own = {}) {
  static_assert(spawn_constructible<S>,
                "spawn policy: the executor cannot construct it; provide S(const executor_config&, const "
                "S::config&), S(const executor_config&), S(const S::config&) or S(), with a nested `config` "
                "that is default-constructible (bashexec/spawn.hpp)");
  constexpr int construction = spawn_construction<S>();
  if constexpr (construction == 1) {
    return S(config, own);
  } else if constexpr (construction == 2) {
    return S(config);
  } else if constexpr (construction == 3) {
    return S(own);
  } else if constexpr (construction == 4) {
    return S{};
  } else {
    std::terminate();  // unreachable: only the static_assert above is the error a user reads
  }
}

/// The knobs that act in the child between fork and exec need the matching
/// spawn capability; an executor whose spawn policy lacks it refuses them at
/// construction (std::invalid_argument naming the field) rather than run the
/// command unlimited or uncontained. `automatic` containment falls back to
/// the process group instead (choose_containment); only an explicit request
/// for a cgroup is refused.
template <class Policies>
void refuse_config_beyond_spawn(const executor_config& config) {
  auto refuse = [](std::string_view field, std::string_view what) {
    throw std::invalid_argument(
        fmt::format("{}: {} in the child before exec, which the {} spawn policy cannot do; "
                    "use basic_executor<policies<spawn_with<fork_exec>>>",
                    field, what, std::string_view(Policies::spawn::name)));
  };
  if constexpr (!executor_can<Policies, spawn_capability::limits>)
    if (config.limits.any()) refuse("limits", "resource limits are applied");
  if constexpr (!executor_can<Policies, spawn_capability::cgroup>)
    if (config.containment == process_containment::cgroup)
      refuse("containment", "cgroup containment moves the child into its cgroup");
  if constexpr (!executor_can<Policies, spawn_capability::pre_exec>)
    if (proxies_network(config.sandbox.network))
      refuse("sandbox.network", "the allowlist's network namespace and proxy listener are made");
  if constexpr (executor_can<Policies, spawn_capability::prespawned>)
    if (proxies_network(config.sandbox.network))
      throw std::invalid_argument(
          "sandbox.network: allowlist is not offered with a warm pool: each command's network namespace and "
          "proxy listener are made when it is spawned, and a waiting process would make them before its "
          "command is known; use spawn_with<fork_exec>");
}

/// Starts `plan` with the executor's spawn policy. The refusal runs here as
/// well as in the shipped policies: a third-party policy that forgets it
/// still never runs a plan it cannot honour.
template <class S>
process_handle spawn_checked(const S& spawner, const launch_plan& plan) {
  refuse_unsupported<S>(plan);
  return spawner.spawn(plan);
}

/// Starts `launch` with the executor's spawn policy; when the policy placed
/// its process in a cgroup of its own (process_handle::placed_in_cgroup),
/// that cgroup becomes the launch's lease.
template <class S>
process_handle spawn_launch(const S& spawner, prepared_launch& launch) {
  process_handle process = spawn_checked(spawner, launch.plan);
  if (!process.placed_in_cgroup().empty()) adopt_placed_cgroup(process, launch);
  return process;
}

}  // namespace bashexec::detail

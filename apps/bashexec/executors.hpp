// The executor the `bashexec` program runs commands with, chosen from its
// flags: confined unless danger-full-access (--mode, --unconfined), and
// spawned cold or from a warm pool (--prespawn N).
#pragma once

#include <filesystem>
#include <functional>
#include <type_traits>
#include <utility>

#include <memory>

#include <bashexec/bashexec.hpp>
// This program composes executors of its own (fork_exec unconfined, and
// prespawned) and links bashexec::compiled, which holds only the shipped
// executors' members (docs/architecture.md, "Header-only or compiled").
#include <bashexec/impl/basic_executor.hpp>

#include "options.hpp"

namespace bashexec::cli {

/// The egress proxy of `--network allowlist` (network/egress_proxy.hpp).
/// Defined in egress_gateway.cpp, a unit of its own: Asio and Beast are the
/// heaviest headers the program compiles, and apart they build beside
/// main.cpp rather than inside it (docs/testing.md).
std::shared_ptr<egress_gateway> make_egress_gateway();

/// `Policies` with its spawn policy replaced by `Spawn`: the same
/// confinement, output and ownership, so the warm sandbox stays the
/// library's `sandbox_policies` in everything but the spawn.
template <class Spawn, class Policies>
using spawning_with = policies<spawn_with<Spawn>, confine_with<typename Policies::confinement>,
                               collect_with<typename Policies::output>, own_with<typename Policies::ownership>>;

/// danger-full-access: fork_exec rather than local_executor's posix_spawn —
/// the same behaviour and cost, plus a pre-exec hook, so the default
/// (automatic) containment can put the command in a cgroup: no escapee
/// outlives an unconfined run either, even when bashexec itself is SIGKILLed.
using unconfined_policies = policies<spawn_with<fork_exec>>;

inline executor_config make_config(const common_options& options) {
  executor_config config;
  if (options.workdir) config.cwd = std::filesystem::absolute(*options.workdir);
  config.sandbox.default_mode = options.mode;
  config.sandbox.network = options.network;
  config.sandbox.egress = options.egress;
  if (proxies_network(options.network)) config.sandbox.gateway = make_egress_gateway();
  config.containment = options.containment;
  config.limits = options.limits;
  if (options.prespawn) config.prespawn.per_key = *options.prespawn;
  return config;
}

/// The sandbox backend the options ask for: --backend, --bwrap, --setpriv.
inline sandbox_policies::confinement::config make_confinement_config(const common_options& options) {
  sandbox_policies::confinement::config own;
  own.only = options.backend;
  if (options.bwrap_program) own.get<bwrap>().program = *options.bwrap_program;
  if (options.setpriv_program) own.get<bwrap>().setpriv = *options.setpriv_program;
  return own;
}

template <class Policies, class Body>
int run_with(executor_config config, const common_options& options, Body& body) {
  if constexpr (std::is_same_v<typename Policies::confinement, sandbox_policies::confinement>) {
    basic_executor<Policies> executor(std::move(config), make_confinement_config(options));
    return body(executor);
  } else {
    basic_executor<Policies> executor(std::move(config));
    return body(executor);
  }
}

/// Runs `body` with the executor the options ask for: the sandboxing one
/// unless the mode is danger-full-access, over spawn_with<prespawned> when
/// --prespawn was given. `adjust` edits the configuration.
template <class Body>
int with_executor(const common_options& options, Body&& body,
                  const std::function<void(executor_config&)>& adjust = {}) {
  executor_config config = make_config(options);
  if (adjust) adjust(config);
  if (options.confined())
    return options.prespawn ? run_with<spawning_with<prespawned, sandbox_policies>>(std::move(config), options, body)
                            : run_with<sandbox_policies>(std::move(config), options, body);
  return options.prespawn ? run_with<spawning_with<prespawned, unconfined_policies>>(std::move(config), options, body)
                          : run_with<unconfined_policies>(std::move(config), options, body);
}

}  // namespace bashexec::cli

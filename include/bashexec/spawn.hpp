// spawn: what a type must provide to be a spawn policy, and the
// capabilities a plan may need from one.
//
// A spawn policy is an object. The executor holds one instance for its whole
// life, built by the first of these constructors `S` has:
//   S(const executor_config&, const S::config&)   // settings of its own
//   S(const executor_config&)                      // the executor's alone
//   S(const S::config&)                            // settings of its own
//   S()
// (`spawn_constructible` below; basic_executor static_asserts it). With
// the first or the third, `S::config` is the policy's own settings
// (`spawn_config_t<S>`): default-constructible, checked by its
// `void validate() const` when it has one (std::invalid_argument naming the
// field, spelled `<name>.<field>`), and handed to the executor at
// construction: `basic_executor(executor_config, confinement_config,
// spawn_config)`. So a stateful spawner has settings without a field in
// executor_config.
//
// Minimal complete definition of a spawn policy `S`:
//   static constexpr std::string_view name;                  // for messages
//   process_handle spawn(const launch_plan&) const;          // see below
// Optional, named parts:
//   static constexpr auto capabilities = boost::hana::make_set(
//       boost::hana::type_c<spawn_capability::pre_exec>, …);   // none when absent
//   struct config { void validate() const; };                  // its own settings
//   explicit S(const executor_config&[, const config&]);       // see above
//
// `spawn` returns once the child is running the plan's argv (or throws):
// infrastructure_error naming the failed step, pre_exec_failed when one of
// the plan's hooks failed, std::invalid_argument naming the plan field the
// policy cannot honour (`refuse_unsupported` below does that part from
// `capabilities`). The returned handle's pid leads a new session and process
// group, and every guarantee of launch.hpp holds for it; the process may have
// been created before the call (a pool), as long as nothing of an earlier
// command reached it.
//
// Concurrency: the executor calls `spawn` on its one const instance from
// several threads at once (the caller's thread for `run`, the executor's
// spawn thread for `start`). A policy with state keeps it `mutable` and
// synchronises it itself.
#pragma once

#include <concepts>
#include <stdexcept>
#include <string_view>

#include <boost/hana/contains.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/set.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include <fmt/core.h>

#include "bashexec/config.hpp"
#include "bashexec/launch.hpp"
#include "bashexec/process_handle.hpp"

namespace bashexec {

/// What a spawn policy can do beyond the guarantees every policy keeps. Each
/// tag names the plan field that needs it (`field`) and tells whether a plan
/// needs it (`needed_by`), so the refusal of an unsupported plan follows from
/// the policy's `capabilities` alone.
namespace spawn_capability {
/// Runs launch_plan::hooks in the child, in order, before exec.
struct pre_exec {
  static constexpr std::string_view field = "launch_plan.hooks";
  static constexpr std::string_view what = "run pre-exec hooks in the child";
  static bool needed_by(const launch_plan& plan) noexcept { return !plan.hooks.empty(); }
};
/// Applies launch_plan::limits in the child right before exec.
struct limits {
  static constexpr std::string_view field = "launch_plan.limits";
  static constexpr std::string_view what = "apply resource limits in the child before exec";
  static bool needed_by(const launch_plan& plan) noexcept { return !plan.limits.empty(); }
};
/// Joins launch_plan::cgroup_procs_fd in the child before any command code runs.
struct cgroup {
  static constexpr std::string_view field = "launch_plan.cgroup_procs_fd";
  static constexpr std::string_view what = "join a cgroup in the child before exec";
  static bool needed_by(const launch_plan& plan) noexcept { return plan.cgroup_procs_fd >= 0; }
};
/// Makes the plan's stdin, a terminal's slave, the child's controlling
/// terminal (launch_plan::controlling_terminal).
struct controlling_terminal {
  static constexpr std::string_view field = "launch_plan.controlling_terminal";
  static constexpr std::string_view what = "give the child a controlling terminal";
  static bool needed_by(const launch_plan& plan) noexcept { return plan.controlling_terminal; }
};
/// Hands out processes it created before the call (a pool). No plan needs
/// it; it tells the executor's description what to expect.
struct prespawned {
  static constexpr std::string_view field = "";
  static constexpr std::string_view what = "hand out processes started ahead of the call";
  static bool needed_by(const launch_plan&) noexcept { return false; }
};
}  // namespace spawn_capability

/// Every capability tag, in the order descriptions list them.
inline constexpr auto all_spawn_capabilities =
    boost::hana::tuple_t<spawn_capability::pre_exec, spawn_capability::limits, spawn_capability::cgroup,
                         spawn_capability::controlling_terminal, spawn_capability::prespawned>;

namespace detail {
template <class S>
constexpr auto declared_spawn_capabilities() {
  if constexpr (requires { S::capabilities; })
    return S::capabilities;
  else
    return boost::hana::make_set();
}
}  // namespace detail

/// The capabilities of spawn policy `S` (a hana::set of type_c<tag>).
template <class S>
inline constexpr auto spawn_capabilities_of = detail::declared_spawn_capabilities<S>();

/// Whether spawn policy `S` has capability `Capability`.
template <class S, class Capability>
inline constexpr bool spawn_can =
    decltype(boost::hana::contains(spawn_capabilities_of<S>, boost::hana::type_c<Capability>))::value;

/// The settings of a spawn policy that has none of its own.
struct no_spawn_config {};

namespace detail {
/// Which constructor of the list at the top builds `S`: 1 to 4, 0 for none.
template <class S>
constexpr int spawn_construction() {
  if constexpr (requires { requires std::constructible_from<S, const executor_config&, const typename S::config&>; })
    return 1;
  else if constexpr (std::constructible_from<S, const executor_config&>)
    return 2;
  else if constexpr (requires { requires std::constructible_from<S, const typename S::config&>; })
    return 3;
  else if constexpr (std::default_initializable<S>)
    return 4;
  else
    return 0;
}
template <class S, int Construction = spawn_construction<S>()>
struct spawn_config_of {
  using type = no_spawn_config;
};
template <class S>
struct spawn_config_of<S, 1> {
  using type = typename S::config;
};
template <class S>
struct spawn_config_of<S, 3> {
  using type = typename S::config;
};
}  // namespace detail

/// Spawn policy `S`'s own settings: `S::config` when the constructor the
/// executor uses takes it, else `no_spawn_config`.
template <class S>
using spawn_config_t = typename detail::spawn_config_of<S>::type;

/// Whether the executor can build its instance of `S` (the constructors at
/// the top of this header) from default-constructible settings.
template <class S>
concept spawn_constructible = detail::spawn_construction<S>() != 0 && std::default_initializable<spawn_config_t<S>>;

/// Checks a spawn policy's own settings: their `validate()` when they have
/// one (std::invalid_argument naming the field), else nothing.
template <class Config>
void validate_spawn_config(const Config& config) {
  if constexpr (requires { config.validate(); }) config.validate();
}

template <class S>
concept spawn_policy = requires(const S& policy, const launch_plan& plan) {
  { S::name } -> std::convertible_to<std::string_view>;
  { policy.spawn(plan) } -> std::same_as<process_handle>;
};

/// Throws std::invalid_argument naming the first field of `plan` that spawn
/// policy `S` has no capability for: such a plan must never run (a
/// confinement's hook skipped would run the command unconfined).
template <class S>
void refuse_unsupported(const launch_plan& plan) {
  boost::hana::for_each(all_spawn_capabilities, [&plan](auto capability) {
    using tag = typename decltype(capability)::type;
    if constexpr (!spawn_can<S, tag>) {
      if (tag::needed_by(plan))
        throw std::invalid_argument(fmt::format("{}: the {} spawn policy cannot {}; use fork_exec", tag::field,
                                                std::string_view(S::name), tag::what));
    }
  });
}

}  // namespace bashexec

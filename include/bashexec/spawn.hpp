// spawn: what a type must provide to be a spawn policy.
//
// Minimal complete definition of a spawn policy `S`:
//   static constexpr bool supports_pre_exec;   // can run launch_plan::hook
//   static constexpr std::string_view name;
//   static spawned_process spawn(const launch_plan&);
// `spawn` returns once the child has exec'd (or throws): infrastructure_error
// naming the failed step, or pre_exec_failed when the plan's hook failed.
// The guarantees every child gets are listed in launch.hpp.
#pragma once

#include <concepts>
#include <string_view>

#include "bashexec/launch.hpp"

namespace bashexec {

template <class S>
concept spawn_policy = requires(const launch_plan& plan) {
  { S::supports_pre_exec } -> std::convertible_to<bool>;
  { S::name } -> std::convertible_to<std::string_view>;
  { S::spawn(plan) } -> std::same_as<spawned_process>;
};

}  // namespace bashexec

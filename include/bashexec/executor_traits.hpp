// executor_traits: what an executor composed from `Policies` can do, as a
// compile-time Boost.Hana map computed from its policies:
//
//   executor_traits<P>[hana::type_c<executor_capability::confines>]   // confines commands?
//   executor_traits<P>[hana::type_c<spawn_capability::pre_exec>]      // runs pre-exec hooks?
//   … spawn_capability::limits, ::cgroup, ::prespawned, executor_capability::needs_pre_exec
//
// Each value is a hana::bool_c, so it serves `static_assert`, `if constexpr`
// and the executor's construction-time refusals alike (basic_executor.hpp),
// and `describe_executor<P>()` prints it for logs and docs. A new spawn
// capability appears here, in the refusals and in the description by adding
// its tag to spawn.hpp's `all_spawn_capabilities`.
#pragma once

#include <string>
#include <string_view>

#include <boost/hana/at_key.hpp>
#include <boost/hana/bool.hpp>
#include <boost/hana/concat.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/map.hpp>
#include <boost/hana/pair.hpp>
#include <boost/hana/transform.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <boost/hana/unpack.hpp>

#include "bashexec/policies.hpp"
#include "bashexec/spawn.hpp"

namespace bashexec {

/// Facts of an executor that come from its confinement policy.
namespace executor_capability {
struct confines {
  static constexpr std::string_view what = "confines commands";
};
struct needs_pre_exec {
  static constexpr std::string_view what = "its confinement needs pre-exec hooks";
};
}  // namespace executor_capability

/// Every key of executor_traits, in the order descriptions list them (a
/// hana::map has no order of its own).
inline constexpr auto all_executor_facts = boost::hana::concat(
    boost::hana::tuple_t<executor_capability::confines, executor_capability::needs_pre_exec>,
    all_spawn_capabilities);

namespace detail {
template <class Policies>
constexpr auto make_executor_traits() {
  namespace hana = boost::hana;
  using confinement = typename Policies::confinement;
  using spawn = typename Policies::spawn;
  auto spawn_facts = hana::transform(all_spawn_capabilities, [](auto capability) {
    return hana::make_pair(capability, hana::bool_c<spawn_can<spawn, typename decltype(capability)::type>>);
  });
  auto confinement_facts = hana::make_tuple(
      hana::make_pair(hana::type_c<executor_capability::confines>, hana::bool_c<confinement::confines>),
      hana::make_pair(hana::type_c<executor_capability::needs_pre_exec>, hana::bool_c<confinement::needs_pre_exec>));
  return hana::unpack(hana::concat(confinement_facts, spawn_facts), hana::make_map);
}
}  // namespace detail

/// The capability map of an executor over `Policies` (see the file comment).
template <class Policies>
inline constexpr auto executor_traits = detail::make_executor_traits<Policies>();

/// Whether an executor over `Policies` has capability `Capability`.
template <class Policies, class Capability>
inline constexpr bool executor_can =
    decltype(+executor_traits<Policies>[boost::hana::type_c<Capability>])::value;

/// "confines commands: no, …": every fact of executor_traits<Policies>.
template <class Policies>
std::string describe_executor() {
  std::string text;
  boost::hana::for_each(all_executor_facts, [&text](auto key) {
    using tag = typename decltype(key)::type;
    if (!text.empty()) text += ", ";
    text += tag::what;
    text += executor_can<Policies, tag> ? ": yes" : ": no";
  });
  return text;
}

}  // namespace bashexec

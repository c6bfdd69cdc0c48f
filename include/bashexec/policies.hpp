// policies: the keyed, order-independent policy set an executor is composed
// from. Pick any subset in any order; the rest take their defaults:
//
//   using my_policies = bashexec::policies<bashexec::confine_with<bashexec::landlock>,
//                                          bashexec::spawn_with<bashexec::fork_exec>>;
//   bashexec::basic_executor<my_policies> executor;
//
// Defaults: spawn_with<fork_exec>, confine_with<unconfined>,
// collect_with<tail_spill>, own_with<tracked_owners>. fork_exec rather than
// posix_spawner so that the default type contains (a cgroup under the
// default `automatic` containment, its child born in it at no cost per call,
// issue 25 item 5 / issue 27); spawn_with<posix_spawner> is still there for
// who wants glibc's posix_spawn and process-group containment.
#pragma once

#include <boost/hana/find.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/map.hpp>
#include <boost/hana/optional.hpp>
#include <boost/hana/pair.hpp>
#include <boost/hana/set.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include "bashexec/confinement.hpp"
#include "bashexec/confinement/unconfined.hpp"
#include "bashexec/output.hpp"
#include "bashexec/output/tail_spill.hpp"
#include "bashexec/ownership.hpp"
#include "bashexec/ownership/tracked_owners.hpp"
#include "bashexec/spawn.hpp"
#include "bashexec/spawn/fork_exec.hpp"
#include "bashexec/spawn/posix_spawn.hpp"

namespace bashexec {

namespace policy_kind {
struct spawn {};
struct confinement {};
struct output {};
struct ownership {};
}  // namespace policy_kind

namespace detail {
/// What every pick carries: its kind (the key in `policies`) and the policy.
template <class Kind, class P>
struct policy_pick {
  using kind = Kind;
  using type = P;
};
}  // namespace detail

// Each pick checks its concept itself, so the error names the pick and the
// header that defines the concept (static_assert wants a literal message).
template <class P>
struct spawn_with : detail::policy_pick<policy_kind::spawn, P> {
  static_assert(spawn_policy<P>, "spawn_with<P>: P is not a spawn policy (see bashexec/spawn.hpp)");
};
template <class P>
struct confine_with : detail::policy_pick<policy_kind::confinement, P> {
  static_assert(confinement_policy<P>,
                "confine_with<P>: P is not a confinement policy (see bashexec/confinement.hpp)");
};
template <class P>
struct collect_with : detail::policy_pick<policy_kind::output, P> {
  static_assert(output_policy<P>, "collect_with<P>: P is not an output policy (see bashexec/output.hpp)");
};
template <class P>
struct own_with : detail::policy_pick<policy_kind::ownership, P> {
  static_assert(ownership_policy<P>, "own_with<P>: P is not an ownership policy (see bashexec/ownership.hpp)");
};

template <class... Picks>
struct policies {
 private:
  static constexpr auto kinds = boost::hana::make_tuple(boost::hana::type_c<typename Picks::kind>...);
  static_assert(decltype(boost::hana::length(boost::hana::to_set(kinds)))::value == sizeof...(Picks),
                "bashexec::policies: each policy kind (spawn, confinement, output, ownership) may be picked "
                "at most once");
  static constexpr auto picked = boost::hana::make_map(
      boost::hana::make_pair(boost::hana::type_c<typename Picks::kind>, boost::hana::type_c<typename Picks::type>)...);

  template <class Kind, class Default>
  using pick = typename decltype(+boost::hana::find(picked, boost::hana::type_c<Kind>)
                                      .value_or(boost::hana::type_c<Default>))::type;

 public:
  using spawn = pick<policy_kind::spawn, fork_exec>;
  using confinement = pick<policy_kind::confinement, unconfined>;
  using output = pick<policy_kind::output, tail_spill>;
  using ownership = pick<policy_kind::ownership, tracked_owners>;
};

}  // namespace bashexec

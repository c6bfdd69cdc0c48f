// confinement/chain: pick the first confinement that really works on this
// machine (docs/contract.md item 15). Candidates are tried in order by a
// functional probe the executor supplies; the verdict is cached for the
// chain's lifetime. No usable candidate → every prepare throws
// `sandbox_unavailable` naming the mode, each candidate with why it failed,
// and what to install or enable: never a silent unconfined run.
//
// Besides the confining-policy members (see confinement.hpp), a chain has
//   static constexpr bool needs_selection = true;
//   template <class Probe> void select(Probe&& probe) const;
//       `probe(const Candidate&) -> bool` for each candidate in order (a
//       generic lambda): true means "enforced a read-only profile around
//       `true` within the probe timeout". A probe may throw to explain a
//       failure; the exception text is kept. Runs at most once per chain,
//       thread-safe; later calls return at once. A chain of one candidate is
//       selected without probing.
//   std::string_view selected_name() const;   // "" until/unless selected
// `prepare` before `select` on a multi-candidate chain is a programming
// error (std::logic_error).
//
// Configuration: a chain's `config` holds each candidate's own config,
// reached by candidate type (`own.get<bwrap>().program = …`); it converts
// from any one candidate's config, the others defaulted, so
// `sandbox_executor executor(config, bwrap::config{.program = "/opt/bwrap"})`
// reads as it says. Its `validate` validates every member's.
//
// The candidates are a compile-time sequence (Boost.Hana): a candidate type
// is found by `index_if` (a config for a type that is not a candidate does not
// compile), and construction, probing and dispatch walk the same index range
// instead of each spelling its own index_sequence fold.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <boost/hana/equal.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/index_if.hpp>
#include <boost/hana/optional.hpp>
#include <boost/hana/range.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <fmt/core.h>

#include "bashexec/config.hpp"
#include "bashexec/confinement.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/launch.hpp"

namespace bashexec {

template <class... Candidates>
  requires(sizeof...(Candidates) > 0 && (confining_policy<Candidates> && ...))
class chain {
  static constexpr int unselected = -2;
  static constexpr int none_usable = -1;
  static constexpr auto candidate_types = boost::hana::tuple_t<Candidates...>;
  static constexpr auto indices = boost::hana::make_range(boost::hana::size_c<0>, boost::hana::size_c<sizeof...(Candidates)>);

  /// The position of `C` among the candidates; not a candidate → no compile.
  template <class C>
  static constexpr std::size_t index_of() {
    constexpr auto found = boost::hana::index_if(candidate_types, boost::hana::equal.to(boost::hana::type_c<C>));
    static_assert(decltype(boost::hana::is_just(found))::value,
                  "chain::config::get<C>: C is not a candidate of this chain");
    return std::remove_cvref_t<decltype(found.value_or(boost::hana::size_c<0>))>::value;
  }

 public:
  static constexpr bool confines = true;
  static constexpr bool needs_pre_exec = (Candidates::needs_pre_exec || ...);
  static constexpr std::string_view name = "chain";
  static constexpr bool needs_selection = true;
  static constexpr std::array<std::string_view, sizeof...(Candidates)> candidate_names{Candidates::name...};

  /// Every candidate's own config.
  struct config {
    std::tuple<typename Candidates::config...> members;
    /// When not empty, the name of the one candidate to use (its probe still
    /// runs); the others are not tried. What `bashexec --backend` sets.
    std::string only;

    config() = default;
    /// One candidate's config, the others defaulted (when exactly one
    /// candidate has that config type).
    template <class Own>
      requires((std::is_same_v<Own, typename Candidates::config> + ...) == 1)
    config(Own own) {  // NOLINT(google-explicit-constructor): reads as "the bwrap config"
      std::get<Own>(members) = std::move(own);
    }

    template <class C>
    auto& get() noexcept {
      return std::get<index_of<C>()>(members);
    }
    template <class C>
    const auto& get() const noexcept {
      return std::get<index_of<C>()>(members);
    }

    void validate() const {
      boost::hana::for_each(indices, [this](auto i) { validate_confinement_config(std::get<i>(members)); });
      if (!only.empty() && std::find(candidate_names.begin(), candidate_names.end(), only) == candidate_names.end()) {
        std::string names;
        for (std::string_view candidate : candidate_names) names += fmt::format("{}{}", names.empty() ? "" : ", ", candidate);
        throw std::invalid_argument(fmt::format("chain.only: \"{}\" is not a candidate ({})", only, names));
      }
    }
  };

  /// Builds every candidate; one whose constructor throws is kept as
  /// unusable, with the reason.
  explicit chain(const sandbox_config& shared) : chain(shared, config{}) {}
  chain(const sandbox_config& shared, const config& own) {
    boost::hana::for_each(indices, [&](auto i) {
      if (own.only.empty() || own.only == candidate_names[i])
        construct<i>(shared, std::get<i>(own.members));
      else
        unusable_[i] = fmt::format("not tried: only {} was asked for", own.only);
    });
  }

  chain(const chain&) = delete;
  chain& operator=(const chain&) = delete;

  template <class Probe>
  void select(Probe&& probe) const {
    if (state_.load(std::memory_order_acquire) != unselected) return;
    std::lock_guard lock(select_mutex_);
    if (state_.load(std::memory_order_relaxed) != unselected) return;

    std::array<std::string, sizeof...(Candidates)> why = unusable_;
    int chosen = none_usable;
    boost::hana::for_each(indices, [&](auto i) {
      if (chosen == none_usable && try_candidate<i>(probe, why[i])) chosen = static_cast<int>(i());
    });

    if (chosen == none_usable) {
      std::string tried;
      for (std::size_t i = 0; i < why.size(); ++i)
        tried += fmt::format("{}{}: {}", i == 0 ? "" : "; ", candidate_names[i], why[i]);
      std::string remedies;
      (append_remedy<Candidates>(remedies), ...);
      failure_ = fmt::format("tried {}. To fix: {}", tried, remedies.empty() ? "install a sandbox backend" : remedies);
    }
    state_.store(chosen, std::memory_order_release);
  }

  /// Whether `select` has run (successfully or not).
  bool selected() const noexcept { return state_.load(std::memory_order_acquire) != unselected; }

  /// The selected candidate's name; empty before selection or when none works.
  std::string_view selected_name() const noexcept {
    int index = state_.load(std::memory_order_acquire);
    return index >= 0 ? candidate_names[static_cast<std::size_t>(index)] : std::string_view{};
  }

  confined_launch prepare(sandbox_mode mode, const std::filesystem::path& root, launch_plan& plan) const {
    if constexpr (sizeof...(Candidates) == 1)
      select([](const auto&) { return true; });  // never called: one candidate needs no probe
    const int index = state_.load(std::memory_order_acquire);
    if (index == unselected) throw std::logic_error("chain: select() must run before prepare()");
    if (index == none_usable)
      throw sandbox_unavailable(mode, fmt::format("no sandbox backend can confine {} mode: {}", mode, failure_));
    return dispatch(index, [&](const auto& candidate) { return candidate.prepare(mode, root, plan); });
  }

  std::optional<std::string> runner_failure(confined_launch& launch, std::string_view err,
                                            std::string_view out = {}) const {
    const int index = state_.load(std::memory_order_acquire);
    if (index < 0) return std::nullopt;
    return dispatch(index, [&](const auto& candidate) { return candidate.runner_failure(launch, err, out); });
  }

  bool is_denial(std::string_view err) const {
    const int index = state_.load(std::memory_order_acquire);
    if (index < 0) return false;
    return dispatch(index, [&](const auto& candidate) { return candidate.is_denial(err); });
  }

  /// The selected candidate's `reported_exit_code`, empty where it has none.
  std::optional<int> reported_exit_code(confined_launch& launch) const {
    const int index = state_.load(std::memory_order_acquire);
    if (index < 0) return std::nullopt;
    return dispatch(index, [&](const auto& candidate) -> std::optional<int> {
      if constexpr (requires { candidate.reported_exit_code(launch); })
        return candidate.reported_exit_code(launch);
      else
        return std::nullopt;
    });
  }

 private:
  template <std::size_t I, class Own>
  void construct(const sandbox_config& shared, const Own& own) {
    try {
      std::get<I>(candidates_).emplace(shared, own);
    } catch (const std::exception& error) {
      unusable_[I] = fmt::format("not configured: {}", error.what());
    }
  }

  template <std::size_t I, class Probe>
  bool try_candidate(Probe& probe, std::string& why) const {
    const auto& candidate = std::get<I>(candidates_);
    if (!candidate) return false;  // `why` already says why it could not be built
    if constexpr (sizeof...(Candidates) == 1) {
      return true;
    } else {
      try {
        if (probe(*candidate)) return true;
        why = "probe failed (a read-only `true` did not succeed)";
      } catch (const std::exception& error) {
        why = fmt::format("probe failed: {}", error.what());
      } catch (...) {
        why = "probe failed with an unknown exception";
      }
      return false;
    }
  }

  template <class C>
  static void append_remedy(std::string& out) {
    if constexpr (requires { C::remedy; }) out += fmt::format("{}{}", out.empty() ? "" : "; or ", C::remedy);
  }

  template <class F>
  decltype(auto) dispatch(int index, F&& f) const {
    using R = std::invoke_result_t<F&, const std::tuple_element_t<0, std::tuple<Candidates...>>&>;
    std::optional<R> result;
    boost::hana::for_each(indices, [&](auto i) {
      if (index == static_cast<int>(i())) result.emplace(f(*std::get<i>(candidates_)));
    });
    return R(std::move(*result));
  }

  std::tuple<std::optional<Candidates>...> candidates_;
  std::array<std::string, sizeof...(Candidates)> unusable_;
  mutable std::mutex select_mutex_;
  mutable std::atomic<int> state_{unselected};
  mutable std::string failure_;  // written before `state_` is released
};

}  // namespace bashexec

// confinement/chain: pick the first confinement that really works on this
// machine (DESIGN.md contract 15). Candidates are tried in order by a
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
#pragma once

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

#include <fmt/format.h>

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

 public:
  static constexpr bool confines = true;
  static constexpr bool needs_pre_exec = (Candidates::needs_pre_exec || ...);
  static constexpr std::string_view name = "chain";
  static constexpr bool needs_selection = true;
  static constexpr std::array<std::string_view, sizeof...(Candidates)> candidate_names{Candidates::name...};

  /// Builds every candidate; one whose constructor throws is kept as
  /// unusable, with the reason.
  explicit chain(const executor_config& config) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (construct<I>(config), ...);
    }(std::index_sequence_for<Candidates...>{});
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
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (void)((try_candidate<I>(probe, why[I]) ? (chosen = static_cast<int>(I), true) : false) || ...);
    }(std::index_sequence_for<Candidates...>{});

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

 private:
  template <std::size_t I>
  void construct(const executor_config& config) {
    try {
      std::get<I>(candidates_).emplace(config);
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
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (void)((index == static_cast<int>(I) && (result.emplace(f(*std::get<I>(candidates_))), true)) || ...);
    }(std::index_sequence_for<Candidates...>{});
    return R(std::move(*result));
  }

  std::tuple<std::optional<Candidates>...> candidates_;
  std::array<std::string, sizeof...(Candidates)> unusable_;
  mutable std::mutex select_mutex_;
  mutable std::atomic<int> state_{unselected};
  mutable std::string failure_;  // written before `state_` is released
};

}  // namespace bashexec

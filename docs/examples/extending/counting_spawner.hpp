// The spawn policy of docs/extending.md, "A spawn policy", verbatim: a
// stateful policy outside the library's tree. check_laws.cpp runs the spawn
// laws (bashexec/laws/spawn.hpp) over it and builds an executor on it
// against the installed package; tests/laws/test_spawn_laws.cpp runs the laws
// over it in-tree too.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include <bashexec/config.hpp>
#include <bashexec/spawn.hpp>
#include <bashexec/spawn/fork_exec.hpp>

/// fork_exec, counting the children it started: a spawn policy with state.
class counting_spawner {
 public:
  static constexpr std::string_view name = "counting";
  // Optional: what it can do beyond the guarantees of launch.hpp. It runs
  // through fork_exec, so it can do what fork_exec can.
  static constexpr auto capabilities = bashexec::spawn_capabilities_of<bashexec::fork_exec>;

  // Optional: the executor passes its config when this constructor exists.
  explicit counting_spawner(const bashexec::executor_config& config) : limited_(config.limits.any()) {}

  // Called concurrently from several threads on one const instance: the
  // state is an atomic.
  bashexec::process_handle spawn(const bashexec::launch_plan& plan) const {
    bashexec::refuse_unsupported<counting_spawner>(plan);  // never run a plan it cannot honour
    bashexec::process_handle child = inner_.spawn(plan);
    spawned_.fetch_add(1, std::memory_order_relaxed);
    return child;
  }

  std::uint64_t spawned() const noexcept { return spawned_.load(std::memory_order_relaxed); }
  bool limited() const noexcept { return limited_; }

 private:
  bashexec::fork_exec inner_;
  bool limited_;
  mutable std::atomic<std::uint64_t> spawned_{0};
};

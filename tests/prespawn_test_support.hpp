// The executor the suites run over the prespawned spawn policy (issue 14:
// "the executor test suite passes with prespawned as the spawn policy for
// every confinement"): basic_executor<Policies> whose pool is warm before
// its first call.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <utility>

#include <bashexec/basic_executor.hpp>
#include <bashexec/sandbox_mode.hpp>
#include <bashexec/spawn/prespawned.hpp>

namespace test_support {

/// basic_executor<Policies> (its spawn policy: prespawned) that runs `true`
/// once in every mode it can run in, then waits until each of those pool
/// keys has its waiting processes. A pool serves a key's first call cold
/// (fork_exec) and most test cases make one or two calls per executor: without
/// the warm-up they would test the cold fallback, not the waiting processes.
/// A mode the configuration refuses is left cold (the call's exception is
/// the test's to see, not the warm-up's).
template <class Policies>
class warm_executor : public bashexec::basic_executor<Policies> {
  using base = bashexec::basic_executor<Policies>;
  static_assert(bashexec::spawn_can<typename base::spawn_type, bashexec::spawn_capability::prespawned>);

 public:
  explicit warm_executor(bashexec::executor_config config = {},
                         const typename base::confinement_config& confinement = {})
      : base(std::move(config), confinement) {
    using bashexec::sandbox_mode;
    for (std::optional<sandbox_mode> mode :
         {std::optional<sandbox_mode>{}, std::optional{sandbox_mode::read_only},
          std::optional{sandbox_mode::workspace_write}, std::optional{sandbox_mode::danger_full_access}}) {
      if (mode && !base::confines) break;
      try {
        this->run(this->resolve({.command = "true", .mode = mode}));
      } catch (const std::exception&) {
      }
    }
    this->spawner().wait_until_warm(std::chrono::seconds(10));
  }

  /// With BASHEXEC_TEST_POOL_STATS set, says on stderr how the calls were
  /// served (the warm-up's included): how much of a suite ran warm.
  ~warm_executor() {
    if (std::getenv("BASHEXEC_TEST_POOL_STATS") == nullptr) return;
    const auto stats = this->spawner().stats();
    std::fprintf(stderr, "pool: warm %llu cold %llu lost %llu\n", static_cast<unsigned long long>(stats.warm),
                 static_cast<unsigned long long>(stats.cold), static_cast<unsigned long long>(stats.lost));
  }
};

}  // namespace test_support

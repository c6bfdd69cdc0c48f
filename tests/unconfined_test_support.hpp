// The executor the unconfined core suites (test_foreground, test_background)
// drive: local_executor, or — in their second build with
// BASHEXEC_TEST_PRESPAWNED (tests/CMakeLists.txt, CTest prefix
// "prespawned/") — the same policies over the prespawned spawn policy's
// warm pool, so every case of both suites also runs over the pool (issue 14).
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <type_traits>

#include <bashexec/basic_executor.hpp>
#include <bashexec/local_executor.hpp>

#include "executor_test_support.hpp"
#ifdef BASHEXEC_TEST_PRESPAWNED
#include "prespawn_test_support.hpp"
#endif

namespace test_support {

#ifdef BASHEXEC_TEST_PRESPAWNED
using unconfined_executor = warm_executor<bashexec::policies<bashexec::spawn_with<bashexec::prespawned>>>;
#else
using unconfined_executor = bashexec::local_executor;
#endif

/// Whether `Executor` spawns from a pool of processes started ahead of the
/// call: they are children of this process while the executor lives
/// (spawn/prespawned.hpp).
template <class Executor>
inline constexpr bool spawns_from_pool =
    bashexec::spawn_can<typename Executor::spawn_type, bashexec::spawn_capability::prespawned>;

/// Whether child `pid` of this process is one that an executor over a pool
/// keeps while it lives, and no command's: a waiting process (a clone of
/// this process that has not exec'd yet, so its executable is this one's)
/// or the cgroup guardian (containment.hpp).
inline bool kept_by_pool_executor(long pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink(proc + "/exe", ec);
  if (!ec && exe == std::filesystem::read_symlink("/proc/self/exe", ec)) return true;
  return read_proc(proc + "/cmdline").find("bashexec-guardian") != std::string::npos;
}

}  // namespace test_support

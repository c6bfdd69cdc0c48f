// The executor the unconfined core suites (test_foreground, test_background)
// drive: local_executor, or — in their second build with
// BASHEXEC_TEST_PRESPAWNED (tests/CMakeLists.txt, CTest prefix
// "prespawned/") — the same policies over the prespawned spawn policy's
// warm pool, so every case of both suites also runs over the pool (issue 14),
// or — in their third, with BASHEXEC_TEST_DECORATED (prefix "decorated/") —
// local_executor behind an executor that is no basic_executor (the
// out-of-tree audited_executor): the suites hold for any model of the
// executor concept that passes calls on, and use nothing of it but the
// concept and spill_directory() (issue 30), or — in their fourth, with
// BASHEXEC_TEST_REMOTE (prefix "remote/") — remote_executor talking to a
// server in another network namespace (remote_test_support.hpp): the
// contract holds across the network. Cases that need a local fact (the
// commands as this process's children) are left out of that build, each
// with its reason (docs/testing.md, "The remote lane").
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
#ifdef BASHEXEC_TEST_REMOTE
#include "remote_test_support.hpp"
#endif
#ifdef BASHEXEC_TEST_DECORATED
#include <atomic>
#include <utility>

#include <bashexec/executor.hpp>

#include "../docs/examples/extending/audited_executor.hpp"
#endif

namespace test_support {

#ifdef BASHEXEC_TEST_PRESPAWNED
using unconfined_executor = warm_executor<bashexec::policies<bashexec::spawn_with<bashexec::prespawned>>>;
#elif defined(BASHEXEC_TEST_DECORATED)
/// The executor a decorated executor passes its calls to, built first and
/// destroyed last.
struct decorated_inner {
  explicit decorated_inner(bashexec::executor_config config) : inner(std::move(config)) {}
  bashexec::local_executor inner;
  std::atomic<long> audited{0};
};

/// local_executor behind example::audited_executor, built as the suites
/// build theirs (from an executor_config). The spill directory is a local
/// fact of the inner executor, so it is passed through too.
class unconfined_executor : private decorated_inner, public example::audited_executor<bashexec::local_executor> {
 public:
  using spawn_type = bashexec::local_executor::spawn_type;
  explicit unconfined_executor(bashexec::executor_config config = {})
      : decorated_inner(std::move(config)), audited_executor(inner, [this](const std::string&) { ++audited; }) {}
  std::filesystem::path spill_directory() const { return inner.spill_directory(); }
  /// Runs and starts that went through the decorator.
  long calls_audited() const noexcept { return audited.load(); }
};
static_assert(bashexec::executor<unconfined_executor>);
#elif defined(BASHEXEC_TEST_REMOTE)
/// remote_executor over a server of its own in the lane's namespace, built
/// from the case's configuration.
class unconfined_executor : private remote_server_process, public bashexec::remote_executor {
 public:
  using spawn_type = bashexec::local_executor::spawn_type;
  explicit unconfined_executor(const bashexec::executor_config& config = {})
      : remote_server_process(config), remote_executor(lane_client(url(), config)) {}
};
static_assert(bashexec::executor<unconfined_executor>);
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

// Shared by the sandbox tests: one executor per backend and spawn policy
// (fork_exec, and the prespawned warm pool: issue 14), printable sandbox
// facts, visible skips where a backend is missing, and the enforcement level
// a run must report on this machine.
#pragma once

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <random>
#include <vector>

#include <dirent.h>
#include <unistd.h>
#include <utility>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>

#include <catch2/catch.hpp>

#include <bashexec/basic_executor.hpp>
#include <bashexec/confinement/bwrap.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/network_access.hpp>
#include <bashexec/spawn/fork_exec.hpp>
#include <bashexec/spawn/prespawned.hpp>

#include "executor_test_support.hpp"
#include "prespawn_test_support.hpp"

namespace Catch {
template <>
struct StringMaker<bashexec::sandbox_mode> {
  static std::string convert(bashexec::sandbox_mode mode) { return std::string(to_string(mode)); }
};
template <>
struct StringMaker<bashexec::enforcement> {
  static std::string convert(bashexec::enforcement level) { return std::string(to_string(level)); }
};
template <>
struct StringMaker<bashexec::task_status> {
  static std::string convert(bashexec::task_status status) { return std::string(to_string(status)); }
};
template <>
struct StringMaker<bashexec::network_access> {
  static std::string convert(bashexec::network_access access) { return std::string(to_string(access)); }
};
}  // namespace Catch

/// Skips the rest of a test case, visibly, when `missing_reason` holds one.
#define SKIP_UNLESS(missing_reason)          \
  if (auto skip_reason = (missing_reason)) { \
    WARN("skipped: " << *skip_reason);       \
    return;                                  \
  }

namespace test_support {

using bwrap_executor =
    bashexec::basic_executor<bashexec::policies<bashexec::spawn_with<bashexec::fork_exec>,
                                                bashexec::confine_with<bashexec::bwrap>>>;
using landlock_executor =
    bashexec::basic_executor<bashexec::policies<bashexec::spawn_with<bashexec::fork_exec>,
                                                bashexec::confine_with<bashexec::landlock>>>;

/// The same confinements over the prespawned spawn policy, warm from the
/// start: the sandbox suites list all four executors, so every confined
/// executor test also runs over the pool.
using prespawned_bwrap_executor = warm_executor<
    bashexec::policies<bashexec::spawn_with<bashexec::prespawned>, bashexec::confine_with<bashexec::bwrap>>>;
using prespawned_landlock_executor = warm_executor<
    bashexec::policies<bashexec::spawn_with<bashexec::prespawned>, bashexec::confine_with<bashexec::landlock>>>;

/// Whether `Executor` confines with `Confinement`, whatever its spawn policy.
template <class Executor, class Confinement>
inline constexpr bool confined_by = std::is_same_v<typename Executor::confinement_type, Confinement>;

/// Why `Executor`'s backend cannot confine here (`with_network`: including
/// the network knob); empty when it can.
template <class Executor>
std::optional<std::string> backend_missing(bool with_network = false) {
  if constexpr (confined_by<Executor, bashexec::bwrap>) {
    auto program = bashexec::detail::find_program("bwrap");
    if (!program) return "bwrap is not installed (apt-get install bubblewrap)";
    const std::string probe = program->string() + " --ro-bind / / --dev /dev --proc /proc" +
                              (with_network ? " --unshare-net" : "") + " true >/dev/null 2>&1";
    if (std::system(probe.c_str()) != 0) return "bwrap is installed but cannot create a sandbox here";
    return std::nullopt;
  } else {
    const int abi = bashexec::landlock::abi();
    if (abi < 0) return std::string("Landlock is not available: ") + std::strerror(-abi);
    if (with_network && !bashexec::landlock::network_level(abi))
      return "Landlock cannot confine the network here (ABI < 4 and no seccomp filter for this architecture)";
    return std::nullopt;
  }
}

/// Why `Executor` cannot run here: its confining backend is missing; empty
/// for an executor that never confines (it always can).
template <class Executor>
std::optional<std::string> executor_missing() {
  if constexpr (Executor::confines)
    return backend_missing<Executor>();
  else
    return std::nullopt;
}

/// The level a `mode` run must report here (no protected path in the test
/// workspaces). Under Landlock, workspace-write is always partial (metadata
/// outside the workspace is not governed); read-only is full from ABI 3
/// where the seccomp filter refuses metadata writes.
template <class Executor>
bashexec::enforcement expected_level(bashexec::sandbox_mode mode,
                                     bashexec::network_access network = bashexec::network_access::full) {
  using bashexec::enforcement;
  if constexpr (confined_by<Executor, bashexec::landlock>) {
    const int abi = bashexec::landlock::abi();
    const bool files_full = mode == bashexec::sandbox_mode::read_only &&
                            abi >= bashexec::landlock::full_enforcement_abi &&
                            bashexec::detail::seccomp_filter_supported;
    const bool net_full =
        !bashexec::confines_network(network) || bashexec::landlock::network_level(abi) == enforcement::full;
    return files_full && net_full ? enforcement::full : enforcement::partial;
  } else {
    return enforcement::full;
  }
}

/// Whether a check runs through the foreground or the background path.
enum class via { run, start };
inline constexpr const char* name_of(via how) { return how == via::run ? "run" : "start + wait + read_output"; }
inline constexpr via both_ways[] = {via::run, via::start};
inline constexpr bashexec::sandbox_mode confined_modes[] = {bashexec::sandbox_mode::read_only,
                                                           bashexec::sandbox_mode::workspace_write};

/// What one command did, whichever way it was executed.
struct observed {
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<bashexec::sandbox_info> sandbox;
  std::string text;  // stdout then stderr
};

template <class Executor>
observed observe(Executor& exec, bashexec::exec_request request, via how) {
  if (how == via::run) {
    bashexec::run_result result = exec.run(exec.resolve(std::move(request)));
    return {result.exit_code, result.signal, result.sandbox, result.out.text + result.err.text};
  }
  const bashexec::task_id id = exec.start(exec.resolve(std::move(request)));
  const bashexec::task_snapshot settled = exec.wait(id);
  const bashexec::task_read read = exec.read_output(id);
  // The read and the snapshots carry the same stamped facts (contract 17).
  CHECK(read.task.status == settled.status);
  CHECK(read.task.sandbox.has_value() == settled.sandbox.has_value());
  if (read.task.sandbox && settled.sandbox) CHECK(read.task.sandbox->denied == settled.sandbox->denied);
  CHECK(exec.get(id).sandbox.has_value() == settled.sandbox.has_value());
  return {settled.exit_code, settled.signal, settled.sandbox, read.delta};
}

/// A number unlikely to appear in any other command line: `sleep <it>`
/// marks a test's processes, so the host finds them in its own /proc —
/// also those inside a pid namespace (bwrap), whose own ids mean nothing
/// out here.
inline std::string unique_sleep() {
  static std::atomic<unsigned> counter{0};
  static std::random_device device;
  return fmt::format("3{:03}.{}{:05}", counter++ % 1000, ::getpid() % 1000, device() % 100000);
}

}  // namespace test_support

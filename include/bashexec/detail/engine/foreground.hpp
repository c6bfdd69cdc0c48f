// detail/engine/foreground: one foreground run (contract 2–8, 16), driven in
// the calling thread — spawn the prepared launch, poll the child's pipes,
// its pidfd and (when the caller can stop) an eventfd the stop callback
// signals, then build the run_result and classify a confined failure. The
// functional probe of a confinement chain (contract 15) is one such run.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/config.hpp"
#include "bashexec/detail/engine/child_run.hpp"
#include "bashexec/detail/engine/environment.hpp"
#include "bashexec/detail/engine/launch_builder.hpp"
#include "bashexec/detail/engine/shell_state_capture.hpp"
#include "bashexec/detail/engine/spawn_step.hpp"
#include "bashexec/detail/engine/verdict.hpp"
#include "bashexec/detail/text/text_match.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/output.hpp"
#include "bashexec/request.hpp"
#include "bashexec/result.hpp"
#include "bashexec/run_progress.hpp"

namespace bashexec::detail {

/// The foreground event loop, until the child settles. With `progress`, the
/// byte counts are stored there after every round of reads.
template <class Collector>
void drive_until_settled(child_run<Collector>& child, const std::stop_token& stop, run_progress* progress) {
  unique_fd stop_fd;
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
  if (stop.stop_possible()) {
    stop_fd = unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!stop_fd) throw_syscall("eventfd");
    on_stop.emplace(stop, std::function<void()>([fd = stop_fd.get()] {
                      std::uint64_t one = 1;
                      [[maybe_unused]] auto n = ::write(fd, &one, sizeof one);
                    }));
  }
  constexpr std::size_t scratch_size = 1 << 16;
  auto scratch = std::make_unique_for_overwrite<char[]>(scratch_size);  // no zero-fill per run
  using source = child_source;
  bool stop_seen = false;  // the eventfd stays readable once signalled: watch it until then only
  while (!child.settled()) {
    pollfd fds[5];
    source sources[5];
    nfds_t count = 0;
    auto watch = [&](int fd, short events, source s) {
      if (fd < 0) return;
      fds[count] = {fd, events, 0};
      sources[count++] = s;
    };
    watch(child.fd(source::out), POLLIN, source::out);
    watch(child.fd(source::err), POLLIN, source::err);
    watch(child.fd(source::in), POLLOUT, source::in);
    watch(child.fd(source::exit), POLLIN, source::exit);
    const nfds_t stop_index = count;
    if (stop_fd && !stop_seen) fds[count++] = {stop_fd.get(), POLLIN, 0};

    int timeout_ms = -1;
    if (auto at = child.next_deadline()) {
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(*at - clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<decltype(ms)>(ms, 0, std::numeric_limits<int>::max()));
    }
    int ready = ::poll(fds, count, timeout_ms);
    if (ready < 0 && errno != EINTR) throw_syscall("poll");
    const auto now = clock::now();
    if (stop_fd && !stop_seen && ready > 0 && fds[stop_index].revents) {
      stop_seen = true;
      child.request_stop(stop_cause::aborted, now);
    }
    for (nfds_t i = 0; ready > 0 && i < stop_index; ++i) {
      if (!fds[i].revents || child.fd(sources[i]) < 0) continue;
      child.dispatch(sources[i], scratch.get(), scratch_size, now);
    }
    if (progress) {
      progress->stdout_bytes.store(child.out().total(), std::memory_order_relaxed);
      progress->stderr_bytes.store(child.err().total(), std::memory_order_relaxed);
    }
    child.on_time(now);
  }
}

/// The shell's final state for a run that asked for it
/// (detail/engine/shell_state_capture.hpp), or why there is none: only a
/// shell that exited by itself leaves one.
inline void take_state(run_result& result, int state_file, const executor_config& config) {
  if (result.timed_out || result.aborted || result.signal || !result.exit_code) {
    result.state_notice = "the command did not exit by itself (killed, timed out or aborted): no state was taken";
    return;
  }
  std::string why;
  result.final_state =
      read_state_file(state_file, config.shell_state_limit, child_environment(nullptr, config.scrub), config.scrub, why);
  if (!result.final_state) result.state_notice = std::move(why);
}

/// Spawns `launch` with `spawner` and drives it to completion in the calling
/// thread. A runner failure of a confined run throws sandbox_unavailable
/// naming `confinement_name`.
template <class Collector, class Spawn, class Confinement>
run_result run_foreground(const Spawn& spawner, const exec_spec& spec, prepared_launch launch,
                          const Confinement& confinement, std::string_view confinement_name,
                          const launch_builder& builder) {
  const executor_config& config = builder.config();
  // The timeout bounds the spawn too: whatever it waits for counts.
  const auto deadline = clock::now() + std::min(spec.timeout, config.max_timeout);
  launch.plan.deadline = deadline;
  process_handle process;
  try {
    process = spawn_launch(spawner, launch);
  } catch (...) {
    const spawn_failure failure = classify_spawn_failure(launch.confined.has_value());
    if (failure.runner_failure) throw runner_unavailable(confinement_name, *launch.info, failure.reason);
    throw;
  }
  std::optional<child_run<Collector>> slot;
  child_run<Collector>& child = builder.start_child(slot, std::move(process), launch,
                                                    spec.stdin_data.value_or(std::string{}), spec.stdout_max_bytes,
                                                    run_kind::foreground, deadline);
  const std::unique_ptr<egress_session> egress = builder.open_egress(launch);
  drive_until_settled(child, spec.stop, spec.progress.get());

  run_result result;
  result.exit_code = child.exit().exit_code;
  result.signal = child.exit().signal;
  result.timed_out = child.cause() == stop_cause::timed_out;
  result.aborted = child.cause() == stop_cause::aborted;
  result.leftovers_killed = child.cause() == stop_cause::leftovers;
  result.timeout = spec.timeout;
  result.out = child.out().finish();
  result.err = child.err().finish();
  if (egress) result.network = builder.close_egress(*egress);
  result.sandbox = launch.info;
  result.containment = launch.containment;
  const verdict v = classify(confinement, launch.confined, child.exit(), result.err.text, result.out.text);
  if (v.runner_failure) throw runner_unavailable(confinement_name, *launch.info, *v.runner_failure);
  if (v.denied) result.sandbox->denied = true;
  if (v.command_exit) {
    result.exit_code = v.command_exit->exit_code;
    result.signal = v.command_exit->signal;
  }
  if (launch.state_file) take_state(result, launch.state_file.get(), config);
  return result;
}

/// The functional probe a confinement chain selects with (contract 15): a
/// run of `true` under a read-only profile of one candidate. Holds only the
/// launch builder: selection never calls back into the executor. Failures
/// throw with their reason, which the chain keeps for the
/// sandbox_unavailable message ("apt-get install bubblewrap", ...).
template <class Spawn, class Collector>
struct functional_probe {
  const Spawn& spawner;
  const launch_builder& builder;
  std::chrono::milliseconds timeout;
  /// The executor's confinement policy, named by a runner failure.
  std::string_view confinement_name;

  template <class Candidate>
  bool operator()(const Candidate& candidate) const {
    exec_spec spec;
    spec.command = "true";
    spec.workdir = "/";
    spec.timeout = timeout;
    spec.stdout_max_bytes = 4096;
    spec.mode = sandbox_mode::read_only;
    auto result = run_foreground<Collector>(spawner, spec, builder.build(spec, candidate, sandbox_mode::read_only),
                                            candidate, confinement_name, builder);
    if (result.timed_out)
      throw infrastructure_error(fmt::format("the probe did not finish within {} ms", spec.timeout.count()));
    if (result.exit_code != 0)
      throw infrastructure_error(fmt::format("the probe `true` failed: {}", first_line(result.err.text)));
    return true;
  }
};

}  // namespace bashexec::detail

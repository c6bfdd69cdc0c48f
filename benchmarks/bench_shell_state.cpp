// bench_shell_state: carried shell state (issue 42's targets), each paired
// with its floor in the same run:
//   shell_state/carried,20ms_apart  a `bash` tool call (`true`) of a
//                           session that carries its directory and 20
//                           exported variables, against the same call of a
//                           session that carries nothing, spaced 20 ms
//                           (ratio <= 1.05); a command that cannot change
//                           the state is not captured (carried_state.hpp);
//   shell_state/captured,20ms_apart  the same with a command that may
//                           change the state (`export STEP=1`), so that
//                           the shell writes its state at exit (no target:
//                           the cost of bash's own `export -p`);
//   shell_state/replay/10000  opening a session log of 10,000 shell-state
//                           events as record_shell_state stores them (what
//                           changed: a cd a call, an export every tenth)
//                           and reading its state (<= 50 ms);
//   shell_state/replay/10000,whole  the same log stored as whole states (no
//                           target: a log written before lines held changes).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>

#include <bashexec/local_executor.hpp>
#include <bashexec/tools/bash_tools.hpp>

#include "bench_common.hpp"

namespace bench {
namespace {

using namespace std::chrono_literals;

/// 20 exports and a `cd`, as an activated virtual environment leaves them.
bashexec::shell_state_event twenty_variables(const std::filesystem::path& cwd) {
  bashexec::shell_state_event state;
  state.cwd = cwd.string();
  for (int i = 0; i < 20; ++i)
    state.env.emplace(fmt::format("CARRIED_{:02}", i), fmt::format("/opt/venv/lib/python3/site-packages/{}", i));
  return state;
}

void carried_case(benchmark::State& state, const char* command) {
  paired_totals totals;
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / fmt::format("bashexec-bench-state-{}", ::getpid());
  try {
    std::filesystem::create_directories(root / "sub");
    bashexec::local_executor executor;
    bashexec::bash_tools<bashexec::local_executor> fresh(executor);
    bashexec::bash_tools<bashexec::local_executor> carrying(executor, {}, {.cwd = true, .env = true});
    bashexec::session_log fresh_log, carried_log;
    record_shell_state(carried_log, twenty_variables(std::filesystem::canonical(root / "sub")));
    auto context = [&](bashexec::session_log& log) {
      bashexec::call_context c;
      c.session = bashexec::owner_token("bench");
      c.cwd = root;
      c.log = c.grant_log = &log;
      return c;
    };
    const nlohmann::json args{{"command", command}, {"description", "bench"}};
    auto call = [&](auto& tools, bashexec::session_log& log) {
      std::this_thread::sleep_for(20ms);  // an idle executor, as agents call it
      const auto start = clock::now();
      auto result = tools.call("bash", args, context(log));
      const double elapsed = seconds_since(start);
      if (result.is_error) throw std::runtime_error(result.text);
      return elapsed;
    };
    call(fresh, fresh_log);
    call(carrying, carried_log);
    run_paired(state, [&] { return call(fresh, fresh_log); }, [&] { return call(carrying, carried_log); }, totals);
    if (bashexec::current_shell_state(carried_log).env.size() < 20)
      throw std::runtime_error("the carried state was lost");
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  if (totals.pairs) report_latency(state, totals);
}

/// Writes a log of 10,000 calls of a session carrying 20 variables, each
/// call a `cd` and every tenth an export too: through record_shell_state (a
/// file on tmpfs where there is one, so its fsyncs cost nothing) when
/// `as_recorded`, else as whole states (every line all 20 variables: how
/// the log was stored before it held changes, and still reads).
void write_replay_log(const std::filesystem::path& file, bool as_recorded) {
  auto step = [](int i) {
    auto event = twenty_variables(fmt::format("/work/project/sub/{}", i));
    event.env["STEP"] = std::to_string(i / 10);
    return event;
  };
  if (as_recorded) {
    bashexec::session_log log(file);
    for (int i = 0; i < 10000; ++i) record_shell_state(log, step(i));
    return;
  }
  std::ofstream out(file);
  for (int i = 0; i < 10000; ++i) out << bashexec::event_to_json(step(i)).dump() << '\n';
}

void replay_case(benchmark::State& state, bool as_recorded) {
  const std::filesystem::path dir = std::filesystem::exists("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                                        : std::filesystem::temp_directory_path();
  const std::filesystem::path file = dir / fmt::format("bashexec-bench-replay-{}.jsonl", ::getpid());
  double worst_ms = 0;
  try {
    std::filesystem::remove(file);
    write_replay_log(file, as_recorded);
    state.counters["log_mb"] = static_cast<double>(std::filesystem::file_size(file)) / 1e6;
    for (auto _ : state) {
      const auto start = clock::now();
      bashexec::session_log log(file);
      const auto carried = bashexec::current_shell_state(log);
      const double elapsed = seconds_since(start);
      if (carried.cwd != "/work/project/sub/9999" || carried.env.size() != 21)
        throw std::runtime_error("the replay lost the last state");
      state.SetIterationTime(elapsed);
      worst_ms = std::max(worst_ms, elapsed * 1000);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  std::error_code ec;
  std::filesystem::remove(file, ec);
  state.counters["worst_ms"] = worst_ms;
}

}  // namespace

void register_shell_state() {
  benchmark::RegisterBenchmark("shell_state/carried,20ms_apart", carried_case, "true")
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(40);
  benchmark::RegisterBenchmark("shell_state/captured,20ms_apart", carried_case, "export STEP=1")
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(40);
  benchmark::RegisterBenchmark("shell_state/replay/10000", replay_case, true)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(10);
  benchmark::RegisterBenchmark("shell_state/replay/10000,whole", replay_case, false)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(10);
}

}  // namespace bench

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
//                           events and reading its state (<= 50 ms).
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

void replay_case(benchmark::State& state) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / fmt::format("bashexec-bench-replay-{}.jsonl", ::getpid());
  double worst_ms = 0;
  try {
    {
      std::ofstream out(file);
      for (int i = 0; i < 10000; ++i) {
        auto event = twenty_variables(fmt::format("/work/project/sub/{}", i));
        out << bashexec::event_to_json(event).dump() << '\n';
      }
    }
    for (auto _ : state) {
      const auto start = clock::now();
      bashexec::session_log log(file);
      const auto carried = bashexec::current_shell_state(log);
      const double elapsed = seconds_since(start);
      if (carried.cwd != "/work/project/sub/9999") throw std::runtime_error("the replay lost the last state");
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
  benchmark::RegisterBenchmark("shell_state/replay/10000", replay_case)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(10);
}

}  // namespace bench

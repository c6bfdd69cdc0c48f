// bench_main: entry point of bashexec_bench. Besides Google Benchmark's own
// flags it has two helper modes used by the benchmarks themselves:
//   --produce NAME AMOUNT   write a benchmark byte stream to stdout;
//   --measure WHAT ...      a memory measurement in a fresh process.
// After the run it prints a summary table: the median over repetitions of
// each case's ratio to its floor, next to the targets.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/resource.h>

#include <fmt/format.h>

#include "bench_common.hpp"

namespace bench {
void register_collect();
void register_spawn();
void register_memory();
void register_prespawn();
void register_terminal();
void register_shell_state();
int measure(int argc, char** argv);
}  // namespace bench

namespace {

/// A headline target: the counter, the bound and its direction.
struct target {
  const char* counter;
  double bound;
  bool at_most;  // true: value must be <= bound; false: >= bound
};

const std::multimap<std::string, target>& targets() {
  static const std::multimap<std::string, target> t = {
      {"spawn/true/posix_spawn", {"ratio", 1.10, true}},
      {"spawn/true/fork_exec:automatic_vs_process_group", {"ratio", 1.05, true}},
      {"spawn/true/landlock:read-only", {"ratio_local", 1.10, true}},
      {"spawn/true/landlock:workspace-write", {"ratio_local", 1.10, true}},
      // Issue 14: a warm pool against the unconfined cold floor.
      {"spawn/true/prespawned", {"ratio", 0.70, true}},
      {"spawn/true/prespawned+landlock:read-only", {"ratio", 0.80, true}},
      {"spawn/true/prespawned+bwrap:read-only", {"ratio", 1.00, true}},
      {"collect/zeros/exec:tail_spill", {"ratio", 0.80, false}},
      {"memory/foreground/tail_spill", {"growth_MiB_1GiB", 8.0, true}},
      {"background/tasks/1000", {"KiB_per_task", 64.0, true}},
      {"background/tasks/1000", {"ratio", 1.5, true}},
      // Issue 41: terminals, input and input waits.
      {"terminal/zeros", {"ratio", 0.80, false}},
      {"terminal/true,20ms_apart", {"ratio", 1.15, true}},
      {"terminal/round_trip", {"ratio", 1.20, true}},
      {"terminal/input_wait", {"p99_ms", 500.0, true}},
      {"terminal/idle/100", {"core_percent", 1.0, true}},
      // Issue 42: carried shell state.
      {"shell_state/carried,20ms_apart", {"ratio", 1.05, true}},
      {"shell_state/replay/10000", {"worst_ms", 50.0, true}},
  };
  return t;
}

/// The console reporter plus a closing summary of medians.
class summary_reporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;

  void ReportRuns(const std::vector<Run>& reports) override {
    ConsoleReporter::ReportRuns(reports);
    for (const auto& run : reports) {
      order(name(run), run.family_index);
      if (run.error_occurred) {
        errors_[name(run)] = run.error_message;
        continue;
      }
      if (run.run_type == Run::RT_Aggregate) {
        if (run.aggregate_name == "median") medians_[name(run)] = run.counters;
        continue;
      }
      for (const auto& [key, counter] : run.counters) samples_[name(run)][key].push_back(counter.value);
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    auto& out = GetOutputStream();
    out << "\nSummary (median over repetitions; ratio: spawn = time / floor, lower is better; collect = "
           "throughput / floor, higher is better)\n";
    out << fmt::format("{:<42} {:>8} {:>8} {:>8}  {}\n", "case", "ratio", "min", "max", "figures");
    int missed = 0;
    // Registration order (repetitions ran randomly interleaved).
    std::sort(order_.begin(), order_.end());
    for (const auto& [family, name] : order_) {
      if (auto e = errors_.find(name); e != errors_.end()) {
        out << fmt::format("{:<42} skipped: {}\n", name, e->second);
        continue;
      }
      auto value = [&](const std::string& key) -> std::optional<double> {
        if (auto m = medians_.find(name); m != medians_.end()) {
          if (auto c = m->second.find(key); c != m->second.end()) return c->second.value;
        }
        auto s = samples_.find(name);
        if (s == samples_.end()) return std::nullopt;
        auto c = s->second.find(key);
        if (c == s->second.end() || c->second.empty()) return std::nullopt;
        auto v = c->second;
        std::sort(v.begin(), v.end());
        const std::size_t mid = v.size() / 2;
        return v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
      };
      auto spread = [&](const std::string& key, bool max) -> std::string {
        auto s = samples_.find(name);
        if (s == samples_.end() || !s->second.count(key)) return "";
        const auto& v = s->second.at(key);
        return fmt::format("{:.3f}", max ? *std::max_element(v.begin(), v.end()) : *std::min_element(v.begin(), v.end()));
      };
      std::string figures;
      for (const char* key : {"us", "floor_us", "local_us", "process_group_us", "ratio_local", "host_rss_MiB", "MBps", "floor_MBps", "wall_ms",
                              "floor_ms", "KiB_per_task", "KiB_per_task_settled", "growth_MiB_64MiB",
                              "growth_MiB_1GiB"})
        if (auto v = value(key)) figures += fmt::format("{}={:.{}f} ", key, *v, *v < 10 ? 3 : 1);
      auto ratio = value("ratio");
      out << fmt::format("{:<42} {:>8} {:>8} {:>8}  {}\n", name, ratio ? fmt::format("{:.3f}", *ratio) : "-",
                         spread("ratio", false), spread("ratio", true), figures);
      auto [lo, hi] = targets().equal_range(name);
      for (auto it = lo; it != hi; ++it) {
        const auto& t = it->second;
        auto v = value(t.counter);
        if (!v) continue;
        const bool met = t.at_most ? *v <= t.bound : *v >= t.bound;
        missed += !met;
        out << fmt::format("    target {} {} {:.2f}: {:.3f} {}\n", t.counter, t.at_most ? "<=" : ">=", t.bound, *v,
                           met ? "MET" : "MISSED");
      }
    }
    out << fmt::format("\n{} target(s) missed, {} case(s) failed\n", missed, errors_.size());
  }

  bool any_failed() const { return !errors_.empty(); }

 private:
  static std::string name(const Run& run) {
    return run.run_name.args.empty() ? run.run_name.function_name
                                     : run.run_name.function_name + "/" + run.run_name.args;
  }
  void order(const std::string& name, std::int64_t family) {
    const std::pair<std::int64_t, std::string> key{family, name};
    if (std::find(order_.begin(), order_.end(), key) == order_.end()) order_.push_back(key);
  }

  std::vector<std::pair<std::int64_t, std::string>> order_;
  std::map<std::string, std::string> errors_;
  std::map<std::string, benchmark::UserCounters> medians_;
  std::map<std::string, std::map<std::string, std::vector<double>>> samples_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--produce") return bench::produce(argc, argv);
  if (argc > 1 && std::string_view(argv[1]) == "--measure") return bench::measure(argc, argv);

  // 1,000 concurrent tasks hold three descriptors each.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  bench::register_collect();
  bench::register_spawn();
  bench::register_memory();
  bench::register_terminal();
#ifndef BASHEXEC_BENCH_WITHOUT_PRESPAWN  // the smoke build (benchmarks/bench_target.cmake)
  bench::register_prespawn();
  bench::register_shell_state();
#endif
  summary_reporter reporter(benchmark::ConsoleReporter::OO_Tabular);
  const std::size_t ran = benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return ran == 0 || reporter.any_failed() ? 1 : 0;  // a missed target is a finding, a failed case is a bug
}

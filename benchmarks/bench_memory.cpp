// bench_memory: resident memory and many-task scaling.
//   memory/foreground: peak RSS growth while one foreground run collects
//     64 MiB and 1 GiB with the default policy (must be flat in output size);
//   background/1000_tasks: 1,000 concurrent `sleep 0.2; echo done` tasks
//     started, awaited, read — wall time as a ratio to raw posix_spawn +
//     waitpid of the same commands, and executor memory per task.
// Memory is measured in a fresh process (this binary with --measure) so the
// heap left over by other benchmarks cannot hide or inflate the growth.
#include <cstdio>
#include <sstream>

#include <bashexec/basic_executor.hpp>
#include <bashexec/local_executor.hpp>

#include <fmt/format.h>

#include "bench_common.hpp"

namespace bench {
namespace {

constexpr const char* task_command = "sleep 0.2; echo done";

/// `--measure foreground BYTES`: peak RSS growth of one run collecting BYTES.
int measure_foreground(std::uint64_t bytes) {
  const std::uint64_t base = rss_bytes();
  if (!reset_peak_rss()) return 3;
  std::uint64_t total = 0;
  {
    bashexec::executor_config config;
    config.spill_parent = scratch_dir();
    bashexec::local_executor executor(config);
    bashexec::exec_request request;
    request.command = fmt::format("exec {} --produce zeros {}", self_path(), bytes);
    auto result = executor.run(executor.resolve(std::move(request)));
    if (result.exit_code != 0 || !result.out.spill_path) return 4;
    total = std::filesystem::file_size(*result.out.spill_path);
  }
  const std::uint64_t peak = peak_rss_bytes();
  std::printf("growth=%llu collected=%llu\n", static_cast<unsigned long long>(peak - base),
              static_cast<unsigned long long>(total));
  return total == bytes ? 0 : 5;
}

double raw_tasks(int n) {
  const auto start = clock::now();
  std::vector<std::pair<pid_t, int>> children;
  children.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) fail("pipe2");
    children.emplace_back(raw_spawn(task_command, fds[1]), fds[0]);
    ::close(fds[1]);
  }
  std::size_t ok = 0;
  for (auto [pid, fd] : children) {
    raw_wait(pid);
    char buf[64];
    ssize_t got = ::read(fd, buf, sizeof buf);
    ok += got == 5 && std::string_view(buf, 5) == "done\n";
    ::close(fd);
  }
  const double elapsed = seconds_since(start);
  if (ok != children.size()) throw std::runtime_error("raw tasks: output missing");
  return elapsed;
}

struct executor_tasks_outcome {
  double seconds = 0;
  std::uint64_t peak_growth = 0;
  std::uint64_t settled_growth = 0;
  std::uint64_t held = 0;
};

executor_tasks_outcome executor_tasks(int n) {
  executor_tasks_outcome out;
  const std::uint64_t base = rss_bytes();
  reset_peak_rss();
  {
    bashexec::local_executor executor;
    const auto start = clock::now();
    std::vector<bashexec::task_id> ids;
    ids.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      bashexec::exec_request request;
      request.command = task_command;
      ids.push_back(executor.start(executor.resolve(std::move(request))));
    }
    std::size_t ok = 0;
    for (const auto& id : ids) {
      executor.wait(id);
      auto read = executor.read_output(id);
      out.held += read.delta.size();
      ok += read.delta == "done\n";
    }
    out.seconds = seconds_since(start);
    out.settled_growth = rss_bytes() - base;
    out.peak_growth = peak_rss_bytes() - base;
    if (ok != ids.size()) throw std::runtime_error(fmt::format("executor tasks: {} of {} outputs right", ok, n));
  }
  return out;
}

/// `--measure background N ORDER`: ORDER is `floor-first` or `executor-first`.
int measure_background(int n, std::string_view order) {
  double floor_s = 0;
  if (order == "floor-first") floor_s = raw_tasks(n);
  auto e = executor_tasks(n);
  if (order != "floor-first") floor_s = raw_tasks(n);
  std::printf("executor_s=%f floor_s=%f peak_growth=%llu settled_growth=%llu held=%llu\n", e.seconds, floor_s,
              static_cast<unsigned long long>(e.peak_growth), static_cast<unsigned long long>(e.settled_growth),
              static_cast<unsigned long long>(e.held));
  return 0;
}

/// Runs this binary with `args` and parses its `key=value` line.
std::map<std::string, double> measure_in_child(const std::string& args) {
  const std::string command = fmt::format("{} --measure {}", self_path(), args);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) fail("popen");
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) text += buf;
  const int status = ::pclose(pipe);
  if (status != 0) throw std::runtime_error(fmt::format("{} failed ({}): {}", command, status, text));
  std::map<std::string, double> values;
  std::istringstream in(text);
  std::string word;
  while (in >> word)
    if (auto eq = word.find('='); eq != std::string::npos) values[word.substr(0, eq)] = std::stod(word.substr(eq + 1));
  return values;
}

void foreground_memory(benchmark::State& state) {
  const std::uint64_t big = stream_bytes(stream::zeros), small = big / 16;
  double small_growth = 0, big_growth = 0;
  try {
    for (auto _ : state) {
      const auto start = clock::now();
      small_growth = measure_in_child(fmt::format("foreground {}", small)).at("growth");
      big_growth = measure_in_child(fmt::format("foreground {}", big)).at("growth");
      state.SetIterationTime(seconds_since(start));
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.counters["growth_MiB_1GiB"] = big_growth / (1 << 20);
  state.counters["growth_MiB_64MiB"] = small_growth / (1 << 20);
}

void background_tasks(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  static unsigned flip = 0;
  double executor_s = 0, floor_s = 0, per_task = 0, per_task_settled = 0;
  try {
    for (auto _ : state) {
      auto v = measure_in_child(fmt::format("background {} {}", n, ++flip % 2 ? "floor-first" : "executor-first"));
      executor_s += v.at("executor_s");
      floor_s += v.at("floor_s");
      per_task = (v.at("peak_growth") - v.at("held")) / n;
      per_task_settled = (v.at("settled_growth") - v.at("held")) / n;
      state.SetIterationTime(v.at("executor_s"));
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double runs = static_cast<double>(state.iterations());
  state.counters["wall_ms"] = executor_s / runs * 1e3;
  state.counters["floor_ms"] = floor_s / runs * 1e3;
  state.counters["ratio"] = executor_s / floor_s;
  state.counters["KiB_per_task"] = per_task / 1024;
  state.counters["KiB_per_task_settled"] = per_task_settled / 1024;
}

}  // namespace

int measure(int argc, char** argv) {
  try {
    const std::string_view what = argc > 2 ? argv[2] : "";
    if (what == "foreground" && argc > 3) return measure_foreground(std::strtoull(argv[3], nullptr, 10));
    if (what == "background" && argc > 4) return measure_background(std::atoi(argv[3]), argv[4]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 2;
}

void register_memory() {
  benchmark::RegisterBenchmark("memory/foreground/tail_spill", foreground_memory)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(1);
  benchmark::RegisterBenchmark("background/tasks", background_tasks)
      ->Arg(1000)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(1);
}

}  // namespace bench

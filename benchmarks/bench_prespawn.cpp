// bench_prespawn: the prespawned pool under load and at rest (issue 14).
//
// `prespawn/burst200/pool:N`: one iteration is three bursts of 200
// back-to-back calls — the raw floor (posix_spawn of `bash -c true` +
// waitpid), the cold executor (fork_exec) and the pooled executor
// (spawn_with<prespawned>, per_key = N, full at the start of its burst) —
// in rotating order. The pool drains faster than it refills, so its burst
// shows refill throughput; `warm_share` is the share of its calls a waiting
// process served. Counters: p50/p99 per call of each burst (µs) and their
// ratios to the floor's.
//
// `prespawn/idle_memory/64`: what 64 waiting processes cost at rest, per
// process — the difference between a full pool and the same moment after
// the executor's end: the host's resident memory (their stacks' touched
// pages: they share the host's memory until their exec), and the kernel's
// own (kernel stacks, slab, page tables) from /proc/meminfo — machine-wide
// figures, so noisy on a busy machine; read the median.
#include <bashexec/basic_executor.hpp>
#include <bashexec/spawn/fork_exec.hpp>
#include <bashexec/spawn/prespawned.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench_common.hpp"

namespace bench {
namespace {

using namespace std::chrono_literals;

constexpr int burst_calls = 200;

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const auto at = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(at, values.size() - 1)];
}

template <class Executor>
std::vector<double> executor_burst(Executor& executor, const bashexec::exec_spec& spec) {
  std::vector<double> took;
  took.reserve(burst_calls);
  for (int i = 0; i < burst_calls; ++i) {
    const auto start = clock::now();
    const auto result = executor.run(spec);
    took.push_back(seconds_since(start));
    if (result.exit_code != 0) throw std::runtime_error("run(\"true\") failed in a burst");
  }
  return took;
}

std::vector<double> floor_burst() {
  std::vector<double> took;
  took.reserve(burst_calls);
  for (int i = 0; i < burst_calls; ++i) {
    const auto start = clock::now();
    const int status = raw_wait(raw_spawn("true", -1));
    took.push_back(seconds_since(start));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("raw bash -c true failed");
  }
  return took;
}

bashexec::exec_spec true_spec_of(auto& executor) {
  bashexec::exec_request request;
  request.command = "true";
  return executor.resolve(std::move(request));
}

void burst_case(benchmark::State& state, std::size_t pool_size) {
  using namespace bashexec;
  std::array<std::vector<double>, 3> all;  // floor, cold, pooled
  double warm_share = 0;
  try {
    executor_config config;
    config.prespawn.per_key = pool_size;
    basic_executor<policies<spawn_with<fork_exec>>> cold;
    basic_executor<policies<spawn_with<prespawned>>> pooled(config);
    const auto cold_spec = true_spec_of(cold);
    const auto pooled_spec = true_spec_of(pooled);
    pooled.run(pooled_spec);  // makes the key known
    cold.run(cold_spec);
    unsigned rotation = 0;
    for (auto _ : state) {
      const auto before = pooled.spawner().stats();
      double pooled_seconds = 0;
      const std::size_t first = rotation++ % 3;
      for (std::size_t k = 0; k < 3; ++k) {
        const std::size_t which = (first + k) % 3;
        std::vector<double> took = which == 0   ? floor_burst()
                                   : which == 1 ? executor_burst(cold, cold_spec)
                                                : [&] {
                                                    // Start full: the burst's first call finds N waiting.
                                                    if (!pooled.spawner().wait_until_warm(30s))
                                                      throw std::runtime_error("the pool did not fill in 30 s");
                                                    return executor_burst(pooled, pooled_spec);
                                                  }();
        if (which == 2)
          for (double t : took) pooled_seconds += t;
        all[which].insert(all[which].end(), took.begin(), took.end());
      }
      const auto after = pooled.spawner().stats();
      warm_share += static_cast<double>(after.warm - before.warm) / burst_calls;
      state.SetIterationTime(pooled_seconds);
    }
    warm_share /= static_cast<double>(state.iterations());
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double floor_p50 = percentile(all[0], 0.5), floor_p99 = percentile(all[0], 0.99);
  state.counters["floor_p50_us"] = floor_p50 * 1e6;
  state.counters["floor_p99_us"] = floor_p99 * 1e6;
  state.counters["cold_p50_us"] = percentile(all[1], 0.5) * 1e6;
  state.counters["cold_p99_us"] = percentile(all[1], 0.99) * 1e6;
  state.counters["p50_us"] = percentile(all[2], 0.5) * 1e6;
  state.counters["p99_us"] = percentile(all[2], 0.99) * 1e6;
  state.counters["ratio"] = percentile(all[2], 0.5) / floor_p50;
  state.counters["ratio_p99"] = percentile(all[2], 0.99) / floor_p99;
  state.counters["ratio_cold"] = percentile(all[1], 0.5) / floor_p50;
  state.counters["warm_share"] = warm_share;
}

/// /proc/meminfo's `field`, in KiB.
double meminfo_kib(const std::string& field) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  double value = 0;
  std::string unit;
  while (in >> name >> value) {
    std::getline(in, unit);
    if (name == field + ":") return value;
  }
  return 0;
}

struct kernel_memory {
  double stacks, slab, page_tables, rss;
  static kernel_memory now() {
    return {meminfo_kib("KernelStack"), meminfo_kib("Slab"), meminfo_kib("PageTables"),
            static_cast<double>(rss_bytes()) / 1024};
  }
};

void idle_memory_case(benchmark::State& state) {
  using namespace bashexec;
  constexpr std::size_t count = 64;
  std::vector<double> stacks, slab, tables, rss;
  try {
    for (auto _ : state) {
      kernel_memory full{};
      {
        executor_config config;
        config.prespawn.per_key = count;
        basic_executor<policies<spawn_with<prespawned>>> pooled(config);
        bashexec::exec_request request;
        request.command = "true";
        pooled.run(pooled.resolve(std::move(request)));  // makes the key known; the pool fills after it
        if (!pooled.spawner().wait_until_warm(60s)) throw std::runtime_error("the pool did not fill in 60 s");
        std::this_thread::sleep_for(100ms);
        full = kernel_memory::now();
      }  // the executor's end: every waiting process killed and reaped
      std::this_thread::sleep_for(100ms);
      const auto empty = kernel_memory::now();
      // The difference also holds the executor's own threads (three kernel
      // stacks, shared by the 64): under 1 KiB per process.
      stacks.push_back((full.stacks - empty.stacks) / count);
      slab.push_back((full.slab - empty.slab) / count);
      tables.push_back((full.page_tables - empty.page_tables) / count);
      rss.push_back((full.rss - empty.rss) / count);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  auto median = [](std::vector<double> v) { return percentile(std::move(v), 0.5); };
  state.counters["kernel_stack_KiB"] = median(stacks);
  state.counters["slab_KiB"] = median(slab);
  state.counters["page_tables_KiB"] = median(tables);
  state.counters["host_rss_KiB"] = median(rss);
  state.counters["KiB_per_process"] = median(stacks) + median(slab) + median(tables) + median(rss);
}

}  // namespace

void register_prespawn() {
  for (std::size_t pool_size : {1, 4, 16})
    benchmark::RegisterBenchmark(fmt::format("prespawn/burst200/pool:{}", pool_size).c_str(), burst_case, pool_size)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(2);
  benchmark::RegisterBenchmark("prespawn/idle_memory/64", idle_memory_case)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(3);
}

}  // namespace bench

// bench_terminal: commands on a terminal of their own (issue 41's targets),
// each paired with its floor in the same run:
//   terminal/zeros          1 GiB through a terminal with tail_spill, against
//                           a raw C loop reading a pty master (ratio:
//                           throughput / floor's, target >= 0.8);
//   terminal/true,20ms_apart run("true") on a terminal against the same run
//                           without one, spaced 20 ms (ratio <= 1.15);
//   terminal/round_trip     write a line to a prompt loop and see the echo
//                           and the next prompt through write_input and
//                           read_output, against write/read on a raw pty
//                           (ratio <= 1.2);
//   terminal/input_wait     from an answer to the next input wait reported
//                           (p99 <= 500 ms; the quiet period is part of it);
//   terminal/idle/100       the executor's CPU while it watches 100 quiet,
//                           busy-sleeping terminal tasks (<= 1 % of a core).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include <bashexec/local_executor.hpp>
#include <bashexec/detail/kernel/pseudo_terminal.hpp>

#include "bench_common.hpp"

namespace bench {
namespace {

using namespace std::chrono_literals;

bashexec::exec_request on_terminal(std::string command) {
  bashexec::exec_request request{.command = std::move(command)};
  request.terminal = bashexec::terminal_size{};
  return request;
}

/// /bin/bash -c `command` with the slave as stdin, stdout and stderr.
pid_t spawn_on(const std::string& command, int slave) { return raw_spawn(command, slave, true); }

/// Reads the master until `until` holds of what was read (or EIO).
template <class Pred>
std::string read_master(int master, Pred until) {
  std::string seen;
  char buffer[1 << 16];
  while (!until(seen)) {
    pollfd ready{master, POLLIN, 0};
    if (::poll(&ready, 1, 10000) != 1) throw std::runtime_error("the raw terminal went quiet for 10 s");
    const ssize_t n = ::read(master, buffer, sizeof buffer);
    if (n > 0) {
      seen.append(buffer, static_cast<std::size_t>(std::min<ssize_t>(n, 256)));  // keep little
      if (seen.size() > 4096) seen.erase(0, seen.size() - 256);
    } else if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      continue;
    } else {
      break;
    }
  }
  return seen;
}

/// The floor of terminal/zeros: the producer on a raw pty, its master read
/// by a plain loop into a buffer, to end of file.
double raw_terminal_floor(stream s) {
  auto pty = bashexec::detail::open_pseudo_terminal({});
  const auto start = clock::now();
  const pid_t pid = spawn_on(producer_command(s), pty.slave.get());
  pty.slave.reset();
  std::uint64_t total = 0;
  char buffer[1 << 16];
  for (;;) {
    pollfd ready{pty.master.get(), POLLIN, 0};
    if (::poll(&ready, 1, 10000) != 1) break;
    const ssize_t n = ::read(pty.master.get(), buffer, sizeof buffer);
    if (n > 0) total += static_cast<std::uint64_t>(n);
    else if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    else break;  // EIO: every slave is closed
  }
  raw_wait(pid);
  const double elapsed = seconds_since(start);
  if (total != stream_bytes(s)) throw std::runtime_error(fmt::format("the raw loop read {} bytes", total));
  return elapsed;
}

void zeros_case(benchmark::State& state) {
  paired_totals totals;
  try {
    bashexec::executor_config config;
    config.spill_parent = scratch_dir();
    bashexec::local_executor executor(config);
    const auto spec = executor.resolve(on_terminal(producer_command(stream::zeros)));
    run_paired(state, [] { return raw_terminal_floor(stream::zeros); },
               [&] {
                 const auto start = clock::now();
                 auto result = executor.run(spec);
                 const double elapsed = seconds_since(start);
                 if (result.exit_code != 0 || !result.out.spill_path ||
                     std::filesystem::file_size(*result.out.spill_path) != stream_bytes(stream::zeros))
                   throw std::runtime_error("the terminal run lost bytes");
                 return elapsed;
               },
               totals);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  report_throughput(state, totals, stream_bytes(stream::zeros));
}

void true_case(benchmark::State& state) {
  paired_totals totals;
  try {
    bashexec::local_executor executor;
    const auto plain = executor.resolve({.command = "true"});
    const auto tty = executor.resolve(on_terminal("true"));
    auto run = [&](const bashexec::exec_spec& spec) {
      std::this_thread::sleep_for(20ms);  // an idle executor, as agents call it
      const auto start = clock::now();
      auto result = executor.run(spec);
      const double elapsed = seconds_since(start);
      if (result.exit_code != 0) throw std::runtime_error("true failed");
      return elapsed;
    };
    run(plain);
    run(tty);
    run_paired(state, [&] { return run(plain); }, [&] { return run(tty); }, totals);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  report_latency(state, totals);
}

constexpr const char* prompt_loop = "while read -p '> ' l; do :; done";

void round_trip_case(benchmark::State& state) {
  paired_totals totals;
  try {
    bashexec::local_executor executor;
    const auto id = executor.start(executor.resolve(on_terminal(prompt_loop)));
    if (!executor.wait_for_input(id, 10s)) throw std::runtime_error("the prompt loop never asked");
    executor.read_output(id);
    auto pty = bashexec::detail::open_pseudo_terminal({});
    const pid_t raw = spawn_on(prompt_loop, pty.slave.get());
    pty.slave.reset();
    read_master(pty.master.get(), [](const std::string& s) { return s.find("> ") != std::string::npos; });
    auto ends_with_prompt = [](const std::string& s) { return s.size() >= 2 && s.compare(s.size() - 2, 2, "> ") == 0; };
    run_paired(
        state,
        [&] {
          const auto start = clock::now();
          if (::write(pty.master.get(), "x\n", 2) != 2) fail("write");
          read_master(pty.master.get(), ends_with_prompt);
          return seconds_since(start);
        },
        [&] {
          const auto start = clock::now();
          executor.write_input(id, "x\n");
          std::string seen;
          while (!ends_with_prompt(seen)) {
            seen += executor.read_output(id).delta;
            if (!ends_with_prompt(seen)) std::this_thread::yield();
          }
          return seconds_since(start);
        },
        totals);
    executor.kill(id);
    ::kill(raw, SIGKILL);
    raw_wait(raw);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  report_latency(state, totals);
}

void input_wait_case(benchmark::State& state) {
  std::vector<double> ms;
  try {
    bashexec::local_executor executor;
    const auto id = executor.start(executor.resolve(on_terminal(prompt_loop)));
    if (!executor.wait_for_input(id, 10s)) throw std::runtime_error("the prompt loop never asked");
    for (auto _ : state) {
      const auto start = clock::now();
      executor.write_input(id, "x\n");
      auto facts = executor.wait_for_input(id, 10s);
      const double elapsed = seconds_since(start);
      if (!facts || !facts->input_wait) throw std::runtime_error("no input wait within 10 s");
      state.SetIterationTime(elapsed);
      ms.push_back(elapsed * 1000);
    }
    executor.kill(id);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  std::sort(ms.begin(), ms.end());
  state.counters["p50_ms"] = ms[ms.size() / 2];
  state.counters["p99_ms"] = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
}

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

void idle_case(benchmark::State& state) {
  double share = 0;
  try {
    bashexec::local_executor executor;
    std::vector<bashexec::task_id> ids;
    for (int i = 0; i < 100; ++i) ids.push_back(executor.start(executor.resolve(on_terminal("sleep 120"))));
    std::this_thread::sleep_for(2s);  // past the first looks and the back-off
    for (auto _ : state) {
      const double cpu = cpu_seconds();
      const auto start = clock::now();
      std::this_thread::sleep_for(5s);
      const double wall = seconds_since(start);
      share = (cpu_seconds() - cpu) / wall * 100;
      state.SetIterationTime(wall);
    }
    for (const auto& id : ids) executor.kill(id);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.counters["core_percent"] = share;
}

}  // namespace

void register_terminal() {
  benchmark::RegisterBenchmark("terminal/zeros", zeros_case)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
  benchmark::RegisterBenchmark("terminal/true,20ms_apart", true_case)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(40);
  benchmark::RegisterBenchmark("terminal/round_trip", round_trip_case)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(200);
  benchmark::RegisterBenchmark("terminal/input_wait", input_wait_case)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(100);
  benchmark::RegisterBenchmark("terminal/idle/100", idle_case)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
}

}  // namespace bench

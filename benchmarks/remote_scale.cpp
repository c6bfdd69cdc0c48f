// remote_scale: one harness, many sessions, many "pods" (issue 30's scale
// test, simulated on one machine). benchmarks/remote_scale.sh starts a
// `bashexec mcp --http ... --executor-api` server in each of N network
// namespaces and runs this program against them; it measures, in one run:
//
//   1. in-process: SESSIONS threads sharing one sandbox_executor, each making
//      CALLS back-to-back run("true"), then BIG_SESSIONS of them one 10 MiB
//      output each;
//   2. remote: the same threads, each with a remote_executor of its own on
//      pod (i mod N), the same calls; and in both, SPACED_CALLS calls per
//      session SPACED_MS apart, the way agents call;
//   3. the ratios remote/in-process of calls per second and of p50/p99;
//   4. with --kill-pid: every session starts a run of `sleep`, the pod's
//      server is SIGKILLed a second later; its sessions must fail with
//      infrastructure_error (time to failure reported, bounded by the
//      client's reconnect_timeout), every other session's run must finish
//      normally.
// Exit status 0 when the kill phase (if any) held, 1 otherwise; the figures
// go to stdout as a table and, with --json FILE, as JSON. Leftover
// processes on the surviving pods are the script's to check (it knows the
// servers).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <bashexec/remote_executor.hpp>
#include <bashexec/sandbox_executor.hpp>

namespace {

using clock_type = std::chrono::steady_clock;

struct options {
  std::vector<std::string> pods;
  std::string token;
  int sessions = 200;
  int calls = 20;
  int big_sessions = 8;
  int spaced_calls = 5;
  int spaced_ms = 2000;
  std::size_t big_bytes = std::size_t{10} << 20;
  std::optional<pid_t> kill_pid;
  int kill_pod = 0;
  std::string json_out;
};

struct phase {
  std::string name;
  std::vector<double> latencies_ms;
  double seconds = 0;
  int failures = 0;

  double percentile(double p) const {
    if (latencies_ms.empty()) return 0;
    auto sorted = latencies_ms;
    std::sort(sorted.begin(), sorted.end());
    const auto at = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
    return sorted[std::min(at, sorted.size() - 1)];
  }
  double per_second() const { return seconds > 0 ? static_cast<double>(latencies_ms.size()) / seconds : 0; }
};

/// Runs `work(session, record)` on one thread per session, all released at
/// once; `record` adds one call's latency.
template <class Work>
phase measure(std::string name, int sessions, Work work) {
  phase result{std::move(name), {}, 0, 0};
  std::mutex mutex;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int s = 0; s < sessions; ++s)
    threads.emplace_back([&, s] {
      std::vector<double> mine;
      int failed = 0;
      ++ready;
      while (!go) std::this_thread::yield();
      try {
        work(s, [&](double ms) { mine.push_back(ms); });
      } catch (const std::exception& e) {
        ++failed;
        std::fprintf(stderr, "session %d: %s\n", s, e.what());
      }
      std::lock_guard lock(mutex);
      result.latencies_ms.insert(result.latencies_ms.end(), mine.begin(), mine.end());
      result.failures += failed;
    });
  while (ready < sessions) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto start = clock_type::now();
  go = true;
  for (auto& t : threads) t.join();
  result.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return result;
}

template <class Executor>
void timed_run(Executor& executor, const std::string& command, const std::function<void(double)>& record) {
  const auto start = clock_type::now();
  const auto result = executor.run(executor.resolve({.command = command}));
  if (result.exit_code != 0) throw std::runtime_error(fmt::format("{} exited {}", command, result.exit_code.value_or(-1)));
  record(std::chrono::duration<double, std::milli>(clock_type::now() - start).count());
}

/// SPACED_CALLS calls of `command` per session, SPACED_MS apart, each
/// session's first at its own offset within the first interval: calls the
/// way agents make them, not back to back.
template <class Executor>
void spaced_runs(Executor& executor, const options& o, int session, const std::function<void(double)>& record) {
  const auto offset = std::chrono::milliseconds(o.spaced_ms * session / std::max(o.sessions, 1));
  auto next = clock_type::now() + offset;
  for (int c = 0; c < o.spaced_calls; ++c) {
    std::this_thread::sleep_until(next);
    timed_run(executor, "true", record);
    next += std::chrono::milliseconds(o.spaced_ms);
  }
}

bashexec::remote_executor_config client_for(const options& o, int session) {
  bashexec::remote_executor_config config;
  config.url = o.pods[static_cast<std::size_t>(session) % o.pods.size()];
  config.token = o.token;
  config.reconnect_timeout = std::chrono::seconds(2);
  config.error_sink = [](std::string_view) {};
  return config;
}

void print(const phase& p) {
  fmt::print("{:<28} {:>7} calls {:>8.1f} calls/s  p50 {:>8.2f} ms  p99 {:>8.2f} ms  failures {}\n", p.name,
             p.latencies_ms.size(), p.per_second(), p.percentile(0.5), p.percentile(0.99), p.failures);
}

nlohmann::json to_json(const phase& p) {
  return {{"calls", p.latencies_ms.size()}, {"seconds", p.seconds}, {"calls_per_second", p.per_second()},
          {"p50_ms", p.percentile(0.5)},     {"p99_ms", p.percentile(0.99)}, {"failures", p.failures}};
}

int usage() {
  std::fprintf(stderr,
               "usage: remote_scale --pod URL [--pod URL]... --token-file FILE [--sessions N] [--calls N]\n"
               "                    [--big-sessions N] [--big-bytes N] [--spaced-calls N] [--spaced-ms MS]\n"
               "                    [--kill-pid PID --kill-pod K] [--json FILE]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage();
    const std::string value = argv[++i];
    if (flag == "--pod") o.pods.push_back(value);
    else if (flag == "--token-file") std::getline(std::ifstream(value) >> std::ws, o.token);
    else if (flag == "--sessions") o.sessions = std::stoi(value);
    else if (flag == "--calls") o.calls = std::stoi(value);
    else if (flag == "--big-sessions") o.big_sessions = std::stoi(value);
    else if (flag == "--spaced-calls") o.spaced_calls = std::stoi(value);
    else if (flag == "--spaced-ms") o.spaced_ms = std::stoi(value);
    else if (flag == "--big-bytes") o.big_bytes = std::stoull(value);
    else if (flag == "--kill-pid") o.kill_pid = static_cast<pid_t>(std::stol(value));
    else if (flag == "--kill-pod") o.kill_pod = std::stoi(value);
    else if (flag == "--json") o.json_out = value;
    else return usage();
  }
  if (o.pods.empty() || o.token.empty() || o.sessions <= 0) return usage();
  std::signal(SIGPIPE, SIG_IGN);
  const std::string big = fmt::format("head -c {} /dev/zero", o.big_bytes);
  const int big_sessions = std::min(o.big_sessions, o.sessions);
  nlohmann::json report{{"pods", o.pods.size()}, {"sessions", o.sessions}, {"calls", o.calls},
                        {"big_sessions", big_sessions}, {"big_bytes", o.big_bytes}};

  // 1. In-process: one sandbox_executor shared by every session's thread.
  phase local_true, local_big, local_spaced;
  {
    bashexec::sandbox_executor local;
    (void)local.run(local.resolve({.command = "true"}));  // the chain's probe, once
    local_true = measure("in-process run(true)", o.sessions, [&](int, auto record) {
      for (int c = 0; c < o.calls; ++c) timed_run(local, "true", record);
    });
    local_spaced = measure("in-process spaced run(true)", o.sessions, [&](int s, auto record) { spaced_runs(local, o, s, record); });
    local_big = measure(fmt::format("in-process {} MiB output", o.big_bytes >> 20), big_sessions, [&](int, auto record) { timed_run(local, big, record); });
  }

  // 2. Remote: a remote_executor per session, spread over the pods.
  std::vector<std::unique_ptr<bashexec::remote_executor>> remotes(static_cast<std::size_t>(o.sessions));
  const phase opened = measure("remote open session", o.sessions, [&](int s, auto record) {
    const auto start = clock_type::now();
    remotes[static_cast<std::size_t>(s)] = std::make_unique<bashexec::remote_executor>(client_for(o, s));
    record(std::chrono::duration<double, std::milli>(clock_type::now() - start).count());
    (void)remotes[static_cast<std::size_t>(s)]->run(remotes[static_cast<std::size_t>(s)]->resolve({.command = "true"}));
  });
  const phase remote_true = measure("remote run(true)", o.sessions, [&](int s, auto record) {
    for (int c = 0; c < o.calls; ++c) timed_run(*remotes[static_cast<std::size_t>(s)], "true", record);
  });
  const phase remote_spaced = measure("remote spaced run(true)", o.sessions, [&](int s, auto record) {
    spaced_runs(*remotes[static_cast<std::size_t>(s)], o, s, record);
  });
  const phase remote_big = measure(fmt::format("remote {} MiB output", o.big_bytes >> 20), big_sessions, [&](int s, auto record) {
    timed_run(*remotes[static_cast<std::size_t>(s)], big, record);
  });

  for (const phase* p : std::initializer_list<const phase*>{&local_true, &remote_true, &local_spaced, &remote_spaced, &local_big, &remote_big, &opened}) print(*p);
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  const nlohmann::json ratios{
      {"true_calls_per_second", ratio(remote_true.per_second(), local_true.per_second())},
      {"true_p50", ratio(remote_true.percentile(0.5), local_true.percentile(0.5))},
      {"true_p99", ratio(remote_true.percentile(0.99), local_true.percentile(0.99))},
      {"spaced_p50", ratio(remote_spaced.percentile(0.5), local_spaced.percentile(0.5))},
      {"spaced_p99", ratio(remote_spaced.percentile(0.99), local_spaced.percentile(0.99))},
      {"big_p50", ratio(remote_big.percentile(0.5), local_big.percentile(0.5))},
      {"big_p99", ratio(remote_big.percentile(0.99), local_big.percentile(0.99))}};
  fmt::print("ratios remote/in-process: run(true) back to back calls/s {:.2f}, p50 {:.2f}, p99 {:.2f}; spaced p50 {:.2f}, "
             "p99 {:.2f}; big output p50 {:.2f}, p99 {:.2f}\n",
             ratios["true_calls_per_second"].get<double>(), ratios["true_p50"].get<double>(),
             ratios["true_p99"].get<double>(), ratios["spaced_p50"].get<double>(), ratios["spaced_p99"].get<double>(),
             ratios["big_p50"].get<double>(), ratios["big_p99"].get<double>());
  report["in_process"] = {{"true", to_json(local_true)}, {"spaced", to_json(local_spaced)}, {"big", to_json(local_big)}};
  report["remote"] = {{"true", to_json(remote_true)}, {"spaced", to_json(remote_spaced)}, {"big", to_json(remote_big)},
                      {"open", to_json(opened)}};
  report["ratios"] = ratios;
  int status = remote_true.failures + remote_big.failures + remote_spaced.failures + local_true.failures +
                           local_big.failures + local_spaced.failures ==
                       0
                   ? 0
                   : 1;

  // 4. One pod SIGKILLed while every session runs a command.
  if (o.kill_pid) {
    std::atomic<int> killed_failed_clearly{0}, killed_other{0}, survivors_ok{0}, survivors_failed{0};
    std::mutex mutex;
    std::vector<double> time_to_failure_ms;
    const auto kill_at = clock_type::now() + std::chrono::seconds(1);
    std::thread killer([&] {
      std::this_thread::sleep_until(kill_at);
      ::kill(*o.kill_pid, SIGKILL);
    });
    measure("kill phase", o.sessions, [&](int s, auto) {
      auto& remote = *remotes[static_cast<std::size_t>(s)];
      const bool on_killed = static_cast<std::size_t>(s) % o.pods.size() == static_cast<std::size_t>(o.kill_pod);
      try {
        const auto result = remote.run(remote.resolve({.command = "sleep 3 # bx-scale-marker"}));
        if (on_killed) ++killed_other;
        else if (result.exit_code == 0) ++survivors_ok;
        else ++survivors_failed;
      } catch (const bashexec::infrastructure_error& e) {
        const double ms = std::chrono::duration<double, std::milli>(clock_type::now() - kill_at).count();
        if (on_killed && std::string_view(e.what()).find("cannot be reached") != std::string_view::npos) {
          ++killed_failed_clearly;
          std::lock_guard lock(mutex);
          time_to_failure_ms.push_back(ms);
        } else {
          ++(on_killed ? killed_other : survivors_failed);
          std::fprintf(stderr, "session %d: %s\n", s, e.what());
        }
      }
    });
    killer.join();
    int on_killed_pod = 0;
    for (int s = 0; s < o.sessions; ++s)
      on_killed_pod += static_cast<std::size_t>(s) % o.pods.size() == static_cast<std::size_t>(o.kill_pod) ? 1 : 0;
    const double worst = time_to_failure_ms.empty() ? 0 : *std::max_element(time_to_failure_ms.begin(), time_to_failure_ms.end());
    fmt::print("kill phase: {} of {} sessions on the killed pod failed clearly (worst {:.0f} ms after the kill), {} "
               "otherwise; {} of {} other sessions finished normally, {} did not\n",
               killed_failed_clearly.load(), on_killed_pod, worst, killed_other.load(), survivors_ok.load(),
               o.sessions - on_killed_pod, survivors_failed.load());
    report["kill"] = {{"sessions_on_killed_pod", on_killed_pod},
                      {"failed_clearly", killed_failed_clearly.load()},
                      {"failed_otherwise", killed_other.load()},
                      {"worst_time_to_failure_ms", worst},
                      {"survivors_ok", survivors_ok.load()},
                      {"survivors_failed", survivors_failed.load()}};
    if (killed_failed_clearly != on_killed_pod || survivors_failed != 0 || survivors_ok != o.sessions - on_killed_pod)
      status = 1;
  }
  // Disposal: each session closes (the killed pod's at once: it is known gone).
  const auto closing = clock_type::now();
  remotes.clear();
  const double close_seconds = std::chrono::duration<double>(clock_type::now() - closing).count();
  fmt::print("all sessions closed in {:.2f} s\n", close_seconds);
  report["close_seconds"] = close_seconds;
  if (!o.json_out.empty()) std::ofstream(o.json_out) << report.dump(2) << "\n";
  return status;
}

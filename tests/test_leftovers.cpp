// The foreground leftover rule (docs/contract.md "Beyond": no hang on a backgrounded
// grandchild) judged by the kernel's facts: `leftovers_killed` appears only
// when a live member of the group was still there to be killed, never because
// the pipe's end of file raced a member's own exit.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <bashexec/local_executor.hpp>

#include "executor_test_support.hpp"

using namespace bashexec;
using namespace std::chrono_literals;
using test_support::fast_config;

namespace {

/// Busy threads that keep the CPUs contended while they live, so a race
/// between end of file and a process's exit gets every chance to show.
class cpu_hogs {
 public:
  explicit cpu_hogs(int count) {
    for (int i = 0; i < count; ++i)
      threads_.emplace_back([this] {
        volatile std::uint64_t sink = 0;
        while (!stop_.load(std::memory_order_relaxed)) sink = sink + 1;
      });
  }
  cpu_hogs(const cpu_hogs&) = delete;
  cpu_hogs& operator=(const cpu_hogs&) = delete;
  ~cpu_hogs() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace

TEST_CASE("no hang rule: a background subshell that ends by itself gets no leftover marker in 500 runs beside two CPU hogs",
          "[foreground][leftovers]") {
  // The subshell writes `late` and exits; its exit closes the pipe a moment
  // before it becomes a zombie. Seen in that moment, it is exiting, not left over.
  executor_config config = fast_config();
  config.drain_timeout = 20000ms;  // generous: a stalled machine must not cut the subshell short
  local_executor executor(config);
  cpu_hogs hogs(2);

  constexpr int runs = 500;
  constexpr int workers = 50;  // the runs mostly sleep or wait for a CPU: overlap them
  std::atomic<int> next{0};
  std::atomic<int> false_markers{0};
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      while (next.fetch_add(1) < runs) {
        try {
          const auto began = std::chrono::steady_clock::now();
          const run_result result =
              executor.run(executor.resolve({.command = "(sleep 0.3; echo late) & echo early", .timeout = 60s}));
          if (result.leftovers_killed) ++false_markers;
          if (result.leftovers_killed || result.exit_code != 0 || result.out.text != "early\nlate\n") {
            std::lock_guard lock(failures_mutex);
            failures.push_back("leftovers_killed=" + std::to_string(result.leftovers_killed) +
                               " exit=" + std::to_string(result.exit_code.value_or(-1)) + " out=" + result.out.text + " after " +
                               std::to_string(test_support::ms_since(began)) + " ms");
          }
        } catch (const std::exception& e) {
          std::lock_guard lock(failures_mutex);
          failures.push_back(std::string("threw: ") + e.what());
        }
      }
    });
  for (auto& t : threads) t.join();
  std::string first_failures;
  for (std::size_t i = 0; i < std::min<std::size_t>(failures.size(), 5); ++i) first_failures += failures[i] + "\n";
  INFO("failures: " << failures.size() << ", the first ones:\n" << first_failures);
  CHECK(false_markers.load() == 0);
  CHECK(failures.empty());
}

TEST_CASE("no hang rule: a real leftover beside two CPU hogs still gets the marker and is dead when run returns",
          "[foreground][leftovers]") {
  local_executor executor(fast_config());  // drain 300 ms
  cpu_hogs hogs(2);
  for (const char* command : {"sleep 30 & echo $!", "sleep 30 >/dev/null 2>&1 & echo $!"}) {
    CAPTURE(command);
    const run_result result = executor.run(executor.resolve({.command = command, .timeout = 30s}));
    CHECK(result.exit_code == 0);
    CHECK(result.leftovers_killed);
    const long sleeper = test_support::first_pid(result.out.text);
    REQUIRE(sleeper > 1);
    CHECK_FALSE(test_support::pid_alive(sleeper));
  }
}

TEST_CASE("no hang rule: a member still alive without the pipes after the shell exited is a leftover",
          "[foreground][leftovers]") {
  // The pipes reach end of file before the shell exits; the member lives on
  // past the shell's exit without the pipes: that is a leftover, and it dies.
  local_executor executor(fast_config());
  const run_result result = executor.run(executor.resolve(
      {.command = "sleep 30 </dev/null >/dev/null 2>&1 & echo $! >&2; exec >&- 2>&-; sleep 0.1", .timeout = 30s}));
  CHECK(result.exit_code == 0);
  CHECK(result.leftovers_killed);
  const long sleeper = test_support::first_pid(result.err.text);
  REQUIRE(sleeper > 1);
  CHECK_FALSE(test_support::pid_alive(sleeper));
}

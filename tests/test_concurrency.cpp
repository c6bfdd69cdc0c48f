// Every executor member may be called from any thread (basic_executor.hpp):
// eight threads start, read, kill, wait and list at once. Also built with
// -fsanitize=thread as `test_concurrency_tsan` (tests/extra_tests.cmake).
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <bashexec/local_executor.hpp>

#include "executor_test_support.hpp"

using namespace bashexec;
using namespace std::chrono_literals;

TEST_CASE("contract 6/9/10: eight threads starting, reading, killing and waiting at once stay consistent",
          "[background][concurrency][contract-9][contract-10]") {
  local_executor executor(test_support::fast_config());
  std::mutex mutex;
  std::map<std::string, int> done_calls;
  auto sub = executor.on_task_done([&](const task_snapshot& t) {
    std::lock_guard lock(mutex);
    ++done_calls[t.id.value()];
  });

  constexpr int threads = 8;
  constexpr int tasks_per_thread = 6;
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  std::vector<std::vector<task_id>> started(threads);
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 gen(static_cast<unsigned>(t));
      const owner_token me("owner-" + std::to_string(t));
      for (int i = 0; i < tasks_per_thread; ++i) {
        const bool long_running = (i % 3) == 0;
        const std::string command =
            long_running ? "echo start-" + std::to_string(t) + "; sleep 100"
                         : "for i in 1 2 3; do echo line-$i; sleep 0.0$i; done; echo err >&2";
        auto id = executor.start(executor.resolve({.command = command, .owner = me}));
        started[static_cast<std::size_t>(t)].push_back(id);
        if (executor.owner_of(id) != me) ++failures;
        std::string seen;
        for (int r = 0; r < 5; ++r) {
          auto read = executor.read_output(id);
          seen += read.delta;
          (void)executor.list();
          (void)executor.get(id);
          std::this_thread::sleep_for(std::chrono::milliseconds(gen() % 20));
        }
        if (long_running) {
          if (!executor.kill(id)) ++failures;
          auto final_facts = executor.wait(id);
          if (final_facts.status != task_status::killed) ++failures;
        } else {
          auto final_facts = executor.wait(id);
          if (final_facts.status != task_status::completed || final_facts.exit_code != 0) ++failures;
          seen += executor.read_output(id).delta;
          // Incremental reads never repeat: each line appears exactly once.
          if (seen.find("line-1\n") == std::string::npos || seen.find("line-1\n") != seen.rfind("line-1\n") ||
              seen.find("line-3\n") == std::string::npos || seen.find("[stderr]\nerr\n") == std::string::npos)
            ++failures;
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  CHECK(failures.load() == 0);

  const auto all = executor.list();
  CHECK(all.size() == threads * tasks_per_thread);
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i].id == task_id("bash-" + std::to_string(i + 1)));
  CHECK(test_support::eventually([&] {
    std::lock_guard lock(mutex);
    return done_calls.size() == all.size();
  }));
  std::lock_guard lock(mutex);
  for (const auto& [id, calls] : done_calls) {
    CAPTURE(id);
    CHECK(calls == 1);
  }
}

TEST_CASE("contract 9: kills from one thread release waiters blocked in other threads",
          "[background][concurrency][contract-9]") {
  auto executor = std::make_unique<local_executor>(test_support::fast_config());
  std::vector<task_id> ids;
  for (int i = 0; i < 4; ++i)
    ids.push_back(executor->start(executor->resolve({.command = "trap '' TERM; sleep 100"})));
  std::atomic<int> released{0};
  std::vector<std::thread> waiters;
  for (const auto& id : ids)
    waiters.emplace_back([&, id] {
      auto facts = executor->wait(id);
      if (facts.status == task_status::killed) ++released;
    });
  std::this_thread::sleep_for(100ms);
  // Waiters hold no lock while blocked; stopping every task lets them return
  // before the executor goes away.
  for (const auto& id : ids) executor->kill(id);
  for (auto& w : waiters) w.join();
  CHECK(released.load() == 4);
  executor.reset();
  CHECK(test_support::children_of_self().empty());
}

TEST_CASE("contract 9/12: stop requests racing with starts and with disposal neither crash nor deadlock",
          "[background][concurrency][contract-9][contract-12]") {
  for (int round = 0; round < 20; ++round) {
    INFO("round " << round);
    std::stop_source stop;
    auto executor = std::make_unique<local_executor>(test_support::fast_config());
    std::vector<task_id> started;
    std::thread starter([&] {
      for (int i = 0; i < 5; ++i) {
        try {
          started.push_back(executor->start(executor->resolve({.command = "sleep 60", .stop = stop.get_token()})));
        } catch (const infrastructure_error&) {
          // The stop was already requested: refused, nothing spawned (contract 2).
        }
      }
    });
    std::thread stopper([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(round * 250));
      stop.request_stop();  // runs the tasks' stop callbacks on this thread
    });
    starter.join();
    if (round % 2 == 0) {
      // Every task the stop reached settles killed.
      stopper.join();
      for (const auto& id : started) {
        auto settled = executor->wait_for(id, 10s);
        REQUIRE(settled.has_value());
        CHECK(settled->status == task_status::killed);
      }
      executor.reset();
    } else {
      executor.reset();  // disposal racing the stop callbacks
      stopper.join();
    }
  }
}

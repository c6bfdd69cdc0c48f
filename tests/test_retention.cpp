// Retention of settled background tasks (executor_config::retention): an
// executor that lives for days holds bounded memory, descriptors and spill
// files. Forgotten ids say so (task_forgotten, an unknown_task — contract 9:
// ids the executor does not hold throw); running tasks are never forgotten.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <bashexec/detail/engine/executor_cgroup.hpp>
#include <bashexec/local_executor.hpp>

#include "executor_test_support.hpp"

using namespace bashexec;
using namespace std::chrono_literals;
using test_support::eventually;
using test_support::fast_config;

namespace {

task_id start(local_executor& executor, std::string command, std::optional<std::size_t> cap = std::nullopt) {
  return executor.start(executor.resolve({.command = std::move(command), .stdout_max_bytes = cap}));
}

bool forgotten(local_executor& executor, const task_id& id) {
  try {
    executor.get(id);
    return false;
  } catch (const task_forgotten&) {
    return true;
  }
}

bool held(local_executor& executor, const task_id& id) {
  try {
    executor.get(id);
    return true;
  } catch (const unknown_task&) {
    return false;
  }
}

/// Starts `count` tasks one after another, each waited for before the next
/// starts, so they settle in start order.
std::vector<task_id> settle_in_order(local_executor& executor, int count, const std::string& command,
                                     std::optional<std::size_t> cap = std::nullopt) {
  std::vector<task_id> ids;
  for (int i = 0; i < count; ++i) {
    ids.push_back(start(executor, command, cap));
    executor.wait(ids.back());
  }
  return ids;
}

std::size_t files_in(const std::filesystem::path& dir) {
  if (dir.empty() || !std::filesystem::exists(dir)) return 0;
  return static_cast<std::size_t>(
      std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()));
}

/// VmRSS of this process in KiB, from /proc/self/status.
long rss_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

std::size_t open_descriptors() { return files_in("/proc/self/fd"); }

/// This process's descriptors of cgroupfs files: the executor's idle
/// per-spawn cgroups hold three each (the directory, cgroup.procs and
/// cgroup.events), up to executor_cgroup::default_keep of them — a number
/// that follows how many spawns once ran at the same time, not the tasks kept.
std::size_t cgroup_descriptors() {
  std::size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    if (std::filesystem::read_symlink(entry.path(), error).string().starts_with("/sys/fs/cgroup")) ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("retention: past max_tasks the oldest settled tasks are forgotten and say so plainly",
          "[background][retention][contract-9]") {
  executor_config config = fast_config();
  config.retention.max_tasks = 3;
  local_executor executor(config);
  const auto ids = settle_in_order(executor, 6, "echo hello");
  for (int i = 0; i < 3; ++i) {
    CAPTURE(ids[i]);
    CHECK(eventually([&] { return forgotten(executor, ids[i]); }));
  }
  for (int i = 3; i < 6; ++i) {
    CAPTURE(ids[i]);
    CHECK(executor.get(ids[i]).status == task_status::completed);
    CHECK(executor.read_output(ids[i]).delta == "hello\n");
  }
  CHECK(executor.list().size() == 3u);

  const task_id& gone = ids[0];
  try {
    executor.read_output(gone);
    FAIL("read_output of a forgotten task did not throw");
  } catch (const task_forgotten& e) {
    CHECK(e.id() == gone);
    CHECK_THAT(e.what(), Catch::StartsWith("task bash-1 was forgotten: settled tasks are kept for at most 1 h"));
    CHECK_THAT(e.what(), Catch::Contains("3 that settled last"));
  }
  CHECK_THROWS_AS(executor.kill(gone), task_forgotten);
  CHECK_THROWS_AS(executor.wait(gone), task_forgotten);
  CHECK_THROWS_AS(executor.wait_for(gone, 10ms), task_forgotten);
  CHECK_THROWS_AS(executor.get(gone), unknown_task);  // a forgotten task is an unknown_task too
  CHECK_FALSE(executor.owner_of(gone).has_value());

  // Ids are never reused, and an id never issued is unknown, not forgotten.
  CHECK(start(executor, "true") == task_id("bash-7"));
  for (const char* never : {"bash-8", "bash-99", "bash-0", "bash-01", "bash-x", "task-1", ""}) {
    CAPTURE(never);
    try {
      executor.get(task_id(never));
      FAIL("get did not throw");
    } catch (const task_forgotten&) {
      FAIL("an id never issued was reported forgotten");
    } catch (const unknown_task& e) {
      CHECK_THAT(e.what(), Catch::StartsWith("unknown task"));
    }
  }
  executor.wait(task_id("bash-7"));
}

TEST_CASE("retention: a running task is never forgotten, however many tasks settle after it",
          "[background][retention]") {
  executor_config config = fast_config();
  config.retention.max_tasks = 1;
  config.retention.max_bytes = 1;
  config.retention.max_age = 1ms;
  local_executor executor(config);
  const task_id sleeper = start(executor, "echo started; sleep 30");
  settle_in_order(executor, 5, "true");
  std::this_thread::sleep_for(50ms);
  REQUIRE(held(executor, sleeper));
  CHECK(executor.get(sleeper).status == task_status::running);
  CHECK(executor.read_output(sleeper).delta == "started\n");
  CHECK(executor.kill(sleeper));
  executor.wait(sleeper);
  CHECK(eventually([&] { return forgotten(executor, sleeper); }));
}

TEST_CASE("retention: past max_age a settled task is forgotten even while nobody calls the executor",
          "[background][retention]") {
  executor_config config = fast_config();
  config.retention.max_age = 300ms;
  local_executor executor(config);
  const task_id id = start(executor, "head -c 5000 /dev/zero", 1000);  // spills: the file shows the forgetting
  executor.wait(id);
  std::optional<std::filesystem::path> spill;
  try {
    spill = executor.read_output(id).stdout_spill_path;
  } catch (const task_forgotten&) {
    WARN("the machine stalled past max_age before the first read; the spill file cannot be observed");
    return;
  }
  REQUIRE(spill.has_value());
  // Only the file system is watched here: the reactor's timer does the forgetting.
  CHECK(eventually([&] { return !std::filesystem::exists(*spill); }));
  CHECK(forgotten(executor, id));
}

TEST_CASE("retention: past max_bytes the oldest settled tails are forgotten, the newest is always kept",
          "[background][retention]") {
  // Each task holds a 10000-byte tail (the stream spilled) plus its command.
  executor_config config = fast_config();
  config.retention.max_bytes = 35000;
  local_executor executor(config);
  const auto ids = settle_in_order(executor, 6, "head -c 20000 /dev/zero", 10000);
  for (int i = 0; i < 3; ++i) CHECK(eventually([&] { return forgotten(executor, ids[i]); }));
  for (int i = 3; i < 6; ++i) {
    CAPTURE(ids[i]);
    CHECK(held(executor, ids[i]));
  }

  executor_config tiny = fast_config();
  tiny.retention.max_bytes = 100;  // smaller than any one task
  local_executor small(tiny);
  const auto more = settle_in_order(small, 3, "head -c 20000 /dev/zero", 10000);
  CHECK(eventually([&] { return forgotten(small, more[0]) && forgotten(small, more[1]); }));
  const task_read last = small.read_output(more[2]);
  CHECK(last.delta.size() == 10000u);
}

TEST_CASE("retention: a forgotten task's spill files are removed, a kept task's stay", "[background][retention]") {
  executor_config config = fast_config();
  config.retention.max_tasks = 2;
  config.output_cap = 1000;  // both streams spill
  local_executor executor(config);
  std::vector<std::filesystem::path> spills;
  std::vector<task_id> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(start(executor, "head -c 3000 /dev/zero; head -c 3000 /dev/zero >&2"));
    executor.wait(ids.back());
    const task_read r = executor.read_output(ids.back());
    REQUIRE(r.stdout_spill_path.has_value());
    REQUIRE(r.stderr_spill_path.has_value());
    spills.push_back(*r.stdout_spill_path);
    spills.push_back(*r.stderr_spill_path);
  }
  for (int i = 0; i < 3; ++i) CHECK(eventually([&] { return forgotten(executor, ids[i]); }));
  for (std::size_t i = 0; i < spills.size(); ++i) {
    CAPTURE(spills[i]);
    if (i < 6)
      CHECK(eventually([&] { return !std::filesystem::exists(spills[i]); }));
    else
      CHECK(std::filesystem::exists(spills[i]));
  }
  CHECK(files_in(executor.spill_directory()) == 4u);
}

TEST_CASE("retention: a settled task whose detached member still lives is kept until the member is gone",
          "[background][retention][contract-12]") {
  executor_config config = fast_config();
  config.retention.max_tasks = 1;
  local_executor executor(config);
  const task_id holder = start(executor, "sleep 60 >/dev/null 2>&1 </dev/null & echo $!");
  executor.wait(holder);
  const long member = test_support::first_pid(executor.read_output(holder).delta);
  REQUIRE(member > 1);
  const auto later = settle_in_order(executor, 3, "true");
  CHECK(eventually([&] { return forgotten(executor, later[0]) && forgotten(executor, later[1]); }));
  CHECK(held(executor, later[2]));  // the task that settled last is kept
  CHECK(held(executor, holder));    // disposal must still reach its member
  REQUIRE(test_support::pid_alive(member));
  ::kill(static_cast<pid_t>(member), SIGKILL);
  // Looked at again within about a second, by the timer alone.
  CHECK(eventually([&] { return forgotten(executor, holder); }));
  CHECK(held(executor, later[2]));
}

TEST_CASE("retention: readers, listeners and the reactor race the forgetting without harm",
          "[background][retention][contract-10]") {
  executor_config config = fast_config();
  config.retention.max_tasks = 4;
  local_executor executor(config);
  std::atomic<int> notified{0};
  std::atomic<int> notified_completed{0};
  std::atomic<int> listener_reads{0};
  auto subscription = executor.on_task_done([&](const task_snapshot& done) {
    ++notified;
    if (done.status == task_status::completed) ++notified_completed;  // the listener's snapshot is its own
    try {
      executor.read_output(done.id);
      ++listener_reads;
    } catch (const task_forgotten&) {
    }
  });
  constexpr int tasks = 100;
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0};
  std::atomic<int> unexpected{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r)
    readers.emplace_back([&, r] {
      unsigned n = static_cast<unsigned>(r);
      while (!stop) {
        const task_id id("bash-" + std::to_string(1 + (n++ * 7) % tasks));
        try {
          const task_read got = executor.read_output(id);
          if (got.stdout_spill_path) (void)std::filesystem::exists(*got.stdout_spill_path);
          executor.get(id);
          ++reads;
        } catch (const task_forgotten&) {
        } catch (const unknown_task&) {
          // not started yet
        } catch (...) {
          ++unexpected;
        }
      }
    });
  std::vector<task_id> ids;
  for (int i = 0; i < tasks; ++i) ids.push_back(start(executor, "head -c 2000 /dev/zero", 500));
  for (const auto& id : ids) {
    try {
      executor.wait(id);
    } catch (const task_forgotten&) {
    }
  }
  CHECK(eventually([&] { return notified.load() == tasks; }));
  CHECK(notified_completed.load() == tasks);
  stop = true;
  for (auto& t : readers) t.join();
  CHECK(unexpected.load() == 0);
  CHECK(executor.list().size() <= 4u);
  CHECK(eventually([&] { return files_in(executor.spill_directory()) <= 4u; }));
  INFO("reads that found their task: " << reads.load() << ", listener reads: " << listener_reads.load());
  SUCCEED();
}

TEST_CASE("retention: 1000 background tasks of 100 KB output each keep memory, descriptors and spill files bounded",
          "[background][retention][memory]") {
  // The default retention (1000 tasks, 16 MiB held, 1 h) keeps about 262
  // tasks' 64000-byte tails; without it the RSS would grow by about 6 MiB a
  // wave (51 MiB past the baseline). Measured here: flat within 6 MiB once
  // the retention is full (the third wave). Spawns dominate the run time.
  local_executor executor(fast_config());
  constexpr int waves = 10;
  constexpr int per_wave = 100;
  long baseline_rss = 0;
  long peak_rss = 0;
  std::size_t baseline_fds = 0;
  std::size_t peak_fds = 0;
  std::size_t peak_cgroup_fds = 0;
  for (int wave = 0; wave < waves; ++wave) {
    std::vector<task_id> ids;
    for (int i = 0; i < per_wave; ++i) ids.push_back(start(executor, "head -c 100000 /dev/zero"));
    for (std::size_t i = 0; i < ids.size(); ++i) {
      try {
        executor.wait(ids[i]);
        if (i % 2 == 0) executor.read_output(ids[i]);  // half are read, half never are
      } catch (const task_forgotten&) {
        FAIL("a task of the wave in progress was forgotten");
      }
    }
    test_support::settle_allocator();
    const long rss = rss_kib();
    const std::size_t cgroup_fds = cgroup_descriptors();
    const std::size_t fds = open_descriptors() - cgroup_fds;
    peak_cgroup_fds = std::max(peak_cgroup_fds, cgroup_fds);
    if (wave == 1) {
      baseline_rss = rss;  // after a wave: the reactor, the spill directory and the allocator are warm
      baseline_fds = fds;
    }
    if (wave >= 1) {
      peak_rss = std::max(peak_rss, rss);
      peak_fds = std::max(peak_fds, fds);
    }
  }
  INFO("VmRSS baseline " << baseline_rss << " KiB, peak " << peak_rss << " KiB; fds baseline " << baseline_fds
                         << ", peak " << peak_fds << " (cgroupfs descriptors apart: at most " << peak_cgroup_fds << ")");
  REQUIRE(baseline_rss > 0);
  CHECK(peak_rss - baseline_rss < 24 * 1024);  // the rest of the 16 MiB of tails, plus allocator slack
  CHECK(peak_fds <= baseline_fds + 8);
  // The free list of idle cgroups is bounded, whatever the number of tasks
  // (plus the executor's own cgroup's two and one of a spawn in flight).
  CHECK(peak_cgroup_fds <= 3 * (bashexec::detail::executor_cgroup::default_keep + 1) + 2);
  CHECK(eventually([&] { return executor.list().size() <= 300u; }));  // 16 MiB / 64000-byte tails ≈ 262
  CHECK(eventually([&] { return files_in(executor.spill_directory()) <= executor.list().size(); }));
}

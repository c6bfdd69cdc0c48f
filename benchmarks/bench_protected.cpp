// bench_protected: what protecting every repository in the workspace costs
// a workspace-write spawn (docs/security.md "Protected paths"; issue 25 item
// 12). The workspace holds 10,000 directories (100 × 100, a root `.git`
// with a hooks path, 20 nested repositories).
//   protected/scan/10000_dirs                 — detail::protected_locations alone
//   protected/run/<backend>:workspace-write    — run("true") over that
//       workspace (`us`) and over an empty one with only a `.git` (`empty_us`),
//       alternated; `added_us` is the difference, `binds` the bind count.
#include <bashexec/basic_executor.hpp>
#include <bashexec/confinement/bwrap.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/confinement/detail/protected_paths.hpp>
#include <bashexec/spawn/fork_exec.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "bench_common.hpp"

namespace bench {
namespace {

namespace fs = std::filesystem;

/// A scratch workspace under /var/tmp (not /tmp: workspace-write grants it).
class bench_workspace {
 public:
  explicit bench_workspace(bool tree) {
    std::string pattern = "/var/tmp/bashexec-bench-protect-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) fail("mkdtemp");
    root_ = pattern;
    fs::create_directories(root_ / ".git" / "hooks");
    std::ofstream(root_ / ".git" / "config") << "[core]\n\thooksPath = .githooks\n";
    fs::create_directories(root_ / ".githooks");
    if (!tree) return;
    for (int i = 0; i < 100; ++i)
      for (int j = 0; j < 100; ++j) fs::create_directories(root_ / fmt::format("d{}", i) / fmt::format("e{}", j));
    for (int i = 0; i < 20; ++i) fs::create_directories(root_ / fmt::format("d{}", i * 5) / "e0" / ".git" / "hooks");
  }
  ~bench_workspace() {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  bench_workspace(const bench_workspace&) = delete;
  bench_workspace& operator=(const bench_workspace&) = delete;
  const fs::path& path() const { return root_; }

 private:
  fs::path root_;
};

void protected_scan(benchmark::State& state) {
  const bench_workspace ws(true);
  std::size_t binds = 0;
  for (auto _ : state) binds = bashexec::detail::protected_locations(ws.path(), {".git"}).size();
  state.counters["binds"] = static_cast<double>(binds);
}
BENCHMARK(protected_scan)->Name("protected/scan/10000_dirs")->Unit(benchmark::kMicrosecond);

template <class Confinement>
void protected_run(benchmark::State& state) {
  using executor = bashexec::basic_executor<
      bashexec::policies<bashexec::spawn_with<bashexec::fork_exec>, bashexec::confine_with<Confinement>>>;
  try {
    const bench_workspace tree(true);
    const bench_workspace empty(false);
    auto make = [](const fs::path& root) {
      bashexec::executor_config config;
      config.sandbox.workspace_root = root;
      config.sandbox.default_mode = bashexec::sandbox_mode::workspace_write;
      return config;
    };
    executor over_tree(make(tree.path()));
    executor over_empty(make(empty.path()));
    auto time_true = [](executor& exec) {
      const auto start = clock::now();
      const auto result = exec.run(exec.resolve({.command = "true"}));
      if (result.exit_code != 0) throw std::runtime_error("run(\"true\") failed: " + result.err.text);
      return seconds_since(start);
    };
    time_true(over_tree);  // warm-up: page cache, dentries
    time_true(over_empty);
    double tree_seconds = 0, empty_seconds = 0;
    std::uint64_t calls = 0;
    for (auto _ : state) {
      const bool tree_first = calls % 2 == 0;
      const double a = tree_first ? time_true(over_tree) : time_true(over_empty);
      const double b = tree_first ? time_true(over_empty) : time_true(over_tree);
      const double in_tree = tree_first ? a : b;
      tree_seconds += in_tree;
      empty_seconds += tree_first ? b : a;
      ++calls;
      state.SetIterationTime(in_tree);
    }
    state.counters["us"] = tree_seconds / static_cast<double>(calls) * 1e6;
    state.counters["empty_us"] = empty_seconds / static_cast<double>(calls) * 1e6;
    state.counters["added_us"] = (tree_seconds - empty_seconds) / static_cast<double>(calls) * 1e6;
    state.counters["binds"] =
        static_cast<double>(bashexec::detail::protected_locations(tree.path(), {".git"}).size());
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}
BENCHMARK(protected_run<bashexec::bwrap>)
    ->Name("protected/run/bwrap:workspace-write")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(protected_run<bashexec::landlock>)
    ->Name("protected/run/landlock:workspace-write")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace bench

// bench_collect: output-collection throughput. The same byte streams (1 GiB of
// zeros, 2,000,000 short lines, mixed 4 KiB / 64 KiB chunks) go from a real
// pipe through each shipped output policy (end to end through
// basic_executor::run) and through each read-path variant (variants.hpp).
// Every case is paired with the floor — pipe → file with splice() — in the
// same iteration; `ratio` is subject throughput / floor throughput.
#include <bashexec/basic_executor.hpp>
#include <bashexec/output/head_tail.hpp>
#include <bashexec/output/unbounded.hpp>

#include <fmt/format.h>

#include "bench_common.hpp"
#include "variants.hpp"

namespace bench {
namespace {

constexpr std::size_t default_cap = 64000;

template <class Output>
double executor_collect(stream s, bool check) {
  bashexec::executor_config config;
  config.spill_parent = scratch_dir();
  bashexec::basic_executor<bashexec::policies<bashexec::collect_with<Output>>> executor(config);
  bashexec::exec_request request;
  request.command = producer_command(s);
  const auto spec = executor.resolve(std::move(request));
  const auto start = clock::now();
  auto result = executor.run(spec);
  const double elapsed = seconds_since(start);
  if (check) {
    const auto expected = stream_bytes(s);
    if (result.exit_code != 0) throw std::runtime_error("producer failed");
    if constexpr (std::is_same_v<Output, bashexec::tail_spill>) {
      if (result.out.text.size() != std::min<std::uint64_t>(expected, default_cap))
        throw std::runtime_error(fmt::format("tail has {} bytes", result.out.text.size()));
      if (expected > default_cap && (!result.out.spill_path ||
                                     std::filesystem::file_size(*result.out.spill_path) != expected))
        throw std::runtime_error("spill file does not hold the whole stream");
    }
  }
  return elapsed;  // the executor (and its spill directory) goes away untimed
}

template <class Loop>
double loop_collect(stream s, bool big_pipe, bool check) {
  bashexec::detail::spill_directory dir(scratch_dir(), std::uint64_t{1} << 40, false);
  const auto start = clock::now();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) fail("pipe2");
  if (big_pipe && ::fcntl(fds[0], F_SETPIPE_SZ, 1 << 20) < 0) fail("F_SETPIPE_SZ");
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  pid_t pid = raw_spawn(producer_command(s), fds[1]);
  ::close(fds[1]);
  Loop loop(default_cap, dir);
  drive_loop(fds[0], loop);
  ::close(fds[0]);
  raw_wait(pid);
  loop_outcome out = loop.finish();
  const double elapsed = seconds_since(start);
  if (check) {
    const auto expected = stream_bytes(s);
    if (out.total != expected) throw std::runtime_error(fmt::format("collected {} of {} bytes", out.total, expected));
    if (out.tail.size() != std::min<std::uint64_t>(expected, default_cap))
      throw std::runtime_error(fmt::format("tail has {} bytes", out.tail.size()));
  }
  return elapsed;
}

void register_stream(stream s) {
  const std::string prefix = fmt::format("collect/{}/", info(s).name);
  const bool tiny = s == stream::tiny;
  auto add = [&](std::string name, std::function<double(bool)> subject) {
    auto* b = benchmark::RegisterBenchmark(
        (prefix + name).c_str(), [s, subject](benchmark::State& state) {
          paired_totals totals;
          try {
            // Every subject run checks its own outcome (a stat at most: noise-free).
            run_paired(state, [s] { return splice_floor(s); }, [&] { return subject(true); }, totals);
          } catch (const std::exception& e) {
            state.SkipWithError(e.what());
            return;
          }
          report_throughput(state, totals, stream_bytes(s));
        });
    b->UseManualTime()->Unit(benchmark::kMillisecond);
    if (!tiny) b->Iterations(1);
  };
  add("exec:tail_spill", [s](bool check) { return executor_collect<bashexec::tail_spill>(s, check); });
  if (tiny) return;
  add("exec:head_tail", [s](bool check) { return executor_collect<bashexec::head_tail>(s, check); });
  if (s == stream::lines) {
    // One write() per line makes this stream producer-bound (~3 s a run):
    // only the shipped policies and the splice variant, to keep the suite
    // under five minutes.
    add("loop:splice", [s](bool check) { return loop_collect<splice_loop>(s, false, check); });
    return;
  }
  add("exec:chunk_tail", [s](bool check) { return executor_collect<chunk_tail>(s, check); });
  if (s != stream::zeros)  // 1 GiB in one std::string is not a sensible run
    add("exec:unbounded", [s](bool check) { return executor_collect<bashexec::unbounded>(s, check); });
  add("loop:read_ring", [s](bool check) { return loop_collect<read_ring_loop>(s, false, check); });
  add("loop:read_ring+pipe1m", [s](bool check) { return loop_collect<read_ring_loop>(s, true, check); });
  add("loop:read_no_ring", [s](bool check) { return loop_collect<read_no_ring_loop>(s, false, check); });
  add("loop:splice", [s](bool check) { return loop_collect<splice_loop>(s, false, check); });
  add("loop:splice+pipe1m", [s](bool check) { return loop_collect<splice_loop>(s, true, check); });
}

}  // namespace

void register_collect() {
  register_stream(stream::tiny);
  register_stream(stream::zeros);
  register_stream(stream::lines);
  register_stream(stream::chunks);
}

}  // namespace bench

// bench_common: what every benchmark file shares — the byte-stream producer
// (this same binary re-executed with --produce), the floors measured in the
// same run (raw posix_spawn + waitpid; pipe → file with splice), resident
// memory probes, and the paired-timing helper that makes every headline
// figure a ratio to a floor (shared, noisy machines: interleave, then take
// medians of ratios).
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

extern char** environ;

namespace bench {

using clock = std::chrono::steady_clock;

inline double seconds_since(clock::time_point start) {
  return std::chrono::duration<double>(clock::now() - start).count();
}

[[noreturn]] inline void fail(std::string_view what) {
  throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

/// Absolute path of this benchmark binary (the producer is this binary).
const std::string& self_path();

/// The byte streams every output path is fed with.
enum class stream {
  zeros,   // 1 GiB of zeros, written 128 KiB at a time (like cat)
  lines,   // 2,000,000 short lines, one write() per line (a line-flushing program)
  chunks,  // alternating 4 KiB and 64 KiB writes of text, 256 MiB
  tiny,    // 1 MiB of text in 4 KiB writes (smoke test)
};

struct stream_info {
  const char* name;
  std::uint64_t bytes;
};

/// Sizes may be scaled down for quick runs with BASHEXEC_BENCH_SCALE (a divisor).
/// `bytes` is the producer's amount argument (a line count for `lines`).
stream_info info(stream s);
/// Bytes the producer of `s` writes.
std::uint64_t stream_bytes(stream s);
/// Bytes of one line of the `lines` stream.
inline constexpr std::uint64_t line_bytes = 28;

/// `--produce NAME BYTES` mode: writes the stream to stdout and exits.
int produce(int argc, char** argv);

/// The shell command that produces `s` (used by executor runs and floors alike).
std::string producer_command(stream s);

/// Spawns `/bin/bash -c command` with stdout → `out_fd` (−1: inherit /dev/null),
/// in its own process group; returns the pid. With `terminal`, `out_fd` is
/// a terminal's slave and becomes stdin, stdout and stderr of a new session.
pid_t raw_spawn(const std::string& command, int out_fd, bool terminal = false);

/// Waits for `pid`; returns its wait status.
int raw_wait(pid_t pid);

/// The floor of every collection benchmark: spawn the producer, splice its
/// pipe into a fresh file in the spill location until EOF, reap, close.
/// Returns seconds; the file is removed outside the timed region.
double splice_floor(stream s);

/// Directory where spill files and floor files go ($TMPDIR or /tmp).
std::filesystem::path scratch_dir();

/// Resident memory of this process (VmRSS, VmHWM) in bytes.
std::uint64_t rss_bytes();
std::uint64_t peak_rss_bytes();
/// Resets VmHWM to the current RSS (writes 5 to /proc/self/clear_refs);
/// false when the kernel does not allow it.
bool reset_peak_rss();

/// Runs `floor` and `subject` alternately (order flipped every iteration so
/// neither always runs on a warm or cold machine), reports the subject's time
/// as the iteration time and adds the counters `floor_<unit>`, `<unit>` and
/// `ratio` (subject time / floor time: >1 means slower than the floor).
struct paired_totals {
  double floor_seconds = 0;
  double subject_seconds = 0;
  std::uint64_t pairs = 0;
};
void run_paired(benchmark::State& state, const std::function<double()>& floor,
                const std::function<double()>& subject, paired_totals& totals);

/// Adds per-call latency counters (µs) and the ratio.
void report_latency(benchmark::State& state, const paired_totals& totals);
/// Adds throughput counters (bytes/s, MB/s) and the ratio subject/floor
/// throughput (>1 means faster than the floor).
void report_throughput(benchmark::State& state, const paired_totals& totals, std::uint64_t bytes_per_run);

}  // namespace bench

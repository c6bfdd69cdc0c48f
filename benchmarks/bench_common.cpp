// bench_common: the producer, the floors and the measuring helpers shared by
// every benchmark file (see bench_common.hpp).
#include "bench_common.hpp"

#include <algorithm>
#include <csignal>

#include <fmt/format.h>

namespace bench {

const std::string& self_path() {
  static const std::string path = std::filesystem::read_symlink("/proc/self/exe").string();
  return path;
}

static std::uint64_t scale() {
  static const std::uint64_t value = [] {
    const char* s = std::getenv("BASHEXEC_BENCH_SCALE");
    std::uint64_t v = s ? std::strtoull(s, nullptr, 10) : 1;
    return v == 0 ? 1 : v;
  }();
  return value;
}

stream_info info(stream s) {
  switch (s) {
    case stream::zeros: return {"zeros", (std::uint64_t{1} << 30) / scale()};
    case stream::lines: return {"lines", std::uint64_t{2'000'000} / scale()};  // a count of lines
    case stream::chunks: return {"chunks", (std::uint64_t{256} << 20) / scale()};
    case stream::tiny: return {"tiny", std::uint64_t{1} << 20};
  }
  return {"?", 0};
}

std::uint64_t stream_bytes(stream s) {
  const auto i = info(s);
  return s == stream::lines ? i.bytes * line_bytes : i.bytes;
}

static void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::_Exit(1);  // the reader went away
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

int produce(int argc, char** argv) {
  if (argc < 4) return 2;
  const std::string_view name = argv[2];
  const std::uint64_t amount = std::strtoull(argv[3], nullptr, 10);
  if (name == "zeros") {
    std::vector<char> block(128 << 10, '\0');
    for (std::uint64_t left = amount; left > 0;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, block.size()));
      write_all(1, block.data(), n);
      left -= n;
    }
  } else if (name == "lines") {
    char line[64];
    for (std::uint64_t i = 0; i < amount; ++i) {
      int n = std::snprintf(line, sizeof line, "line %08llu of the stream\n", static_cast<unsigned long long>(i));
      write_all(1, line, static_cast<std::size_t>(n));
    }
  } else if (name == "chunks" || name == "tiny") {
    std::string text;
    for (int i = 0; text.size() < (64u << 10); ++i) text += fmt::format("chunk text {:06d} abcdefghijklmnop\n", i);
    const std::size_t small = 4096, big = name == "tiny" ? 4096 : (64u << 10);
    bool flip = false;
    for (std::uint64_t left = amount; left > 0; flip = !flip) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, flip ? big : small));
      write_all(1, text.data(), n);
      left -= n;
    }
  } else {
    return 2;
  }
  return 0;
}

std::string producer_command(stream s) {
  const auto i = info(s);
  return fmt::format("exec {} --produce {} {}", self_path(), i.name, i.bytes);
}

pid_t raw_spawn(const std::string& command, int out_fd, bool terminal) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawnattr_init(&attr);
  if (terminal) {
    for (int fd = 0; fd < 3; ++fd) ::posix_spawn_file_actions_adddup2(&actions, out_fd, fd);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_USEVFORK);
  } else {
    if (out_fd >= 0) ::posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
    ::posix_spawnattr_setpgroup(&attr, 0);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_USEVFORK);
  }
  char bash[] = "/bin/bash", dash_c[] = "-c";
  std::string cmd = command;
  char* argv[] = {bash, dash_c, cmd.data(), nullptr};
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, bash, &actions, &attr, argv, environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    errno = rc;
    fail("posix_spawn");
  }
  return pid;
}

int raw_wait(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) fail("waitpid");
  return status;
}

std::filesystem::path scratch_dir() {
  const char* tmpdir = std::getenv("TMPDIR");
  return (tmpdir && *tmpdir) ? tmpdir : "/tmp";
}

double splice_floor(stream s) {
  const auto path = scratch_dir() / fmt::format("bashexec-bench-floor-{}", ::getpid());
  const auto start = clock::now();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) fail("pipe2");
  int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (file < 0) fail("open floor file");
  pid_t pid = raw_spawn(producer_command(s), fds[1]);
  ::close(fds[1]);
  for (;;) {
    ssize_t n = ::splice(fds[0], nullptr, file, nullptr, 1 << 20, SPLICE_F_MOVE | SPLICE_F_MORE);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("splice");
    break;
  }
  ::close(fds[0]);
  raw_wait(pid);
  ::close(file);
  const double elapsed = seconds_since(start);
  ::unlink(path.c_str());
  return elapsed;
}

static std::uint64_t status_field(std::string_view field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, field.size(), field) == 0 && line.size() > field.size() && line[field.size()] == ':')
      return std::strtoull(line.c_str() + field.size() + 1, nullptr, 10) * 1024;
  return 0;
}

std::uint64_t rss_bytes() { return status_field("VmRSS"); }
std::uint64_t peak_rss_bytes() { return status_field("VmHWM"); }

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

void run_paired(benchmark::State& state, const std::function<double()>& floor,
                const std::function<double()>& subject, paired_totals& totals) {
  static std::uint64_t flip = 0;
  for (auto _ : state) {
    double f = 0, t = 0;
    if (++flip % 2) {
      f = floor();
      t = subject();
    } else {
      t = subject();
      f = floor();
    }
    totals.floor_seconds += f;
    totals.subject_seconds += t;
    ++totals.pairs;
    state.SetIterationTime(t);
  }
}

void report_latency(benchmark::State& state, const paired_totals& totals) {
  if (totals.pairs == 0) return;
  const double pairs = static_cast<double>(totals.pairs);
  state.counters["us"] = totals.subject_seconds / pairs * 1e6;
  state.counters["floor_us"] = totals.floor_seconds / pairs * 1e6;
  state.counters["ratio"] = totals.subject_seconds / totals.floor_seconds;
}

void report_throughput(benchmark::State& state, const paired_totals& totals, std::uint64_t bytes_per_run) {
  if (totals.pairs == 0) return;
  const double bytes = static_cast<double>(bytes_per_run) * static_cast<double>(totals.pairs);
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["MBps"] = bytes / totals.subject_seconds / 1e6;
  state.counters["floor_MBps"] = bytes / totals.floor_seconds / 1e6;
  state.counters["ratio"] = totals.floor_seconds / totals.subject_seconds;
}

}  // namespace bench

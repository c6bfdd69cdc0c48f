// Helpers shared by the executor tests: a fast configuration, process probes
// that read /proc directly (independent of the code under test) and small
// polling utilities. Zombies never count as alive: PID 1 of some containers
// does not reap orphans.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <bashexec/config.hpp>
#include <bashexec/detail/kernel/read_text_file.hpp>

// AddressSanitizer, by either compiler's spelling (the suite's default build
// has it: scripts/run-tests.sh).
#if defined(__SANITIZE_ADDRESS__)
#define BASHEXEC_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BASHEXEC_TEST_UNDER_ASAN 1
#endif
#endif
#ifdef BASHEXEC_TEST_UNDER_ASAN
extern "C" void __sanitizer_purge_allocator();  // compiler-rt's <sanitizer/allocator_interface.h>
#endif

namespace test_support {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

/// Small grace and drain so mechanism tests stay fast.
inline bashexec::executor_config fast_config() {
  bashexec::executor_config config;
  config.kill_grace = 300ms;
  config.drain_timeout = 300ms;
  config.error_sink = [](std::string_view) {};
  return config;
}

inline long long ms_since(steady::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - start).count();
}

/// Fields of /proc/<pid>/stat after the command name: state, ppid, pgrp.
struct proc_stat {
  char state = 0;
  int ppid = 0;
  int pgrp = 0;
};

/// The whole of a /proc file, read with read(2): a process that exits
/// meanwhile fails the read (ESRCH), which std::ifstream would throw about.
/// Empty when the file cannot be opened or read.
inline std::string read_proc(const std::filesystem::path& path) {
  return bashexec::detail::read_text_file(path.c_str()).value_or("");
}

inline std::optional<proc_stat> read_stat(const std::string& pid) {
  const std::string line = read_proc("/proc/" + pid + "/stat");
  if (line.empty()) return std::nullopt;
  auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  proc_stat st;
  if (std::sscanf(line.c_str() + close + 1, " %c %d %d", &st.state, &st.ppid, &st.pgrp) != 3) return std::nullopt;
  return st;
}

/// True while `pid` exists and is not a zombie.
inline bool pid_alive(long pid) {
  auto st = read_stat(std::to_string(pid));
  return st && st->state != 'Z' && st->state != 'X';
}

/// Pids of live (non-zombie) processes whose command line contains
/// `marker`, this process excluded. It sees every process of the host,
/// also those inside a pid namespace (bwrap), by their host pids.
inline std::vector<long> processes_with(const std::string& marker) {
  std::vector<long> found;
  DIR* dir = ::opendir("/proc");
  if (!dir) return found;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::string line = read_proc(std::string("/proc/") + entry->d_name + "/cmdline");
    for (char& c : line)
      if (c == '\0') c = ' ';
    const long pid = std::atol(entry->d_name);
    if (line.find(marker) != std::string::npos && pid != ::getpid() && pid_alive(pid)) found.push_back(pid);
  }
  ::closedir(dir);
  return found;
}

/// Live (non-zombie) members of process group `pgid`.
inline std::vector<long> live_group_members(long pgid) {
  std::vector<long> members;
  DIR* dir = ::opendir("/proc");
  if (!dir) return members;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    auto st = read_stat(entry->d_name);
    if (st && st->pgrp == pgid && st->state != 'Z' && st->state != 'X') members.push_back(std::atol(entry->d_name));
  }
  ::closedir(dir);
  return members;
}

/// Children of this process (any thread), zombies included: after every
/// run has returned there must be none.
inline std::vector<long> children_of_self() {
  std::vector<long> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::istringstream in(read_proc(task.path() / "children"));  // a thread may end meanwhile
    long pid = 0;
    while (in >> pid) out.push_back(pid);
  }
  return out;
}

/// True in a build with AddressSanitizer.
inline constexpr bool under_address_sanitizer =
#ifdef BASHEXEC_TEST_UNDER_ASAN
    true;
#else
    false;
#endif

/// Whether process `pid` runs with AddressSanitizer (its runtime is mapped):
/// a program the tests drive as a black box may be built otherwise than the
/// test itself.
inline bool process_has_address_sanitizer(long pid) {
  return read_proc("/proc/" + std::to_string(pid) + "/maps").find("libasan") != std::string::npos;
}

/// Call before reading this process's resident memory. Under AddressSanitizer
/// freed blocks wait in a quarantine (256 MiB by default) instead of going
/// back to the allocator, which would make a memory bound meaningless: this
/// drains it and returns free pages, so the bound holds under ASan as in a
/// plain build (its shadow memory adds about an eighth of what is live).
/// A no-op without ASan.
inline void settle_allocator() {
#ifdef BASHEXEC_TEST_UNDER_ASAN
  __sanitizer_purge_allocator();
#endif
}

/// Polls `done` every 10 ms until it holds or `limit` passes.
template <class Pred>
bool eventually(Pred done, std::chrono::milliseconds limit = 10s) {
  const auto until = steady::now() + limit;
  while (!done()) {
    if (steady::now() >= until) return done();
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

inline std::string random_bytes(std::size_t size, unsigned seed) {
  std::mt19937 gen(seed);
  std::string s(size, '\0');
  for (auto& c : s) c = static_cast<char>(gen() & 0xff);
  return s;
}

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// Where every test makes its scratch directories unless it means another
/// place: /var/tmp, named explicitly. Not the working directory (a build tree
/// may live anywhere, /tmp included), not TMPDIR (the runner's environment),
/// and not /tmp: bwrap's workspace-write replaces /tmp with a private tmpfs,
/// so a host directory there does not exist for a sandboxed command (its
/// writes fail with ENOENT instead of a denial, and its effects never reach
/// the host). /var/tmp is replaced by no sandbox mode.
inline std::filesystem::path scratch_root() { return "/var/tmp"; }

/// A private directory under `parent` (scratch_root() by default), removed
/// at scope exit. A test passes another parent only on purpose (/tmp to
/// exercise the tmpfs grant, $HOME for a home-relative path).
class temp_dir {
 public:
  explicit temp_dir(const std::filesystem::path& parent = scratch_root(),
                    const std::string& prefix = "bashexec-test-") {
    std::string templ = (parent / (prefix + "XXXXXX")).string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed under " + parent.string());
    path_ = templ;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

/// A shell that passes every check made before the spawn — an executable
/// regular file that only root can change, outside the workspace — but that
/// the kernel cannot execute (no format it knows: ENOEXEC), so the spawn
/// itself fails.
class unexecutable_shell {
 public:
  unexecutable_shell() : path_(dir_.path() / "not-a-shell") {
    std::ofstream(path_) << "\x7f\x01 not a program\n";
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all);
  }
  /// `config` with this shell and a workspace that does not hold it.
  bashexec::executor_config apply(bashexec::executor_config config) const {
    config.shell = path_;
    config.cwd = workspace_.path();
    return config;
  }
  std::string name() const { return path_.string(); }

 private:
  temp_dir dir_, workspace_;
  std::filesystem::path path_;
};

/// First line of `text` parsed as a pid (commands print `$$` or `$!` first).
inline long first_pid(const std::string& text) {
  return std::atol(text.substr(0, text.find('\n')).c_str());
}

}  // namespace test_support

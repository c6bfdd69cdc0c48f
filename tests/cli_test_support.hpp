// Shared by the tests that drive the real `bashexec` program
// (BASHEXEC_CLI_PATH): running it to completion, a `serve` or `run` process
// on pipes that a test can feed, read line by line, signal and reap, and a
// /proc scan for the processes a test marked.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <bashexec/local_executor.hpp>

#include "executor_test_support.hpp"

#ifndef BASHEXEC_CLI_PATH
#error "BASHEXEC_CLI_PATH must name the built bashexec program"
#endif

namespace cli_test {

using namespace std::chrono_literals;
using nlohmann::json;

inline const std::string cli = BASHEXEC_CLI_PATH;

/// Runs `bashexec ARGS` through the library itself (unconfined, via
/// `bash -c`, so ARGS may carry redirections) and returns its result. A
/// private XDG_RUNTIME_DIR, removed afterwards, takes whatever `run` keeps.
inline bashexec::run_result cli_run(const std::string& args, const std::filesystem::path& workdir = "/tmp") {
  const test_support::temp_dir runtime;
  std::filesystem::permissions(runtime.path(), std::filesystem::perms::owner_all);
  bashexec::local_executor executor;
  bashexec::exec_request request;
  request.command = "'" + cli + "' " + args;
  request.workdir = workdir;
  request.env = std::map<std::string, std::string>{{"XDG_RUNTIME_DIR", runtime.str()}};
  request.stdout_max_bytes = std::size_t{4} << 20;  // bashexec's own output whole, not a tail
  request.timeout = 60s;
  return executor.run(executor.resolve(std::move(request)));
}

/// `bashexec ARGS...` on two pipes, in its own process group, with `env`
/// added to (or replacing entries of) the test's environment.
class cli_process {
 public:
  /// `stderr_file`, when given, receives the process's stderr.
  explicit cli_process(std::vector<std::string> args, const std::map<std::string, std::string>& env = {},
                       const std::optional<std::filesystem::path>& stderr_file = std::nullopt) {
    int to_child[2], from_child[2];
    REQUIRE(::pipe2(to_child, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(from_child, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
    if (stderr_file)
      posix_spawn_file_actions_addopen(&actions, 2, stderr_file->c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    std::vector<std::string> argv{cli};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> ptrs;
    for (auto& a : argv) ptrs.push_back(a.data());
    ptrs.push_back(nullptr);
    std::vector<std::string> environment;
    for (char** e = environ; *e; ++e) {
      std::string entry(*e);
      if (!env.contains(entry.substr(0, entry.find('=')))) environment.push_back(std::move(entry));
    }
    for (const auto& [name, value] : env) environment.push_back(name + "=" + value);
    std::vector<char*> env_ptrs;
    for (auto& e : environment) env_ptrs.push_back(e.data());
    env_ptrs.push_back(nullptr);
    REQUIRE(::posix_spawn(&pid_, cli.c_str(), &actions, &attr, ptrs.data(), env_ptrs.data()) == 0);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(to_child[0]);
    ::close(from_child[1]);
    in_ = to_child[1];
    out_ = from_child[0];
  }

  cli_process(const cli_process&) = delete;
  cli_process& operator=(const cli_process&) = delete;

  ~cli_process() {
    close_input();
    if (pid_ > 0) {
      // End of input ends a server: a moment to remove its own directories
      // (a SIGKILL leaves them for the next start's sweep), then whatever is
      // left of its group dies.
      bool reaped = false;
      for (int waited = 0; waited < 100 && !reaped; ++waited) {
        const pid_t got = ::waitpid(pid_, nullptr, WNOHANG);
        reaped = got == pid_ || got < 0;
        if (!reaped) std::this_thread::sleep_for(10ms);
      }
      ::kill(-pid_, SIGKILL);
      if (!reaped) ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
  }

  pid_t pid() const { return pid_; }

  void send(const json& line) { send_raw(line.dump()); }

  void send_raw(const std::string& text) {
    std::string line = text + "\n";
    std::size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(in_, line.data() + done, line.size() - done);
      REQUIRE(n > 0);
      done += static_cast<std::size_t>(n);
    }
  }

  /// The next line that satisfies `match`; others are kept for later.
  json next(const std::function<bool(const json&)>& match, std::chrono::milliseconds limit = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (auto found = take(match)) return *found;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      REQUIRE(left.count() > 0);
      REQUIRE(read_some(left));
    }
  }

  /// True when a line satisfying `match` arrives within `limit`; it stays
  /// for a later `next`. For checking that something does NOT happen.
  bool arrives(const std::function<bool(const json&)>& match, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      for (const auto& line : seen_)
        if (match(line)) return true;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      if (!read_some(left)) return false;
    }
  }

  json reply_to(const json& id) {
    return next([id](const json& j) { return j.contains("id") && j["id"] == id; });
  }

  /// Every line the process wrote until it closed its stdout.
  std::vector<json> rest(std::chrono::milliseconds limit = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      REQUIRE(left.count() > 0);
      if (!read_some(left)) break;
    }
    return std::exchange(seen_, {});
  }

  void close_input() {
    if (in_ >= 0) ::close(in_);
    in_ = -1;
  }

  /// Waits for the process to exit; its exit status (128+N for a signal death).
  int wait_exit(std::chrono::milliseconds limit = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      std::this_thread::sleep_for(20ms);
    }
    pgid_ = pid_;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  pid_t pgid() const { return pgid_ > 0 ? pgid_ : pid_; }

 private:
  std::optional<json> take(const std::function<bool(const json&)>& match) {
    for (auto it = seen_.begin(); it != seen_.end(); ++it)
      if (match(*it)) {
        json found = *it;
        seen_.erase(it);
        return found;
      }
    return std::nullopt;
  }

  /// Reads what is there within `limit`; false at end of output.
  bool read_some(std::chrono::milliseconds limit) {
    pollfd p{out_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(limit.count())) <= 0) return true;
    char buf[65536];
    const ssize_t n = ::read(out_, buf, sizeof buf);
    if (n <= 0) return false;
    buffer_.append(buf, static_cast<std::size_t>(n));
    for (auto nl = buffer_.find('\n'); nl != std::string::npos; nl = buffer_.find('\n')) {
      // Every line the server writes is one JSON object: a parse failure fails the test.
      seen_.push_back(json::parse(buffer_.substr(0, nl)));
      buffer_.erase(0, nl + 1);
    }
    return true;
  }

  pid_t pid_ = -1;
  pid_t pgid_ = -1;
  int in_ = -1;
  int out_ = -1;
  std::string buffer_;
  std::vector<json> seen_;
};

/// `bashexec serve ARGS...`.
class server_process : public cli_process {
 public:
  explicit server_process(std::vector<std::string> args, const std::map<std::string, std::string>& env = {})
      : cli_process(with_serve(std::move(args)), env) {}

 private:
  static std::vector<std::string> with_serve(std::vector<std::string> args) {
    args.insert(args.begin(), "serve");
    return args;
  }
};

inline json bash_call(const json& id, const std::string& session, const std::string& command, bool background = false) {
  json args{{"command", command}, {"description", "test"}};
  if (background) args["run_in_background"] = true;
  return {{"id", id}, {"session", session}, {"tool", "bash"}, {"args", args}};
}

/// A marker no other process on the machine carries.
inline std::string unique_marker(std::string_view what) {
  static int counter = 0;
  return fmt::format("bashexec-test-{}-{}-{}", what, ::getpid(), ++counter);
}

using test_support::processes_with;

/// Waits until at least `count` processes carry `marker`.
inline bool wait_for_processes(const std::string& marker, std::size_t count, std::chrono::milliseconds limit = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (processes_with(marker).size() < count) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

/// Descriptors open in process `pid`.
inline std::size_t open_descriptors(pid_t pid) {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(fmt::format("/proc/{}/fd", pid))) ++count;
  return count;
}

/// The whole content of a small file.
inline std::string file_text(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

/// Entries of `dir` (a test's private TMPDIR or XDG_RUNTIME_DIR).
inline std::vector<std::string> entries(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  return names;
}

}  // namespace cli_test

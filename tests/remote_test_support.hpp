// remote_test_support: the executor of the remote/ lane (tests/CMakeLists.txt,
// issue 30) — `bashexec::remote_executor` talking to a server in another
// network namespace, a stand-in for another machine. The namespace is one
// remote host per test process (tests/remote_host.sh: a veth pair, the
// namespace held by a process); each executor a case builds starts a server
// of its own there (tests/helpers/remote_executor_host.cpp: a local_executor
// from the case's executor_config, served by mcp_http_server with
// executor_api), and talks to it across the veth pair with a bearer token.
// Destroying the executor ends its session (the server kills and reaps the
// commands), then SIGTERMs the server and reaps it. Without root there is
// no namespace: the servers listen on 127.0.0.1 and the lane says so.
//
// What crosses: every executor_config field the suites set that is a value
// (cwd, shell, timeouts, grace, drain, caps, spill placement and budget,
// the scrub rules). The error sink stays here: it hears the client's
// reports (a throwing listener), the server's go to its stderr.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <bashexec/config.hpp>
#include <bashexec/local_executor.hpp>
#include <bashexec/remote_executor.hpp>

#include "remote_host_support.hpp"

#ifndef BASHEXEC_REMOTE_EXECUTOR_HOST
#error "BASHEXEC_REMOTE_EXECUTOR_HOST (the remote_executor_host program) is set by tests/CMakeLists.txt"
#endif

namespace test_support {

/// The remote host of this test process, made at first use, removed at
/// exit; empty where none can be built (not root): the servers then listen
/// on this namespace's loopback, and the lane says so once.
inline const remote_host* lane_host() {
  static const std::optional<std::string> unavailable = [] {
    auto why = remote_host::unavailable();
    if (why)
      std::printf("remote/ lane: no network namespace (%s): each server listens on 127.0.0.1 instead, so the "
                  "calls cross a TCP connection but not a veth pair\n",
                  why->c_str());
    return why;
  }();
  if (unavailable) return nullptr;
  static remote_host host;
  return &host;
}

/// A token file of this process's own, mode 0600.
inline const std::filesystem::path& lane_token_file() {
  static const std::filesystem::path path = [] {
    auto file = std::filesystem::temp_directory_path() / ("bashexec-lane-token-" + std::to_string(::getpid()));
    std::ofstream(file) << "remote-lane-token-" << ::getpid() << "-0123456789abcdef\n";
    ::chmod(file.c_str(), 0600);
    return file;
  }();
  return path;
}

inline std::string lane_token() {
  std::ifstream in(lane_token_file());
  std::string token;
  std::getline(in, token);
  return token;
}

inline nlohmann::json config_json(const bashexec::executor_config& config) {
  nlohmann::json json{{"shell", config.shell.string()},
                      {"default_timeout_ms", config.default_timeout.count()},
                      {"max_timeout_ms", config.max_timeout.count()},
                      {"kill_grace_ms", config.kill_grace.count()},
                      {"drain_timeout_ms", config.drain_timeout.count()},
                      {"output_cap", config.output_cap},
                      {"keep_spill_dir", config.keep_spill_dir},
                      {"spill_budget_bytes", config.spill_budget_bytes},
                      {"scrub",
                       {{"name_fragments", config.scrub.name_fragments},
                        {"name_words", config.scrub.name_words},
                        {"keep", config.scrub.keep},
                        {"strip_url_passwords", config.scrub.strip_url_passwords}}}};
  if (config.cwd) json["cwd"] = config.cwd->string();
  if (config.spill_parent) json["spill_parent"] = config.spill_parent->string();
  return json;
}

/// One remote_executor_host in the lane's namespace: started by the
/// constructor (std::invalid_argument when it refuses the configuration, as
/// the executor would), SIGTERMed and reaped by the destructor.
class remote_server_process {
 public:
  explicit remote_server_process(const bashexec::executor_config& config) {
    const remote_host* host = lane_host();
    std::optional<long> holder;
    if (host) {
      holder = host->holder_pid();
      REQUIRE(holder);
    }
    const std::string address = host ? host->address() : "127.0.0.1";
    int out[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    const std::string target = holder ? std::to_string(*holder) : std::string();
    const std::string json = config_json(config).dump();
    const std::string token_file = lane_token_file().string();
    const char* in_namespace[] = {"/usr/bin/nsenter", "-t", target.c_str(), "-n", "--", BASHEXEC_REMOTE_EXECUTOR_HOST,
                                  address.c_str(), token_file.c_str(), json.c_str(), nullptr};
    const char* here[] = {BASHEXEC_REMOTE_EXECUTOR_HOST, address.c_str(), token_file.c_str(), json.c_str(), nullptr};
    const char* const* argv = holder ? in_namespace : here;
    const int spawned = ::posix_spawn(&pid_, argv[0], &actions, nullptr, const_cast<char* const*>(argv), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    REQUIRE(spawned == 0);
    std::string line;
    char c = 0;
    while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
    ::close(out[0]);
    if (line.starts_with("invalid_argument ")) {
      reap();
      throw std::invalid_argument(line.substr(17));
    }
    INFO("remote_executor_host said: " << line);
    REQUIRE(line.starts_with("port "));
    url_ = "http://" + address + ":" + line.substr(5) + "/exec/v1";
  }

  remote_server_process(const remote_server_process&) = delete;
  remote_server_process& operator=(const remote_server_process&) = delete;

  ~remote_server_process() {
    if (pid_ > 0) ::kill(pid_, SIGTERM);
    reap();
  }

  const std::string& url() const { return url_; }

 private:
  void reap() {
    if (pid_ <= 0) return;
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }

  pid_t pid_ = -1;
  std::string url_;
};

/// The client's configuration for a server of the lane.
inline bashexec::remote_executor_config lane_client(const std::string& url, const bashexec::executor_config& config) {
  bashexec::remote_executor_config client;
  client.url = url;
  client.token = lane_token();
  client.error_sink = config.error_sink;
  return client;
}

}  // namespace test_support

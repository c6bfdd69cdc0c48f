// remote_host_support: a "remote host" the network tests build for
// themselves — a network namespace joined to the host's by a veth pair, with
// real HTTP servers in it (port 80, and 443 for CONNECT tunnels) — so that no
// test ever sends traffic to an address outside the namespaces it made. Each
// server appends a line per request it serves to a log (its request line and
// Host header), so a test can prove that a bypass attempt never arrived and
// what a tunnel carried. tests/remote_host.sh builds and removes the host.
//
// Two ways to have one:
//   - as root, each `remote_host` builds a host of its own and removes it;
//   - with BASHEXEC_REMOTE_HOST=<address> (and BASHEXEC_REMOTE_HOST_RANGE,
//     BASHEXEC_REMOTE_HOST_LOG) set, it uses that host, built beforehand by
//     root (the CTest fixture of the unprivileged rerun, tests/extra_tests.cmake),
//     and leaves it standing. No privilege is needed then: the proxy reaches
//     the host over the veth pair like any address, and the log is
//     world-readable.
// `remote_host::unavailable()` says why neither can be had.
#pragma once

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#ifndef BASHEXEC_REMOTE_HOST_SCRIPT
#error "BASHEXEC_REMOTE_HOST_SCRIPT (the path of tests/remote_host.sh) is set by tests/extra_tests.cmake"
#endif

namespace test_support {

class remote_host {
 public:
  /// Why no remote host can be had here; empty when it can.
  static std::optional<std::string> unavailable() {
    if (given("BASHEXEC_REMOTE_HOST")) return std::nullopt;
    if (::geteuid() != 0)
      return "the remote host needs root (a network namespace and a veth pair); BASHEXEC_REMOTE_HOST names none "
             "built beforehand";
    if (::access("/usr/sbin/ip", X_OK) != 0) return "iproute2's ip is not installed";
    if (::access("/usr/bin/python3", X_OK) != 0) return "/usr/bin/python3 (the remote host's servers) is missing";
    return std::nullopt;
  }

  remote_host() {
    if (auto existing = given("BASHEXEC_REMOTE_HOST")) {
      address_ = *existing;
      auto range = given("BASHEXEC_REMOTE_HOST_RANGE");
      auto log = given("BASHEXEC_REMOTE_HOST_LOG");
      if (!range || !log) FAIL("BASHEXEC_REMOTE_HOST needs BASHEXEC_REMOTE_HOST_RANGE and BASHEXEC_REMOTE_HOST_LOG");
      range_ = *range;
      log_ = *log;
    } else {
      // A /24 of its own: start from one the pid picks and take the next
      // while the script says another test's host has it (exit 3).
      const long id = static_cast<long>(::getpid());
      name_ = "bxrh" + std::to_string(id);
      log_ = "/var/tmp/bashexec-remote-" + name_ + "/requests.log";
      int status = -1;
      for (long attempt = 0; attempt < 200; ++attempt) {
        const std::string prefix = "10.203." + std::to_string(20 + (id + attempt) % 200);
        address_ = prefix + ".2";
        range_ = prefix + ".0/24";
        const std::string setup = "sh " BASHEXEC_REMOTE_HOST_SCRIPT " setup " + name_ + " " + prefix;
        status = std::system(setup.c_str());
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 3) break;
      }
      INFO("remote_host.sh setup " << name_ << " " << range_);
      REQUIRE(status == 0);
    }
    for (int port : {80, 443}) {
      INFO("the remote host " << address_ << " answers on port " << port);
      REQUIRE(wait_listening(port));
    }
    std::error_code missing;
    log_start_ = std::filesystem::file_size(log_, missing);
    INFO("the remote host's log " << log_);
    REQUIRE(!missing);
  }

  remote_host(const remote_host&) = delete;
  remote_host& operator=(const remote_host&) = delete;

  ~remote_host() {
    if (!name_.empty()) std::system(("sh " BASHEXEC_REMOTE_HOST_SCRIPT " teardown " + name_).c_str());
  }

  /// The remote host's address on the veth pair.
  const std::string& address() const { return address_; }
  /// Its range, for `allowed_ranges`.
  const std::string& range() const { return range_; }

  /// The process that holds its network namespace (`nsenter -t PID -n`
  /// runs a program there); empty for a host built beforehand.
  std::optional<long> holder_pid() const {
    if (name_.empty()) return std::nullopt;
    std::ifstream in("/var/tmp/bashexec-remote-" + name_ + "/pid.holder");
    long pid = 0;
    if (!(in >> pid) || pid <= 0) return std::nullopt;
    return pid;
  }

  /// The request line of every request the servers have seen since this
  /// object was made, one per line: "<port> <request line>".
  std::string requests() const {
    std::istringstream lines(log_since_start());
    std::string line, text;
    while (std::getline(lines, line)) text += line.substr(0, line.rfind(" | Host: ")) + "\n";
    return text;
  }

  /// The same with each request's Host header: "<port> <request line> | Host: <host>".
  std::string requests_with_hosts() const { return log_since_start(); }

 private:
  static std::optional<std::string> given(const char* variable) {
    const char* value = std::getenv(variable);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  }

  // A shared host's log holds the earlier cases' requests too.
  std::string log_since_start() const {
    std::ifstream in(log_);
    in.seekg(static_cast<std::streamoff>(log_start_));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  bool wait_listening(int port) const {
    for (int attempt = 0; attempt < 100; ++attempt) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in target{};
      target.sin_family = AF_INET;
      target.sin_port = htons(static_cast<std::uint16_t>(port));
      ::inet_pton(AF_INET, address_.c_str(), &target.sin_addr);
      const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof target) == 0;
      ::close(fd);
      if (up) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::string name_;  // empty: a host built beforehand, not ours to remove
  std::string address_, range_;
  std::filesystem::path log_;
  std::uintmax_t log_start_ = 0;
};

}  // namespace test_support

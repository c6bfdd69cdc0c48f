// remote_host_support: a "remote host" the network tests build for
// themselves — a network namespace joined to the host's by a veth pair, with
// real HTTP servers in it (port 80, and 443 for CONNECT tunnels) — so that no
// test ever sends traffic to an address outside the namespaces it made. Each
// server appends the request line of every request it serves to a log, so a
// test can prove that a bypass attempt never arrived. Needs root (ip netns,
// a veth pair); `remote_host::unavailable()` says why not otherwise.
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
#include <unistd.h>

#include <catch2/catch.hpp>

namespace test_support {

class remote_host {
 public:
  /// Why no remote host can be built here; empty when it can.
  static std::optional<std::string> unavailable() {
    if (::geteuid() != 0) return "the remote host needs root (a network namespace and a veth pair)";
    if (::access("/usr/sbin/ip", X_OK) != 0) return "iproute2's ip is not installed";
    if (::access("/usr/bin/python3", X_OK) != 0) return "/usr/bin/python3 (the remote host's servers) is missing";
    return std::nullopt;
  }

  remote_host() {
    const long id = static_cast<long>(::getpid());
    subnet_ = std::to_string(20 + id % 200);
    namespace_ = "bxrh" + std::to_string(id);
    host_end_ = "bxh" + std::to_string(id);
    remote_end_ = "bxr" + std::to_string(id);
    dir_ = std::filesystem::temp_directory_path() / ("bashexec-remote-" + std::to_string(id));
    std::filesystem::create_directories(dir_ / "www");
    std::ofstream(dir_ / "www" / "hello.txt") << "hello from the remote host\n";
    std::ofstream(dir_ / "server.py") << server_script;
    run("ip netns add " + namespace_ + " && ip link add " + host_end_ + " type veth peer name " + remote_end_ +
        " && ip link set " + remote_end_ + " netns " + namespace_ + " && ip addr add " + prefix() + "1/24 dev " +
        host_end_ + " && ip link set " + host_end_ + " up && ip -n " + namespace_ + " addr add " + prefix() +
        "2/24 dev " + remote_end_ + " && ip -n " + namespace_ + " link set " + remote_end_ + " up && ip -n " +
        namespace_ + " link set lo up");
    for (const char* port : {"80", "443"})
      run("ip netns exec " + namespace_ + " /usr/bin/python3 " + (dir_ / "server.py").string() + " " + address() +
          " " + port + " " + (dir_ / "www").string() + " " + (dir_ / "requests.log").string() + " " +
          (dir_ / (std::string("pid.") + port)).string() + " </dev/null >/dev/null 2>&1 &");
    for (int port : {80, 443}) REQUIRE(wait_listening(port));
  }

  remote_host(const remote_host&) = delete;
  remote_host& operator=(const remote_host&) = delete;

  ~remote_host() {
    std::system(("for f in " + dir_.string() + "/pid.*; do kill \"$(cat \"$f\")\" 2>/dev/null; done; ip link del " +
                 host_end_ + " 2>/dev/null; ip netns del " + namespace_ + " 2>/dev/null")
                    .c_str());
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  /// The remote host's address on the veth pair.
  std::string address() const { return prefix() + "2"; }
  /// Its /24, for `allowed_ranges`.
  std::string range() const { return prefix() + "0/24"; }

  /// Every request line the servers have seen, one per line.
  std::string requests() const {
    std::ifstream in(dir_ / "requests.log");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  static constexpr const char* server_script = R"(import sys, http.server, functools, os
address, port, root, log, pidfile = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
class Handler(http.server.SimpleHTTPRequestHandler):
    def log_request(self, code='-', size='-'):
        with open(log, 'a') as f:
            f.write(f'{port} {self.requestline}\n')
server = http.server.ThreadingHTTPServer((address, port), functools.partial(Handler, directory=root))
with open(pidfile, 'w') as f:
    f.write(str(os.getpid()))
server.serve_forever()
)";

  std::string prefix() const { return "10.203." + subnet_ + "."; }

  static void run(const std::string& command) {
    INFO(command);
    REQUIRE(std::system(command.c_str()) == 0);
  }

  bool wait_listening(int port) const {
    for (int attempt = 0; attempt < 100; ++attempt) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in target{};
      target.sin_family = AF_INET;
      target.sin_port = htons(static_cast<std::uint16_t>(port));
      ::inet_pton(AF_INET, address().c_str(), &target.sin_addr);
      const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof target) == 0;
      ::close(fd);
      if (up) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::string subnet_, namespace_, host_end_, remote_end_;
  std::filesystem::path dir_;
};

}  // namespace test_support

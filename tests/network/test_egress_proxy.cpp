// The egress proxy over real sockets (network/egress_proxy.hpp;
// docs/contract.md "Beyond", network by name; docs/network.md). The test
// starts its own upstreams — a small HTTP server and a TCP echo server — on
// 127.0.0.1 ephemeral ports, and each proxy on a listener it made itself.
// Names (files.test, echo.test, ...) resolve through host_map only
// (system_dns = false): no packet goes anywhere but 127.0.0.1. The allowed
// cases list 127.0.0.0/8 in allowed_ranges because the upstreams are on
// loopback; the cases without it prove the private-address refusal.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/asio/detached.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <bashexec/network/egress_proxy.hpp>

using namespace bashexec;
using namespace bashexec::network;
using namespace std::chrono_literals;
namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

namespace {

// --- plain blocking sockets for the test's clients ---------------------------

/// A TCP socket listening on 127.0.0.1 at an ephemeral port.
std::pair<unique_fd, std::uint16_t> listen_on_loopback() {
  unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(fd);
  sockaddr_in where{};
  where.sin_family = AF_INET;
  where.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&where), sizeof where) == 0);
  REQUIRE(::listen(fd.get(), 128) == 0);
  socklen_t size = sizeof where;
  REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&where), &size) == 0);
  return {std::move(fd), ntohs(where.sin_port)};
}

/// A client connected to 127.0.0.1:port whose reads give up after `bound`
/// (a hang fails the test instead of blocking it).
unique_fd connect_to(std::uint16_t port, std::chrono::milliseconds bound = 10s) {
  unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(fd);
  timeval timeout{static_cast<time_t>(bound.count() / 1000), static_cast<suseconds_t>(bound.count() % 1000 * 1000)};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in where{};
  where.sin_family = AF_INET;
  where.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  where.sin_port = htons(port);
  REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr*>(&where), sizeof where) == 0);
  return fd;
}

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    auto sent = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(sent));
  }
  return true;
}

/// Reads until `size` bytes arrived, end of stream, or the read timeout.
std::string receive_exactly(int fd, std::size_t size) {
  std::string received;
  char chunk[16384];
  while (received.size() < size) {
    auto got = ::recv(fd, chunk, std::min(sizeof chunk, size - received.size()), 0);
    if (got <= 0) break;
    received.append(chunk, static_cast<std::size_t>(got));
  }
  return received;
}

/// Reads to end of stream (or the read timeout).
std::string receive_all(int fd) {
  std::string received;
  char chunk[16384];
  for (;;) {
    auto got = ::recv(fd, chunk, sizeof chunk, 0);
    if (got <= 0) break;
    received.append(chunk, static_cast<std::size_t>(got));
  }
  return received;
}

/// Reads up to and including the first "\r\n\r\n".
std::string receive_header(int fd) {
  std::string received;
  char c;
  while (!received.ends_with("\r\n\r\n") && ::recv(fd, &c, 1, 0) == 1) received += c;
  return received;
}

/// Whether the peer closed: a read returns end of stream (not the timeout).
bool sees_end_of_stream(int fd) {
  char c;
  for (;;) {
    auto got = ::recv(fd, &c, 1, 0);
    if (got == 0) return true;
    if (got < 0) return errno == ECONNRESET;
  }
}

struct http_answer {
  int status = 0;
  std::string header;
  std::string body;
};

http_answer parse_answer(const std::string& raw) {
  http_answer answer;
  auto end = raw.find("\r\n\r\n");
  if (raw.size() < 12 || end == std::string::npos) return answer;
  answer.status = std::stoi(raw.substr(9, 3));
  answer.header = raw.substr(0, end + 4);
  answer.body = raw.substr(end + 4);
  return answer;
}

/// Sends `request` to the proxy at `port` and reads the whole answer.
http_answer ask_proxy(std::uint16_t port, std::string_view request) {
  auto client = connect_to(port);
  REQUIRE(send_all(client.get(), request));
  return parse_answer(receive_all(client.get()));
}

// --- the upstreams: an HTTP server and an echo server on 127.0.0.1 -----------

std::string big_body() {
  std::string body(1 << 20, '\0');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 26);
  return body;
}

class upstreams {
 public:
  upstreams() : http_(io_), echo_(io_) {
    for (auto* acceptor : {&http_, &echo_}) {
      acceptor->open(tcp::v4());
      acceptor->bind({net::ip::make_address("127.0.0.1"), 0});
      acceptor->listen();
    }
    http_port = http_.local_endpoint().port();
    echo_port = echo_.local_endpoint().port();
    net::co_spawn(io_, serve_http(), net::detached);
    net::co_spawn(io_, serve_echo(), net::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~upstreams() {
    net::post(io_, [this] {
      boost::system::error_code ignored;
      http_.close(ignored);
      echo_.close(ignored);
    });
    thread_.join();
  }

  /// Waits (bounded) until `count` echo connections have closed on the echo side.
  bool echo_closed_at_least(int count, std::chrono::milliseconds bound = 10s) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, bound, [&] { return echo_closed_ >= count; });
  }
  int echo_closed() {
    std::lock_guard lock(mutex_);
    return echo_closed_;
  }

  std::uint16_t http_port = 0;
  std::uint16_t echo_port = 0;

 private:
  net::awaitable<void> serve_http() {
    for (;;) {
      boost::system::error_code ec;
      auto socket = co_await http_.async_accept(net::redirect_error(net::use_awaitable, ec));
      if (ec) co_return;
      net::co_spawn(io_, answer_http(std::move(socket)), net::detached);
    }
  }

  static net::awaitable<void> answer_http(tcp::socket socket) {
    boost::system::error_code ec;
    boost::beast::flat_buffer buffer;
    http::request<http::string_body> request;
    co_await http::async_read(socket, buffer, request, net::redirect_error(net::use_awaitable, ec));
    if (ec) co_return;
    http::response<http::string_body> response{http::status::ok, 11};
    response.set(http::field::content_type, "text/plain");
    response.set(http::field::connection, "keep-alive, x-upstream-hop");
    response.set("X-Upstream-Hop", "must not reach the client");
    std::string target(request.target());
    if (target == "/big") {
      response.body() = big_body();
    } else if (target.starts_with("/headers")) {
      std::string dump = "method=" + std::string(request.method_string()) + "\ntarget=" + target + "\n";
      for (const auto& field : request) dump += std::string(field.name_string()) + ": " + std::string(field.value()) + "\n";
      dump += "body=" + request.body() + "\n";
      response.body() = dump;
    } else {
      response.body() = "hello from files.test\n";
    }
    response.prepare_payload();
    co_await http::async_write(socket, response, net::redirect_error(net::use_awaitable, ec));
    socket.shutdown(tcp::socket::shutdown_send, ec);
  }

  net::awaitable<void> serve_echo() {
    for (;;) {
      boost::system::error_code ec;
      auto socket = co_await echo_.async_accept(net::redirect_error(net::use_awaitable, ec));
      if (ec) co_return;
      net::co_spawn(io_, echo(std::move(socket)), net::detached);
    }
  }

  net::awaitable<void> echo(tcp::socket socket) {
    std::array<char, 16384> chunk;
    boost::system::error_code ec;
    for (;;) {
      auto got = co_await socket.async_read_some(net::buffer(chunk), net::redirect_error(net::use_awaitable, ec));
      if (ec) break;
      co_await net::async_write(socket, net::buffer(chunk.data(), got), net::redirect_error(net::use_awaitable, ec));
      if (ec) break;
    }
    socket.close(ec);
    std::lock_guard lock(mutex_);
    ++echo_closed_;
    changed_.notify_all();
  }

  net::io_context io_;
  tcp::acceptor http_;
  tcp::acceptor echo_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int echo_closed_ = 0;
};

upstreams& servers() {
  static upstreams instance;
  return instance;
}

/// The policy of most cases: files.test and echo.test (and *.allowed.test)
/// allowed and mapped to 127.0.0.1, loopback ranged, no DNS.
network_policy loopback_policy() {
  network_policy policy;
  policy.allowed_domains = {"files.test", "echo.test", "*.allowed.test", "private.test", "meta.test", "nowhere.test"};
  policy.denied_domains = {"secret.allowed.test"};
  policy.allowed_ranges = {"127.0.0.0/8"};
  policy.host_map = {{"files.test", "127.0.0.1"},   {"echo.test", "127.0.0.1"},
                     {"a.allowed.test", "127.0.0.1"}, {"secret.allowed.test", "127.0.0.1"},
                     {"private.test", "127.0.0.1"}, {"meta.test", "169.254.169.254"}};
  policy.system_dns = false;
  return policy;
}

/// A proxy on a listener of its own.
struct proxy_under_test {
  explicit proxy_under_test(network_policy policy) {
    auto [listener, listening_port] = listen_on_loopback();
    port = listening_port;
    proxy = std::make_unique<egress_proxy>(std::move(listener), std::move(policy));
  }
  std::uint16_t port = 0;
  std::unique_ptr<egress_proxy> proxy;
};

std::string get_request(std::string_view host, std::uint16_t port, std::string_view path,
                        std::string_view extra_fields = "") {
  return fmt::format("GET http://{}:{}{} HTTP/1.1\r\nHost: {}:{}\r\n{}\r\n", host, port, path, host, port, extra_fields);
}

std::string connect_request(std::string_view host, std::uint16_t port) {
  return fmt::format("CONNECT {}:{} HTTP/1.1\r\nHost: {}:{}\r\n\r\n", host, port, host, port);
}

/// The SOCKS5 greeting (no auth) and a CONNECT to a domain name.
std::string socks_connect(std::string_view name, std::uint16_t port) {
  std::string request{"\x05\x01\x00", 3};
  request += std::string{"\x05\x01\x00\x03", 4};
  request += static_cast<char>(name.size());
  request += name;
  request += static_cast<char>(port >> 8);
  request += static_cast<char>(port & 0xff);
  return request;
}

/// Polls `condition` every 10 ms until it holds or `bound` passes.
template <class Condition>
bool eventually(Condition condition, std::chrono::milliseconds bound = 10s) {
  auto end = std::chrono::steady_clock::now() + bound;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

std::set<std::string> open_descriptors() {
  std::set<std::string> open;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(entry.path(), ec);
    open.insert(entry.path().filename().string() + " -> " + target.string());
  }
  return open;
}

}  // namespace

TEST_CASE("an absolute-form GET to an allowed name is relayed and its bytes counted", "[network][proxy]") {
  proxy_under_test under(loopback_policy());
  auto answer = ask_proxy(under.port, get_request("files.test", servers().http_port, "/hello"));
  INFO(answer.header + answer.body);
  CHECK(answer.status == 200);
  CHECK(answer.body == "hello from files.test\n");
  CHECK(answer.header.find("X-Upstream-Hop") == std::string::npos);
  auto report = under.proxy->snapshot();
  REQUIRE(report.attempts.size() == 1);
  const auto& attempt = report.attempts[0];
  CHECK(attempt.host == "files.test");
  CHECK(attempt.port == servers().http_port);
  CHECK(attempt.method == "GET");
  CHECK(attempt.decision == network_decision::allowed);
  CHECK(attempt.reason == network_block_reason::none);
  CHECK(attempt.address == "127.0.0.1");
  CHECK(attempt.bytes_up > 0);
  CHECK(attempt.bytes_down >= answer.body.size());
  CHECK(network_marker(report) == "");
}

TEST_CASE("a forwarded request is in origin-form without hop-by-hop fields", "[network][proxy]") {
  proxy_under_test under(loopback_policy());
  auto port = servers().http_port;
  auto request = fmt::format(
      "POST http://FILES.test:{}/headers?q=1 HTTP/1.1\r\nHost: files.test:{}\r\nProxy-Connection: keep-alive\r\n"
      "Proxy-Authorization: Basic c2VjcmV0\r\nConnection: keep-alive, X-Drop-Me\r\nX-Drop-Me: 1\r\n"
      "X-Keep-Me: 2\r\nContent-Length: 5\r\n\r\nhello",
      port, port);
  auto answer = ask_proxy(under.port, request);
  INFO(answer.header + answer.body);
  REQUIRE(answer.status == 200);
  CHECK(answer.body.find("method=POST\n") != std::string::npos);
  CHECK(answer.body.find("target=/headers?q=1\n") != std::string::npos);
  CHECK(answer.body.find(fmt::format("Host: files.test:{}\n", port)) != std::string::npos);
  CHECK(answer.body.find("X-Keep-Me: 2\n") != std::string::npos);
  CHECK(answer.body.find("body=hello\n") != std::string::npos);
  CHECK(answer.body.find("Connection: close\n") != std::string::npos);
  for (auto dropped : {"Proxy-Connection", "Proxy-Authorization", "X-Drop-Me", "keep-alive"}) {
    INFO(dropped);
    CHECK(answer.body.find(dropped) == std::string::npos);
  }
}

TEST_CASE("a large response is streamed through whole", "[network][proxy]") {
  proxy_under_test under(loopback_policy());
  auto answer = ask_proxy(under.port, get_request("files.test", servers().http_port, "/big"));
  CHECK(answer.status == 200);
  CHECK(answer.body.size() == big_body().size());
  CHECK(answer.body == big_body());
  auto report = under.proxy->snapshot();
  REQUIRE(report.attempts.size() == 1);
  CHECK(report.attempts[0].bytes_down > big_body().size());
}

TEST_CASE("CONNECT to an allowed name tunnels opaque bytes both ways, counted as they flow", "[network][proxy]") {
  proxy_under_test under(loopback_policy());
  auto client = connect_to(under.port);
  REQUIRE(send_all(client.get(), connect_request("echo.test", servers().echo_port)));
  CHECK(receive_header(client.get()) == "HTTP/1.1 200 Connection established\r\n\r\n");
  // Not HTTP, not TLS: a tunnel is opaque.
  const std::string payload{"\x16\x03\x01 anything at all \x00\xff", 22};
  REQUIRE(send_all(client.get(), payload));
  CHECK(receive_exactly(client.get(), payload.size()) == payload);
  CHECK(eventually([&] {
    auto report = under.proxy->snapshot();
    return report.attempts.size() == 1 && report.attempts[0].bytes_up == payload.size() &&
           report.attempts[0].bytes_down == payload.size();
  }));
  auto attempt = under.proxy->snapshot().attempts.at(0);
  CHECK(attempt.method == "CONNECT");
  CHECK(attempt.host == "echo.test");
  CHECK(attempt.address == "127.0.0.1");
  CHECK(attempt.decision == network_decision::allowed);
}

TEST_CASE("SOCKS5 with an allowed domain name tunnels, and a name not allowed is refused with 0x02", "[network][proxy]") {
  proxy_under_test under(loopback_policy());
  {
    auto client = connect_to(under.port);
    REQUIRE(send_all(client.get(), socks_connect("echo.test", servers().echo_port)));
    CHECK(receive_exactly(client.get(), 2) == std::string("\x05\x00", 2));
    auto reply = receive_exactly(client.get(), 10);
    REQUIRE(reply.size() == 10);
    CHECK(reply[1] == 0x00);
    REQUIRE(send_all(client.get(), "ping through socks"));
    CHECK(receive_exactly(client.get(), 18) == "ping through socks");
  }
  {
    auto client = connect_to(under.port);
    REQUIRE(send_all(client.get(), socks_connect("pypi.org", 443)));
    CHECK(receive_exactly(client.get(), 2) == std::string("\x05\x00", 2));
    auto reply = receive_exactly(client.get(), 10);
    REQUIRE(reply.size() == 10);
    CHECK(reply[1] == 0x02);
    CHECK(sees_end_of_stream(client.get()));
  }
  {
    // An IPv4 literal outside the allowed ranges: refused before any connect.
    auto client = connect_to(under.port);
    std::string request{"\x05\x01\x00\x05\x01\x00\x01\x08\x08\x08\x08\x01\xbb", 13};
    REQUIRE(send_all(client.get(), request));
    CHECK(receive_exactly(client.get(), 2) == std::string("\x05\x00", 2));
    auto reply = receive_exactly(client.get(), 10);
    REQUIRE(reply.size() == 10);
    CHECK(reply[1] == 0x02);
  }
  {
    // BIND is not served.
    auto client = connect_to(under.port);
    std::string request = socks_connect("echo.test", servers().echo_port);
    request[4] = 0x02;
    REQUIRE(send_all(client.get(), request));
    CHECK(receive_exactly(client.get(), 2) == std::string("\x05\x00", 2));
    auto reply = receive_exactly(client.get(), 10);
    REQUIRE(reply.size() == 10);
    CHECK(reply[1] == 0x07);
  }
  auto report = under.proxy->snapshot();
  REQUIRE(report.attempts.size() == 4);
  CHECK(report.attempts[0].decision == network_decision::allowed);
  CHECK(report.attempts[0].method == "SOCKS");
  CHECK(report.attempts[1].host == "pypi.org");
  CHECK(report.attempts[1].reason == network_block_reason::not_allowed);
  CHECK(report.attempts[2].host == "8.8.8.8");
  CHECK(report.attempts[2].reason == network_block_reason::not_allowed);
  CHECK(report.attempts[3].reason == network_block_reason::bad_request);
  CHECK(network_marker(report) ==
        fmt::format("[network: blocked pypi.org:443 (not in allowed domains), 8.8.8.8:443 (not in allowed domains), "
                    "echo.test:{} (bad request)]",
                    servers().echo_port));
}

TEST_CASE("refusals say why, name host:port, and are recorded with their reason", "[network][proxy]") {
  auto port = servers().http_port;
  struct refusal {
    std::string request;
    int status;
    std::string body;
    network_block_reason reason;
  };
  std::vector<refusal> cases{
      {get_request("other.test", port, "/"), 403,
       fmt::format("network policy blocked other.test:{} (not in allowed domains)\n", port),
       network_block_reason::not_allowed},
      {get_request("secret.allowed.test", port, "/"), 403,
       fmt::format("network policy blocked secret.allowed.test:{} (denied domain)\n", port),
       network_block_reason::denied_domain},
      {get_request("meta.test", port, "/latest/meta-data/"), 403,
       fmt::format("network policy blocked meta.test:{} (private address)\n", port),
       network_block_reason::private_address},
      {get_request("nowhere.test", port, "/"), 403,
       fmt::format("network policy blocked nowhere.test:{} (could not resolve)\n", port),
       network_block_reason::resolve_failed},
      {connect_request("169.254.169.254", 80), 403, "network policy blocked 169.254.169.254:80 (private address)\n",
       network_block_reason::private_address},
      {connect_request("8.8.8.8", 443), 403, "network policy blocked 8.8.8.8:443 (not in allowed domains)\n",
       network_block_reason::not_allowed},
      {fmt::format("GET http://files.test:{}/ HTTP/1.1\r\nHost: other.test:{}\r\n\r\n", port, port), 403,
       fmt::format("network policy blocked files.test:{} (bad request: Host header does not match the request target)\n",
                   port),
       network_block_reason::bad_request},
      {"GET /hello HTTP/1.1\r\nHost: files.test\r\n\r\n", 400, "", network_block_reason::bad_request},
  };
  proxy_under_test under(loopback_policy());
  for (const auto& each : cases) {
    INFO(each.request);
    auto answer = ask_proxy(under.port, each.request);
    CHECK(answer.status == each.status);
    if (!each.body.empty()) CHECK(answer.body == each.body);
    CHECK(answer.header.find("Connection: close") != std::string::npos);
    CHECK(answer.header.find("Content-Type: text/plain") != std::string::npos);
  }
  auto report = under.proxy->snapshot();
  REQUIRE(report.attempts.size() == cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO(i);
    CHECK(report.attempts[i].decision == network_decision::blocked);
    CHECK(report.attempts[i].reason == cases[i].reason);
    CHECK(report.attempts[i].address == "");
    CHECK(report.attempts[i].bytes_up == 0);
  }
}

TEST_CASE("without the loopback range a name mapped to 127.0.0.1 is a private address", "[network][proxy]") {
  auto policy = loopback_policy();
  policy.allowed_ranges.clear();
  proxy_under_test under(policy);
  auto port = servers().http_port;
  auto answer = ask_proxy(under.port, get_request("private.test", port, "/hello"));
  CHECK(answer.status == 403);
  CHECK(answer.body == fmt::format("network policy blocked private.test:{} (private address)\n", port));
  answer = ask_proxy(under.port, get_request("127.0.0.1", port, "/hello"));
  CHECK(answer.status == 403);
  CHECK(answer.body == fmt::format("network policy blocked 127.0.0.1:{} (private address)\n", port));
  auto report = under.proxy->snapshot();
  REQUIRE(report.attempts.size() == 2);
  CHECK(report.attempts[0].reason == network_block_reason::private_address);
  CHECK(report.attempts[1].reason == network_block_reason::private_address);
}

TEST_CASE("an IP literal inside an allowed range is served", "[network][proxy]") {
  proxy_under_test under(loopback_policy());
  auto answer = ask_proxy(under.port, get_request("127.0.0.1", servers().http_port, "/hello"));
  CHECK(answer.status == 200);
  CHECK(answer.body == "hello from files.test\n");
}

TEST_CASE("read-only serves GET, HEAD and OPTIONS and refuses other methods, CONNECT and SOCKS", "[network][proxy]") {
  auto policy = loopback_policy();
  policy.methods = network_methods::read_only;
  proxy_under_test under(policy);
  auto port = servers().http_port;
  CHECK(ask_proxy(under.port, get_request("files.test", port, "/hello")).body == "hello from files.test\n");
  auto head = ask_proxy(under.port, fmt::format("HEAD http://files.test:{}/hello HTTP/1.1\r\n\r\n", port));
  CHECK(head.status == 200);
  CHECK(head.body == "");
  auto post = ask_proxy(under.port,
                       fmt::format("POST http://files.test:{}/hello HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi", port));
  CHECK(post.status == 403);
  CHECK(post.body == fmt::format("network policy blocked files.test:{} (method not allowed)\n", port));
  auto tunnel = ask_proxy(under.port, connect_request("echo.test", servers().echo_port));
  CHECK(tunnel.status == 403);
  auto client = connect_to(under.port);
  REQUIRE(send_all(client.get(), socks_connect("echo.test", servers().echo_port)));
  auto reply = receive_exactly(client.get(), 12);
  REQUIRE(reply.size() == 12);
  CHECK(reply[3] == 0x02);
  auto report = under.proxy->snapshot();
  REQUIRE(report.attempts.size() == 5);
  std::vector<std::string> methods;
  for (const auto& attempt : report.attempts) methods.push_back(attempt.method);
  CHECK(methods == std::vector<std::string>{"GET", "HEAD", "POST", "CONNECT", "SOCKS"});
  CHECK(report.attempts[2].reason == network_block_reason::method_not_allowed);
  CHECK(report.attempts[3].reason == network_block_reason::method_not_allowed);
  CHECK(report.attempts[4].reason == network_block_reason::method_not_allowed);
}

TEST_CASE("a header over max_header_bytes is answered 431", "[network][proxy]") {
  proxy_under_test under(loopback_policy());
  std::string request = get_request("files.test", servers().http_port, "/hello",
                                    "X-Padding: " + std::string(100 * 1024, 'p') + "\r\n");
  auto answer = ask_proxy(under.port, request);
  CHECK(answer.status == 431);
  CHECK(answer.body == "network policy blocked a request (limit reached: a header over 16384 bytes)\n");
  auto report = under.proxy->snapshot();
  REQUIRE(report.attempts.size() == 1);
  CHECK(report.attempts[0].reason == network_block_reason::limit);
  CHECK(network_marker(report) == "[network: blocked a request (limit reached)]");
}

TEST_CASE("a connection past max_connections is refused at once while the others keep working", "[network][proxy]") {
  auto policy = loopback_policy();
  policy.limits.max_connections = 2;
  proxy_under_test under(policy);
  std::vector<unique_fd> tunnels;
  for (int i = 0; i < 2; ++i) {
    tunnels.push_back(connect_to(under.port));
    REQUIRE(send_all(tunnels.back().get(), connect_request("echo.test", servers().echo_port)));
    REQUIRE(receive_header(tunnels.back().get()) == "HTTP/1.1 200 Connection established\r\n\r\n");
  }
  auto refused = ask_proxy(under.port, get_request("files.test", servers().http_port, "/hello"));
  CHECK(refused.status == 403);
  CHECK(refused.body == fmt::format("network policy blocked files.test:{} (limit reached)\n", servers().http_port));
  auto client = connect_to(under.port);
  REQUIRE(send_all(client.get(), socks_connect("echo.test", servers().echo_port)));
  auto reply = receive_exactly(client.get(), 12);
  REQUIRE(reply.size() == 12);
  CHECK(reply[3] == 0x02);
  for (auto& tunnel : tunnels) {
    REQUIRE(send_all(tunnel.get(), "still here"));
    CHECK(receive_exactly(tunnel.get(), 10) == "still here");
  }
  auto report = under.proxy->snapshot();
  REQUIRE(report.attempts.size() == 4);
  CHECK(report.attempts[2].reason == network_block_reason::limit);
  CHECK(report.attempts[3].reason == network_block_reason::limit);
  // A slot that frees up is taken again.
  tunnels.pop_back();
  CHECK(eventually([&] {
    return ask_proxy(under.port, get_request("files.test", servers().http_port, "/hello")).status == 200;
  }));
}

TEST_CASE("a client dribbling its header does not delay another client's request", "[network][proxy]") {
  proxy_under_test under(loopback_policy());
  std::atomic<bool> dribbler_done{false};
  auto slow = connect_to(under.port);
  std::thread dribbler([&] {
    // One byte per 100 ms for 2 s: a header that never completes in that time.
    std::string prefix = fmt::format("GET http://files.test:{}/hello HTTP/1.1\r\nX-Slow: ", servers().http_port);
    for (std::size_t i = 0; i < 20 && i < prefix.size(); ++i) {
      send_all(slow.get(), prefix.substr(i, 1));
      std::this_thread::sleep_for(100ms);
    }
    dribbler_done = true;
  });
  std::this_thread::sleep_for(200ms);  // the dribbler has started; this is no assertion
  auto started = std::chrono::steady_clock::now();
  auto answer = ask_proxy(under.port, get_request("files.test", servers().http_port, "/hello"));
  auto took = std::chrono::steady_clock::now() - started;
  bool before_dribbler = !dribbler_done;
  dribbler.join();
  CHECK(answer.status == 200);
  CHECK(before_dribbler);
  CHECK(took < 1500ms);
}

TEST_CASE("a silent tunnel is closed after idle_timeout", "[network][proxy]") {
  auto policy = loopback_policy();
  policy.limits.idle_timeout = 300ms;
  proxy_under_test under(policy);
  int closed_before = servers().echo_closed();
  auto client = connect_to(under.port);
  REQUIRE(send_all(client.get(), connect_request("echo.test", servers().echo_port)));
  REQUIRE(receive_header(client.get()) == "HTTP/1.1 200 Connection established\r\n\r\n");
  auto started = std::chrono::steady_clock::now();
  CHECK(sees_end_of_stream(client.get()));
  CHECK(std::chrono::steady_clock::now() - started >= 250ms);
  CHECK(servers().echo_closed_at_least(closed_before + 1));
}

TEST_CASE("a client dribbling forever is cut at total_timeout", "[network][proxy]") {
  auto policy = loopback_policy();
  policy.limits.total_timeout = 500ms;
  proxy_under_test under(policy);
  auto slow = connect_to(under.port);
  auto started = std::chrono::steady_clock::now();
  bool cut = false;
  // One byte per 50 ms keeps the connection from ever being idle.
  while (!cut && std::chrono::steady_clock::now() - started < 10s) {
    if (!send_all(slow.get(), "x")) break;
    char c;
    auto got = ::recv(slow.get(), &c, 1, MSG_DONTWAIT);
    cut = got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    std::this_thread::sleep_for(50ms);
  }
  auto took = std::chrono::steady_clock::now() - started;
  CHECK(took >= 450ms);
  CHECK(took < 5s);
  CHECK(under.proxy->snapshot().attempts.empty());  // no request was ever made
}

TEST_CASE("an upstream that does not answer is given up after connect_timeout", "[network][proxy]") {
  // A listener with a full accept queue: the kernel drops further SYNs, so
  // a connect to it hangs (on 127.0.0.1, like everything here).
  unique_fd full(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in where{};
  where.sin_family = AF_INET;
  where.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(full.get(), reinterpret_cast<sockaddr*>(&where), sizeof where) == 0);
  REQUIRE(::listen(full.get(), 0) == 0);
  socklen_t size = sizeof where;
  REQUIRE(::getsockname(full.get(), reinterpret_cast<sockaddr*>(&where), &size) == 0);
  std::vector<unique_fd> fillers;
  bool hangs = false;
  for (int i = 0; i < 8 && !hangs; ++i) {
    fillers.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    ::connect(fillers.back().get(), reinterpret_cast<sockaddr*>(&where), sizeof where);
    pollfd probe{fillers.back().get(), POLLOUT, 0};
    hangs = ::poll(&probe, 1, 200) == 0;
  }
  if (!hangs) {
    WARN("this kernel completes connects to a full accept queue: skipped");
    return;
  }
  auto policy = loopback_policy();
  policy.limits.connect_timeout = 300ms;
  policy.host_map["slow.allowed.test"] = "127.0.0.1";
  proxy_under_test under(policy);
  auto started = std::chrono::steady_clock::now();
  auto answer = ask_proxy(under.port, connect_request("slow.allowed.test", ntohs(where.sin_port)));
  auto took = std::chrono::steady_clock::now() - started;
  CHECK(answer.status == 504);
  CHECK(answer.body == fmt::format("could not connect to slow.allowed.test:{}: no answer within 300 ms\n",
                                   ntohs(where.sin_port)));
  CHECK(took >= 250ms);
  CHECK(took < 5s);
  auto report = under.proxy->snapshot();
  REQUIRE(report.attempts.size() == 1);
  CHECK(report.attempts[0].decision == network_decision::allowed);
  CHECK(report.attempts[0].address == "");
}

TEST_CASE("close() mid-tunnel closes both sides and leaves no descriptor of the proxy open", "[network][proxy]") {
  servers();  // the upstreams' own descriptors come first
  int closed_before = servers().echo_closed();
  auto before = open_descriptors();
  {
    proxy_under_test under(loopback_policy());
    auto client = connect_to(under.port);
    REQUIRE(send_all(client.get(), connect_request("echo.test", servers().echo_port)));
    REQUIRE(receive_header(client.get()) == "HTTP/1.1 200 Connection established\r\n\r\n");
    REQUIRE(send_all(client.get(), "mid-tunnel"));
    REQUIRE(receive_exactly(client.get(), 10) == "mid-tunnel");
    under.proxy->close();
    CHECK(sees_end_of_stream(client.get()));
    CHECK(servers().echo_closed_at_least(closed_before + 1));
    under.proxy->close();  // idempotent
    CHECK(under.proxy->snapshot().attempts.size() == 1);
  }
  CHECK(open_descriptors() == before);
}

TEST_CASE("attempts are recorded once each, in order, and bounded", "[network][proxy]") {
  auto policy = loopback_policy();
  policy.limits.max_attempts_recorded = 3;
  proxy_under_test under(policy);
  auto port = servers().http_port;
  CHECK(ask_proxy(under.port, get_request("a1.test", port, "/")).status == 403);
  CHECK(ask_proxy(under.port, get_request("files.test", port, "/hello")).status == 200);
  CHECK(ask_proxy(under.port, connect_request("a3.test", 443)).status == 403);
  CHECK(ask_proxy(under.port, get_request("a4.test", port, "/")).status == 403);
  CHECK(ask_proxy(under.port, get_request("files.test", port, "/hello")).status == 200);
  auto report = under.proxy->snapshot();
  REQUIRE(report.attempts.size() == 3);
  CHECK(report.attempts_dropped == 2);
  CHECK(report.attempts[0].host == "a1.test");
  CHECK(report.attempts[1].host == "files.test");
  CHECK(report.attempts[1].decision == network_decision::allowed);
  CHECK(report.attempts[2].host == "a3.test");
  CHECK(report.attempts[2].method == "CONNECT");
  CHECK(network_marker(report) ==
        fmt::format("[network: blocked a1.test:{} (not in allowed domains), a3.test:443 (not in allowed domains)]", port));
}

TEST_CASE("an invalid policy or listener is refused at construction", "[network][proxy]") {
  auto policy = loopback_policy();
  policy.allowed_domains.push_back("*");
  auto [listener, port] = listen_on_loopback();
  (void)port;
  CHECK_THROWS_AS(egress_proxy(std::move(listener), policy), std::invalid_argument);
  int pipe_ends[2];
  REQUIRE(::pipe(pipe_ends) == 0);
  ::close(pipe_ends[1]);
  CHECK_THROWS_AS(egress_proxy(unique_fd(pipe_ends[0]), loopback_policy()), infrastructure_error);
}

TEST_CASE("the gateway opens a session that serves and reports", "[network][proxy]") {
  asio_egress_gateway gateway;
  egress_gateway& seam = gateway;
  auto [listener, port] = listen_on_loopback();
  auto session = seam.open(std::move(listener), loopback_policy());
  auto answer = ask_proxy(port, get_request("files.test", servers().http_port, "/hello"));
  CHECK(answer.status == 200);
  CHECK(session->snapshot().attempts.size() == 1);
  session->close();
}

// --- driven by real curl, which resolves nothing itself through a proxy ------

namespace {
/// Runs `command`, returning its stdout and exit status.
std::pair<std::string, int> run(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char chunk[4096];
  std::size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, pipe)) > 0) output.append(chunk, got);
  int status = ::pclose(pipe);
  return {output, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}
}  // namespace

TEST_CASE("curl through the proxy as an HTTP proxy and as a SOCKS5 proxy", "[network][proxy][curl]") {
  if (::access("/usr/bin/curl", X_OK) != 0) {
    WARN("no /usr/bin/curl: skipped");
    return;
  }
  proxy_under_test under(loopback_policy());
  auto port = servers().http_port;
  // env -i: no proxy variables from the environment; --noproxy '': none bypassed.
  auto curl = fmt::format("env -i /usr/bin/curl -sS --max-time 20 --noproxy ''");
  auto [body, status] = run(fmt::format("{} -x http://127.0.0.1:{} http://files.test:{}/hello", curl, under.port, port));
  CHECK(status == 0);
  CHECK(body == "hello from files.test\n");
  std::tie(body, status) =
      run(fmt::format("{} --socks5-hostname 127.0.0.1:{} http://files.test:{}/hello", curl, under.port, port));
  CHECK(status == 0);
  CHECK(body == "hello from files.test\n");
  std::tie(body, status) =
      run(fmt::format("{} -x http://127.0.0.1:{} http://pypi.org/simple/ -w '%{{http_code}}'", curl, under.port));
  CHECK(body == "network policy blocked pypi.org:80 (not in allowed domains)\n403");
  std::tie(body, status) =
      run(fmt::format("{} --socks5-hostname 127.0.0.1:{} https://pypi.org/simple/ 2>&1", curl, under.port));
  CHECK(status != 0);
  auto report = under.proxy->snapshot();
  REQUIRE(report.attempts.size() == 4);
  CHECK(report.attempts[0].method == "GET");
  CHECK(report.attempts[0].decision == network_decision::allowed);
  CHECK(report.attempts[1].method == "SOCKS");
  CHECK(report.attempts[1].host == "files.test");
  CHECK(report.attempts[1].decision == network_decision::allowed);
  CHECK(report.attempts[1].bytes_down > 0);
  CHECK(report.attempts[2].host == "pypi.org");
  CHECK(report.attempts[2].method == "GET");
  CHECK(report.attempts[3].host == "pypi.org");
  CHECK(report.attempts[3].method == "SOCKS");
  CHECK(report.attempts[3].port == 443);
  CHECK(network_marker(report) ==
        "[network: blocked pypi.org:80 (not in allowed domains), pypi.org:443 (not in allowed domains)]");
}

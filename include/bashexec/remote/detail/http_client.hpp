// remote/detail/http_client: one keep-alive HTTP/1.1 connection of
// `remote_executor`, POSTing JSON with a bound on every step (resolve and
// connect, write, read) and cancellable from another thread (a caller's stop
// token). Boost.Beast parses and writes the HTTP; Asio runs each step on an
// io_context of the connection's own, so a blocking call still has a timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <fmt/core.h>

namespace bashexec::remote::detail {

/// Where the server is: parsed from `http://HOST:PORT/PATH`.
struct endpoint {
  std::string host;
  std::string port;
  std::string path;

  /// std::invalid_argument naming `url` for anything else (https is the
  /// business of a proxy in front: docs/remote.md).
  static endpoint parse(std::string_view url) {
    constexpr std::string_view scheme = "http://";
    if (url.substr(0, scheme.size()) != scheme)
      throw std::invalid_argument(fmt::format("url: {} does not start with http:// (TLS: see docs/remote.md)", url));
    std::string_view rest = url.substr(scheme.size());
    const auto slash = rest.find('/');
    std::string_view authority = rest.substr(0, slash);
    endpoint at;
    at.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
    std::string_view host = authority;
    std::string_view port = "80";
    if (!authority.empty() && authority.front() == '[') {
      const auto close = authority.find(']');
      if (close == std::string_view::npos) throw std::invalid_argument(fmt::format("url: {} has an unclosed [", url));
      host = authority.substr(1, close - 1);
      if (close + 1 < authority.size() && authority[close + 1] == ':') port = authority.substr(close + 2);
    } else if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
    }
    if (host.empty() || port.empty() || port.find_first_not_of("0123456789") != std::string_view::npos)
      throw std::invalid_argument(fmt::format("url: {} names no host and port", url));
    at.host = std::string(host);
    at.port = std::string(port);
    return at;
  }

  /// The Host header's value.
  std::string authority() const {
    return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
  }
};

/// A step that did not complete: the connection is unusable afterwards.
class transport_error : public std::runtime_error {
 public:
  transport_error(const std::string& what, bool cancelled) : std::runtime_error(what), cancelled_(cancelled) {}
  /// Cut short by the caller's stop token, not by the network.
  bool cancelled() const noexcept { return cancelled_; }

 private:
  bool cancelled_;
};

struct http_reply {
  unsigned status = 0;
  std::string body;
};

class http_connection {
 public:
  /// Replies larger than this are refused (a read's output is bounded by the
  /// server's caps, far below it).
  static constexpr std::uint64_t max_reply_bytes = std::uint64_t{256} << 20;

  explicit http_connection(const endpoint& at) : at_(at) {}

  /// POSTs `body` and returns the reply. `connect_timeout` bounds the
  /// connect of a new connection, `timeout` the rest. A stop request on
  /// `stop` cancels the call (transport_error with cancelled()).
  http_reply post(const std::string& body, const std::string& token, std::chrono::milliseconds connect_timeout,
                  std::chrono::milliseconds timeout, std::stop_token stop = {}) {
    namespace http = boost::beast::http;
    // A cancel posted for an earlier call may still be queued: run it now,
    // harmlessly, before this call's operations exist.
    io_.restart();
    io_.poll();
    io_.restart();
    std::optional<std::stop_callback<std::function<void()>>> on_stop;
    if (stop.stop_possible())
      on_stop.emplace(stop, std::function<void()>([this] {
                        boost::asio::post(io_, [this] {
                          cancelled_ = true;
                          stream_.cancel();
                        });
                      }));
    cancelled_ = false;
    boost::system::error_code ec;
    if (!connected_) {
      boost::asio::ip::tcp::resolver resolver(io_);
      boost::asio::ip::tcp::resolver::results_type results;
      bool resolved = false;
      resolver.async_resolve(at_.host, at_.port, [&](boost::system::error_code e, auto found) {
        ec = e;
        results = std::move(found);
        resolved = true;
      });
      io_.run_for(connect_timeout);
      if (!resolved) {
        resolver.cancel();
        io_.restart();
        io_.run();
        if (!ec) ec = boost::beast::error::timeout;
      }
      if (ec || cancelled_) fail("cannot resolve", ec);
      stream_.expires_after(connect_timeout);
      stream_.async_connect(results, [&](boost::system::error_code e, const auto&) { ec = e; });
      io_.restart();
      io_.run();
      if (ec || cancelled_) fail("cannot connect", ec);
      stream_.socket().set_option(boost::asio::ip::tcp::no_delay(true), ec);
      connected_ = true;
    }
    http::request<http::string_body> request{http::verb::post, at_.path, 11};
    request.set(http::field::host, at_.authority());
    request.set(http::field::content_type, "application/json");
    request.set(http::field::user_agent, "bashexec-remote-executor");
    if (!token.empty()) request.set(http::field::authorization, "Bearer " + token);
    request.keep_alive(true);
    request.body() = body;
    request.prepare_payload();
    stream_.expires_after(timeout);
    http::async_write(stream_, request, [&](boost::system::error_code e, std::size_t) { ec = e; });
    io_.restart();
    io_.run();
    // A stop that came between two steps found nothing to cancel: it is
    // seen here, before a long read begins.
    if (ec || cancelled_ || stop.stop_requested()) fail("cannot send", ec);
    http::response_parser<http::string_body> parser;
    parser.body_limit(max_reply_bytes);
    parser.header_limit(64 << 10);
    http::async_read(stream_, buffer_, parser, [&](boost::system::error_code e, std::size_t) { ec = e; });
    io_.restart();
    io_.run();
    if (ec || (cancelled_ && !parser.is_done())) fail("no reply", ec);
    auto response = parser.release();
    if (!response.keep_alive()) close();
    return {response.result_int(), std::move(response.body())};
  }

  bool connected() const noexcept { return connected_; }

 private:
  [[noreturn]] void fail(std::string_view what, boost::system::error_code ec) {
    close();
    const bool cancelled = cancelled_ || ec == boost::asio::error::operation_aborted;
    const std::string why = ec == boost::beast::error::timeout ? std::string("timed out") : ec.message();
    throw transport_error(fmt::format("{} {}:{}: {}", what, at_.host, at_.port, cancelled ? "cancelled" : why),
                          cancelled);
  }

  void close() noexcept {
    boost::system::error_code ignored;
    stream_.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
    buffer_.clear();
    connected_ = false;
  }

  endpoint at_;
  boost::asio::io_context io_{1};
  boost::beast::tcp_stream stream_{io_};
  boost::beast::flat_buffer buffer_;
  bool connected_ = false;
  bool cancelled_ = false;
};

}  // namespace bashexec::remote::detail

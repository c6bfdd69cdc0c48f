// network/egress_proxy: the proxy that is a confined command's only way out
// under network by name (docs/network.md). It serves a listening socket the
// executor was handed (from the command's network namespace) and forwards
// only what a network_policy allows, recording every attempt.
//
// Built on Boost.Asio (C++20 coroutines on one io_context, one thread) and
// Boost.Beast's HTTP/1.1 parser and serializer: maintained libraries for
// the parts where a hand-written parser would be the bug (request
// smuggling, chunked framing, header limits). Hand-written here: the SOCKS5
// handshake (Beast has none; RFC 1928, no-auth CONNECT only) and the tunnel
// relay, which moves bytes socket → pipe → socket with splice(2), so that
// they never enter user space (Asio has no zero-copy relay; it waits, the
// kernel copies — docs/benchmarks.md "Network by name"). The CIDR matcher is detail/text/ip_address.hpp; every judgement is a pure
// function of network/decision.hpp.
//
// Heavy to compile and off the umbrella header on purpose: include it only
// where a proxy is built. The executor holds it as egress.hpp's
// egress_gateway (asio_egress_gateway below).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <fmt/core.h>

#include "bashexec/egress.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/network/decision.hpp"
#include "bashexec/network_policy.hpp"
#include "bashexec/unique_fd.hpp"

// GCC 12 warns -Wmismatched-new-delete on each Asio coroutine frame once it
// inlines the frame's class-specific operator new and delete (a false
// positive on coroutine frames allocated through the promise type); the
// pair is Asio's own and matched. Off for this header's coroutines only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace bashexec::network {

namespace detail {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using clock = std::chrono::steady_clock;
using error_code = boost::system::error_code;

/// The report, shared between the proxy thread that writes it and any thread
/// that takes a snapshot; it outlives the proxy's sockets (close()).
class attempt_log {
 public:
  explicit attempt_log(std::size_t capacity) : capacity_(capacity) {}

  /// Records `attempt`; its index while it is kept, empty once the log is full.
  std::optional<std::size_t> record(network_attempt attempt) {
    std::lock_guard lock(mutex_);
    if (report_.attempts.size() >= capacity_) {
      ++report_.attempts_dropped;
      return std::nullopt;
    }
    report_.attempts.push_back(std::move(attempt));
    return report_.attempts.size() - 1;
  }

  template <class Change>
  void update(std::optional<std::size_t> index, Change change) {
    if (!index) return;
    std::lock_guard lock(mutex_);
    change(report_.attempts[*index]);
  }

  network_report snapshot() const {
    std::lock_guard lock(mutex_);
    return report_;
  }

 private:
  mutable std::mutex mutex_;
  network_report report_;
  std::size_t capacity_;
};

/// host and port as a request named them.
struct target {
  std::string host;  // canonical for a domain name, bare (no brackets) for an IPv6 literal
  std::uint16_t port = 0;
};

/// "host:port", "[v6]:port" or "host" (then `default_port`); empty for
/// anything else: no host, a port outside 1-65535, userinfo, a bare IPv6.
inline std::optional<target> parse_authority(std::string_view text, std::optional<std::uint16_t> default_port) {
  if (text.empty() || text.find('@') != std::string_view::npos) return std::nullopt;
  std::string_view host;
  std::string_view rest;
  if (text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = text.substr(1, close - 1);
    rest = text.substr(close + 1);
    auto literal = address::parse(host);
    if (!literal || !literal->v6) return std::nullopt;
  } else {
    auto colon = text.find(':');
    if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) return std::nullopt;
    host = text.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon);
  }
  if (host.empty()) return std::nullopt;
  target parsed;
  auto name = canonical_domain(host);
  parsed.host = name && !address::parse(host) ? *name : std::string(host);
  if (rest.empty()) {
    if (!default_port) return std::nullopt;
    parsed.port = *default_port;
    return parsed;
  }
  if (rest.front() != ':' || rest.size() < 2 || rest.size() > 6) return std::nullopt;
  unsigned port = 0;
  for (char c : rest.substr(1)) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + static_cast<unsigned>(c - '0');
  }
  if (port == 0 || port > 65535) return std::nullopt;
  parsed.port = static_cast<std::uint16_t>(port);
  return parsed;
}

/// An absolute-form http:// request target split into where it goes and the
/// origin-form target the upstream gets ("/path?query").
struct absolute_target {
  target where;
  std::string origin_form;
};

inline std::optional<absolute_target> parse_absolute_http(std::string_view uri) {
  constexpr std::string_view scheme = "http://";
  if (uri.size() < scheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    char c = uri[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != scheme[i]) return std::nullopt;
  }
  uri.remove_prefix(scheme.size());
  auto end = uri.find_first_of("/?#");
  auto where = parse_authority(uri.substr(0, end), 80);
  if (!where) return std::nullopt;
  absolute_target parsed{*where, "/"};
  if (end != std::string_view::npos) {
    auto path = uri.substr(end);
    path = path.substr(0, path.find('#'));  // a fragment never goes on the wire
    parsed.origin_form = path.starts_with('/') ? std::string(path) : "/" + std::string(path);
  }
  return parsed;
}

/// Beast 1.74 speaks boost::string_view.
inline std::string_view std_view(boost::beast::string_view text) { return {text.data(), text.size()}; }

inline std::string target_text(const target& where) {
  if (where.host.find(':') != std::string::npos) return fmt::format("[{}]:{}", where.host, where.port);
  return fmt::format("{}:{}", where.host, where.port);
}

inline net::ip::address to_asio(const address& from) {
  if (!from.v6) {
    net::ip::address_v4::bytes_type bytes;
    std::copy_n(from.bytes.begin(), 4, bytes.begin());
    return net::ip::address_v4(bytes);
  }
  net::ip::address_v6::bytes_type bytes;
  std::copy_n(from.bytes.begin(), 16, bytes.begin());
  return net::ip::address_v6(bytes);
}

inline address from_asio(const net::ip::address& from) {
  address converted;
  if (from.is_v4()) {
    auto bytes = from.to_v4().to_bytes();
    std::copy(bytes.begin(), bytes.end(), converted.bytes.begin());
  } else {
    converted.v6 = true;
    auto bytes = from.to_v6().to_bytes();
    std::copy(bytes.begin(), bytes.end(), converted.bytes.begin());
  }
  return converted;
}

class connection;

/// What one proxy owns: the io_context (declared first, destroyed last), the
/// acceptor, the policy, and the live connections (for close()).
struct proxy_core {
  net::io_context io{1};
  tcp::acceptor acceptor{io};
  network_policy policy;
  std::shared_ptr<attempt_log> log;
  std::unordered_set<connection*> live;
  std::size_t admitted = 0;
  std::size_t refusing = 0;
  bool closing = false;

  void shutdown();
  net::awaitable<void> accept_loop();
};

/// Upstream phases the watchdog bounds besides idle and total time.
enum class phase { none, connecting, draining };

/// One client connection, from accept to close. Lives in its coroutines
/// (each holds a shared_ptr); every member is touched on the proxy thread only.
class connection : public std::enable_shared_from_this<connection> {
 public:
  connection(proxy_core& core, tcp::socket client, bool admitted)
      : core_(core),
        client_(std::move(client)),
        upstream_(core.io),
        watchdog_(core.io),
        // Room for the header limit plus a read past it, without overflowing.
        buffer_(std::min(core.policy.limits.max_header_bytes, std::numeric_limits<std::size_t>::max() / 2) + 65536),
        admitted_(admitted),
        started_(clock::now()),
        last_activity_(started_) {
    core_.live.insert(this);
    (admitted_ ? core_.admitted : core_.refusing) += 1;
  }
  ~connection() {
    core_.live.erase(this);
    (admitted_ ? core_.admitted : core_.refusing) -= 1;
  }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  static void start(std::shared_ptr<connection> self) {
    auto ignore = [](std::exception_ptr) {};
    net::co_spawn(self->core_.io, watch(self), ignore);
    net::co_spawn(self->core_.io, run(self), ignore);
  }

  /// Closes both sockets and ends every pending operation; idempotent.
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    error_code ignored;
    client_.close(ignored);
    upstream_.close(ignored);
    if (resolver_) resolver_->cancel();
    watchdog_.cancel();
  }

 private:
  static auto token(error_code& ec) { return net::redirect_error(net::use_awaitable, ec); }
  const network_limits& limits() const { return core_.policy.limits; }
  void touch() { last_activity_ = clock::now(); }

  void enter(phase next, std::chrono::milliseconds bound) {
    phase_ = next;
    phase_deadline_ = clock::now() + bound;
    phase_expired_ = false;
    watchdog_.cancel();  // re-arm at the nearer deadline
  }
  void leave_phase() { phase_ = phase::none; }

  static net::awaitable<void> watch(std::shared_ptr<connection> self) {
    error_code ec;
    while (!self->stopped_) {
      auto now = clock::now();
      auto idle_end = self->last_activity_ + self->limits().idle_timeout;
      auto total_end = self->started_ + self->limits().total_timeout;
      if (now >= idle_end || now >= total_end) {
        self->stop();
        co_return;
      }
      auto next = std::min(idle_end, total_end);
      if (self->phase_ != phase::none) {
        if (now >= self->phase_deadline_) {
          self->expire_phase();
          continue;
        }
        next = std::min(next, self->phase_deadline_);
      }
      self->watchdog_.expires_at(next);
      co_await self->watchdog_.async_wait(token(ec));
    }
  }

  void expire_phase() {
    error_code ignored;
    phase_expired_ = true;
    if (phase_ == phase::connecting) {
      upstream_.close(ignored);
      if (resolver_) resolver_->cancel();
    } else {
      client_.close(ignored);
    }
    phase_ = phase::none;
  }

  static net::awaitable<void> run(std::shared_ptr<connection> self) {
    co_await self->serve();
    if (!self->splicing_) self->stop();
  }

  net::awaitable<void> serve() {
    bool ok = co_await fill(1);
    if (!ok) co_return;
    auto first = static_cast<const unsigned char*>(buffer_.data().data())[0];
    if (first == 0x05)
      co_await serve_socks();
    else
      co_await serve_http();
  }

  /// Reads until the buffer holds at least `wanted` bytes.
  net::awaitable<bool> fill(std::size_t wanted) {
    error_code ec;
    while (buffer_.size() < wanted) {
      auto room = std::min<std::size_t>(buffer_.max_size() - buffer_.size(), 4096);
      if (room == 0) co_return false;
      auto got = co_await client_.async_read_some(buffer_.prepare(room), token(ec));
      if (ec || stopped_) co_return false;
      buffer_.commit(got);
      touch();
    }
    co_return true;
  }

  std::optional<std::size_t> record(const target& where, std::string method, network_block_reason reason) {
    network_attempt attempt;
    attempt.host = where.host;
    attempt.port = where.port;
    attempt.method = std::move(method);
    attempt.decision = reason == network_block_reason::none ? network_decision::allowed : network_decision::blocked;
    attempt.reason = reason;
    return core_.log->record(std::move(attempt));
  }

  void block(network_block_reason reason) {
    core_.log->update(attempt_, [reason](network_attempt& attempt) {
      attempt.decision = network_decision::blocked;
      attempt.reason = reason;
    });
  }

  void count(std::uint64_t up, std::uint64_t down) {
    core_.log->update(attempt_, [up, down](network_attempt& attempt) {
      attempt.bytes_up += up;
      attempt.bytes_down += down;
    });
  }

  // --- resolving and connecting, shared by both protocols ---------------------

  /// How reaching the upstream ended.
  enum class reach { connected, blocked, unreachable, timed_out };
  struct reach_result {
    reach how = reach::unreachable;
    network_block_reason reason = network_block_reason::none;  // for `blocked`
    std::string failure;                                       // for `unreachable`, `timed_out`
  };

  /// Resolves `where` (host_map, then the system resolver if allowed), vets
  /// every address, and connects to the first vetted address that answers,
  /// all within connect_timeout. Records the address connected to, or turns
  /// the attempt blocked.
  net::awaitable<reach_result> connect_upstream(const target& where) {
    std::vector<address> resolved;
    enter(phase::connecting, limits().connect_timeout);
    if (auto literal = address::parse(where.host)) {
      resolved.push_back(*literal);
    } else if (auto mapped = mapped_address(core_.policy, where.host)) {
      resolved.push_back(*mapped);
    } else if (core_.policy.system_dns) {
      error_code ec;
      resolver_.emplace(core_.io);
      auto results = co_await resolver_->async_resolve(where.host, std::to_string(where.port), token(ec));
      if (!ec)
        for (const auto& entry : results) resolved.push_back(from_asio(entry.endpoint().address()));
    }
    if (stopped_) co_return reach_result{};
    if (phase_expired_)
      co_return reach_result{reach::timed_out, {}, fmt::format("no answer within {} ms", limits().connect_timeout.count())};
    auto vetted = vet_addresses(core_.policy, resolved);
    if (vetted.addresses.empty()) {
      leave_phase();
      block(vetted.reason);
      co_return reach_result{reach::blocked, vetted.reason, {}};
    }
    error_code ec;
    for (const auto& candidate : vetted.addresses) {
      upstream_.close(ec);
      co_await upstream_.async_connect(tcp::endpoint(to_asio(candidate), where.port), token(ec));
      if (stopped_ || phase_expired_) break;
      if (!ec) {
        leave_phase();
        auto text = candidate.to_string();
        core_.log->update(attempt_, [&text](network_attempt& attempt) { attempt.address = text; });
        touch();
        co_return reach_result{reach::connected, {}, {}};
      }
    }
    leave_phase();
    if (phase_expired_)
      co_return reach_result{reach::timed_out, {}, fmt::format("no answer within {} ms", limits().connect_timeout.count())};
    co_return reach_result{reach::unreachable, {}, ec ? ec.message() : "connection failed"};
  }

  // --- the tunnel ---------------------------------------------------------------

  static constexpr std::size_t tunnel_chunk_bytes = 256 * 1024;

  /// Copies `from` to `to` until end of stream, counting bytes as they flow:
  /// through a pipe with splice(2), so the bytes never enter user space, or
  /// — when no pipe can be had (out of descriptors) — through a buffer.
  static net::awaitable<void> pump(std::shared_ptr<connection> self, bool upward) {
    int ends[2];
    if (::pipe2(ends, O_NONBLOCK | O_CLOEXEC) == 0) {
      co_await splice_pump(self, upward, bashexec::unique_fd(ends[0]), bashexec::unique_fd(ends[1]));
    } else {
      co_await copy_pump(self, upward);
    }
    if (++self->pumps_done_ == 2) self->stop();
  }

  /// The zero-copy relay. Hand-written: Asio has none. The sockets are
  /// waited on with Asio (async_wait), the bytes moved by splice(2) from the
  /// source socket into the pipe and from the pipe into the target socket,
  /// both non-blocking, 256 KiB at most per call.
  static net::awaitable<void> splice_pump(std::shared_ptr<connection> self, bool upward, bashexec::unique_fd out_of_pipe,
                                          bashexec::unique_fd into_pipe) {
    auto& from = upward ? self->client_ : self->upstream_;
    auto& to = upward ? self->upstream_ : self->client_;
    ::fcntl(into_pipe.get(), F_SETPIPE_SZ, static_cast<int>(tunnel_chunk_bytes));  // best effort
    error_code ec;
    from.native_non_blocking(true, ec);
    to.native_non_blocking(true, ec);
    if (ec) co_return self->stop();
    const unsigned flags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
    std::size_t in_pipe = 0;
    bool at_end = false;
    while (!at_end || in_pipe > 0) {
      if (!at_end) {
        const ssize_t got = ::splice(from.native_handle(), nullptr, into_pipe.get(), nullptr, tunnel_chunk_bytes, flags);
        if (got > 0) {
          in_pipe += static_cast<std::size_t>(got);
          self->touch();
        } else if (got == 0) {
          at_end = true;
        } else if (errno == EAGAIN || errno == EINTR) {
          if (in_pipe == 0) {  // nothing to pass on: wait for the source
            co_await from.async_wait(tcp::socket::wait_read, token(ec));
            if (ec || self->stopped_) co_return self->stop();
            continue;
          }
        } else {
          co_return self->stop();
        }
      }
      while (in_pipe > 0) {
        const ssize_t sent = ::splice(out_of_pipe.get(), nullptr, to.native_handle(), nullptr, in_pipe, flags);
        if (sent > 0) {
          in_pipe -= static_cast<std::size_t>(sent);
          self->count(upward ? sent : 0, upward ? 0 : sent);
          self->touch();
        } else if (sent < 0 && (errno == EAGAIN || errno == EINTR)) {
          co_await to.async_wait(tcp::socket::wait_write, token(ec));
          if (ec || self->stopped_) co_return self->stop();
        } else {
          co_return self->stop();
        }
      }
      if (self->stopped_) co_return self->stop();
    }
    to.shutdown(tcp::socket::shutdown_send, ec);
  }

  /// The relay through a buffer, where no pipe can be had.
  static net::awaitable<void> copy_pump(std::shared_ptr<connection> self, bool upward) {
    auto& from = upward ? self->client_ : self->upstream_;
    auto& to = upward ? self->upstream_ : self->client_;
    std::vector<char> chunk(tunnel_chunk_bytes);
    error_code ec;
    for (;;) {
      auto got = co_await from.async_read_some(net::buffer(chunk), token(ec));
      if (ec == net::error::eof) {
        to.shutdown(tcp::socket::shutdown_send, ec);
        break;
      }
      if (ec || self->stopped_) {
        self->stop();
        break;
      }
      self->touch();
      const std::size_t written = co_await net::async_write(to, net::buffer(chunk.data(), got), token(ec));
      // Counted before the stop check: bytes the peer already has count even
      // when the proxy is closing (the command may have exited on them).
      self->count(upward ? written : 0, upward ? 0 : written);
      if (ec || self->stopped_) {
        self->stop();
        break;
      }
      self->touch();
    }
  }

  /// Sends what the client already sent past its request upstream, then
  /// splices both ways, untouched.
  net::awaitable<void> splice() {
    error_code ec;
    if (buffer_.size() > 0) {
      auto early = buffer_.size();
      const std::size_t written = co_await net::async_write(upstream_, buffer_.data(), token(ec));
      count(written, 0);
      if (ec) co_return;
      buffer_.consume(early);
    }
    splicing_ = true;
    auto self = shared_from_this();
    net::co_spawn(core_.io, pump(self, true), [](std::exception_ptr) {});
    co_await pump(self, false);
  }

  // --- SOCKS5 (RFC 1928): no authentication, CONNECT only ---------------------

  net::awaitable<void> socks_reply(std::uint8_t code) {
    // VER REP RSV ATYP=IPv4 BND.ADDR=0.0.0.0 BND.PORT=0: the bound address is not the client's business.
    const std::array<std::uint8_t, 10> reply{0x05, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0};
    error_code ec;
    co_await net::async_write(client_, net::buffer(reply), token(ec));
  }

  const std::uint8_t* bytes() const { return static_cast<const std::uint8_t*>(buffer_.data().data()); }

  net::awaitable<void> serve_socks() {
    static constexpr std::uint8_t not_allowed = 0x02, unreachable = 0x04, unsupported_command = 0x07,
                                  unsupported_address = 0x08;
    error_code ec;
    bool ok = co_await fill(2);
    if (!ok) co_return;
    std::size_t methods = bytes()[1];
    ok = co_await fill(2 + methods);
    if (!ok) co_return;
    bool no_auth = false;
    for (std::size_t i = 0; i < methods; ++i) no_auth = no_auth || bytes()[2 + i] == 0x00;
    buffer_.consume(2 + methods);
    const std::array<std::uint8_t, 2> choice{0x05, static_cast<std::uint8_t>(no_auth ? 0x00 : 0xff)};
    co_await net::async_write(client_, net::buffer(choice), token(ec));
    if (!no_auth) {
      record({}, "SOCKS", network_block_reason::bad_request);
      co_return;
    }
    if (ec) co_return;
    ok = co_await fill(5);
    if (!ok) co_return;
    if (bytes()[0] != 0x05) {
      record({}, "SOCKS", network_block_reason::bad_request);
      co_return;
    }
    std::uint8_t command = bytes()[1];
    std::uint8_t type = bytes()[3];
    target where;
    std::size_t length = 0;
    if (type == 0x01 || type == 0x04) {
      std::size_t size = type == 0x01 ? 4 : 16;
      length = 4 + size + 2;
      ok = co_await fill(length);
      if (!ok) co_return;
      address literal;
      literal.v6 = type == 0x04;
      std::copy_n(bytes() + 4, size, literal.bytes.begin());
      where.host = literal.to_string();
    } else if (type == 0x03) {
      std::size_t size = bytes()[4];
      length = 5 + size + 2;
      ok = co_await fill(length);
      if (!ok) co_return;
      std::string_view name(reinterpret_cast<const char*>(bytes()) + 5, size);
      auto canonical = canonical_domain(name);
      where.host = canonical && !address::parse(name) ? *canonical : std::string(name);
    } else {
      record({}, "SOCKS", network_block_reason::bad_request);
      co_await socks_reply(unsupported_address);
      co_return;
    }
    where.port = static_cast<std::uint16_t>(bytes()[length - 2] << 8 | bytes()[length - 1]);
    buffer_.consume(length);
    if (command != 0x01) {
      attempt_ = record(where, "SOCKS", network_block_reason::bad_request);
      co_await socks_reply(unsupported_command);
      co_return;
    }
    auto reason = admitted_ ? judge_request(core_.policy, "SOCKS", where.host) : network_block_reason::limit;
    attempt_ = record(where, "SOCKS", reason);
    if (reason != network_block_reason::none) {
      co_await socks_reply(not_allowed);
      co_return;
    }
    auto reached = co_await connect_upstream(where);
    if (reached.how != reach::connected) {
      bool refused = reached.how == reach::blocked && reached.reason != network_block_reason::resolve_failed;
      co_await socks_reply(refused ? not_allowed : unreachable);
      co_return;
    }
    co_await socks_reply(0x00);
    if (stopped_) co_return;
    co_await splice();
  }

  // --- HTTP/1.1: CONNECT and absolute-form requests ---------------------------

  /// Half-closes toward the client and reads what it still sends (bounded in
  /// bytes and time) before the close: closing with unread bytes would reset
  /// the connection, and a reset can destroy the answer before the client
  /// reads it (a 100 KiB header answered 431 after 16 KiB).
  net::awaitable<void> close_gracefully() {
    error_code ec;
    client_.shutdown(tcp::socket::shutdown_send, ec);
    if (ec || stopped_) co_return;
    enter(phase::draining, std::min(limits().idle_timeout, std::chrono::milliseconds{2000}));
    std::array<char, 16384> sink;
    for (std::size_t drained = 0; drained < (std::size_t{1} << 20);) {
      auto got = co_await client_.async_read_some(net::buffer(sink), token(ec));
      if (ec || stopped_) break;
      drained += got;
    }
    leave_phase();
  }

  /// Answers with `status` and one line of text, then closes gracefully.
  net::awaitable<void> refuse(http::status status, std::string text) {
    http::response<http::string_body> response{status, 11};
    response.set(http::field::content_type, "text/plain; charset=utf-8");
    response.set(http::field::connection, "close");
    response.body() = std::move(text) + "\n";
    response.prepare_payload();
    error_code ec;
    co_await http::async_write(client_, response, token(ec));
    if (ec || stopped_) co_return;
    co_await close_gracefully();
  }

  /// 403 naming host:port and the reason phrase (and a detail, if any).
  net::awaitable<void> refuse_policy(const target& where, network_block_reason reason, std::string_view detail = {}) {
    auto text = fmt::format("network policy blocked {} ({}{}{})", target_text(where), reason_phrase(reason),
                            detail.empty() ? "" : ": ", detail);
    co_await refuse(http::status::forbidden, std::move(text));
  }

  /// Answers a client whose upstream was not reached; false when it was.
  net::awaitable<bool> answer_unreached(const target& where, const reach_result& reached) {
    switch (reached.how) {
      case reach::connected: co_return false;
      case reach::blocked: co_await refuse_policy(where, reached.reason); break;
      case reach::timed_out:
        co_await refuse(http::status::gateway_timeout,
                        fmt::format("could not connect to {}: {}", target_text(where), reached.failure));
        break;
      case reach::unreachable:
        if (!stopped_)
          co_await refuse(http::status::bad_gateway,
                          fmt::format("could not connect to {}: {}", target_text(where), reached.failure));
        break;
    }
    co_return true;
  }

  /// Reads the request header as it arrives (each read counts as activity,
  /// so a slow client is bounded by total_timeout, not idle_timeout).
  /// `none` also when the client left before a whole header: no attempt.
  net::awaitable<network_block_reason> read_request_header(http::request_parser<http::buffer_body>& parser,
                                                          error_code& ec) {
    for (;;) {
      if (buffer_.size() > 0) {
        auto used = parser.put(buffer_.data(), ec);
        buffer_.consume(used);
        if (parser.is_header_done()) co_return network_block_reason::none;
        if (ec == http::error::header_limit) co_return network_block_reason::limit;
        if (ec && ec != http::error::need_more) co_return network_block_reason::bad_request;
      }
      auto room = std::min<std::size_t>(buffer_.max_size() - buffer_.size(), 4096);
      if (room == 0) co_return network_block_reason::limit;
      auto got = co_await client_.async_read_some(buffer_.prepare(room), token(ec));
      if (ec || stopped_) co_return network_block_reason::none;
      buffer_.commit(got);
      touch();
    }
  }

  /// Streams one message — its header, then its body through a fixed
  /// buffer — from `in` to `out`, the way Beast's relay example does.
  template <bool IsRequest>
  net::awaitable<bool> relay(tcp::socket& in, boost::beast::flat_buffer& in_buffer,
                             http::parser<IsRequest, http::buffer_body>& parser, tcp::socket& out) {
    http::serializer<IsRequest, http::buffer_body> serializer{parser.get()};
    std::array<char, 16384> chunk;
    error_code ec;
    do {
      auto& body = parser.get().body();
      if (!parser.is_done()) {
        body.data = chunk.data();
        body.size = chunk.size();
        co_await http::async_read_some(in, in_buffer, parser, token(ec));
        if (ec == http::error::need_buffer) ec = {};
        if (ec || stopped_) co_return false;
        touch();
        body.size = chunk.size() - body.size;
        body.data = chunk.data();
        body.more = !parser.is_done();
      } else {
        body.data = nullptr;
        body.size = 0;
        body.more = false;
      }
      auto written = co_await http::async_write(out, serializer, token(ec));
      // Before the stop check: the peer has these bytes even if the proxy is
      // closing now (a client that exits on the last byte settles its
      // command, and the executor closes the proxy, at once).
      count(IsRequest ? written : 0, IsRequest ? 0 : written);
      if (ec == http::error::need_buffer) ec = {};
      if (ec || stopped_) co_return false;
      touch();
    } while (!parser.is_done() && !serializer.is_done());
    co_return true;
  }

  /// Drops the hop-by-hop fields (RFC 9110 7.6.1, and Proxy-Connection),
  /// those Connection names among them, and asks for one exchange only.
  template <class Fields>
  static void strip_hop_by_hop(Fields& fields) {
    std::vector<std::string> listed;
    std::string_view connection = std_view(fields[http::field::connection]);
    while (!connection.empty()) {
      auto comma = std::min(connection.find(','), connection.size());
      auto name = connection.substr(0, comma);
      connection.remove_prefix(std::min(comma + 1, connection.size()));
      while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
      while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
      if (!name.empty()) listed.emplace_back(name);
    }
    for (const auto& name : listed) {
      // Connection never gets to strip the message's own framing.
      if (boost::beast::iequals(name, "transfer-encoding") || boost::beast::iequals(name, "content-length")) continue;
      fields.erase(name);
    }
    for (auto field : {http::field::connection, http::field::proxy_connection, http::field::keep_alive,
                       http::field::proxy_authorization, http::field::proxy_authenticate, http::field::te,
                       http::field::trailer, http::field::upgrade})
      fields.erase(field);
    fields.set(http::field::connection, "close");
  }

  net::awaitable<void> serve_http() {
    http::request_parser<http::buffer_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(limits().max_header_bytes, UINT32_MAX)));
    // Bodies are streamed, never held: no limit. Not boost::none: Beast 1.74
    // compares the length with the optional, and every length beats none.
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    error_code parse_error;
    auto header = co_await read_request_header(parser, parse_error);
    if (stopped_) co_return;
    if (header == network_block_reason::limit) {
      record({}, "", network_block_reason::limit);
      co_await refuse(http::status::request_header_fields_too_large,
                      fmt::format("network policy blocked a request (limit reached: a header over {} bytes)",
                                  limits().max_header_bytes));
      co_return;
    }
    if (header == network_block_reason::bad_request) {
      record({}, "", network_block_reason::bad_request);
      co_await refuse(http::status::bad_request,
                      fmt::format("network policy blocked a request (bad request: {})", parse_error.message()));
      co_return;
    }
    if (!parser.is_header_done()) co_return;
    auto& request = parser.get();
    std::string method(request.method_string());
    std::string uri(request.target());

    if (request.method() == http::verb::connect) {
      auto where = parse_authority(uri, std::nullopt);
      if (!where) {
        record({}, method, network_block_reason::bad_request);
        co_await refuse(http::status::bad_request,
                        fmt::format("network policy blocked a request (bad request: CONNECT needs host:port, got \"{}\")",
                                    uri.substr(0, 200)));
        co_return;
      }
      co_await serve_connect(*where, method);
      co_return;
    }
    auto absolute = parse_absolute_http(uri);
    if (!absolute) {
      record({}, method, network_block_reason::bad_request);
      co_await refuse(http::status::bad_request,
                      "network policy blocked a request (bad request: a proxy request names an absolute http:// "
                      "URL, or is a CONNECT)");
      co_return;
    }
    auto where = absolute->where;
    std::string_view host_field = std_view(request[http::field::host]);
    if (!host_field.empty()) {
      auto named = parse_authority(host_field, 80);
      if (!named || named->host != where.host || named->port != where.port) {
        attempt_ = record(where, method, network_block_reason::bad_request);
        co_await refuse_policy(where, network_block_reason::bad_request, "Host header does not match the request target");
        co_return;
      }
    }
    if (!co_await judge_and_reach(where, method)) co_return;

    request.target(absolute->origin_form);
    strip_hop_by_hop(request);
    std::string authority = target_text(where);
    if (where.port == 80) authority.resize(authority.size() - 3);  // ":80" is implied
    request.set(http::field::host, authority);
    bool sent = co_await relay<true>(client_, buffer_, parser, upstream_);
    if (!sent) co_return;

    boost::beast::flat_buffer upstream_buffer;
    http::response_parser<http::buffer_body> response;
    response.header_limit(65536);
    response.body_limit(std::numeric_limits<std::uint64_t>::max());
    if (request.method() == http::verb::head) response.skip(true);
    error_code ec;
    co_await http::async_read_header(upstream_, upstream_buffer, response, token(ec));
    if (stopped_) co_return;
    if (ec) {
      co_await refuse(http::status::bad_gateway, fmt::format("{} sent no HTTP response", target_text(where)));
      co_return;
    }
    touch();
    strip_hop_by_hop(response.get());
    bool relayed = co_await relay<false>(upstream_, upstream_buffer, response, client_);
    if (relayed) co_await close_gracefully();
  }

  /// Judges `method` to `where` (the limit first), records the attempt and
  /// connects upstream; false when the client was answered instead (a
  /// refusal, or an upstream that could not be reached).
  net::awaitable<bool> judge_and_reach(const target& where, const std::string& method) {
    auto reason = admitted_ ? judge_request(core_.policy, method, where.host) : network_block_reason::limit;
    attempt_ = record(where, method, reason);
    if (reason != network_block_reason::none) {
      co_await refuse_policy(where, reason);
      co_return false;
    }
    auto reached = co_await connect_upstream(where);
    co_return !co_await answer_unreached(where, reached);
  }

  net::awaitable<void> serve_connect(const target& where, const std::string& method) {
    if (!co_await judge_and_reach(where, method)) co_return;
    static constexpr std::string_view established = "HTTP/1.1 200 Connection established\r\n\r\n";
    error_code ec;
    co_await net::async_write(client_, net::buffer(established), token(ec));
    if (ec || stopped_) co_return;
    co_await splice();
  }

  proxy_core& core_;
  tcp::socket client_;
  tcp::socket upstream_;
  net::steady_timer watchdog_;
  std::optional<tcp::resolver> resolver_;
  boost::beast::flat_buffer buffer_;
  bool admitted_;
  bool stopped_ = false;
  bool splicing_ = false;
  int pumps_done_ = 0;
  clock::time_point started_;
  clock::time_point last_activity_;
  phase phase_ = phase::none;
  clock::time_point phase_deadline_{};
  bool phase_expired_ = false;
  std::optional<std::size_t> attempt_;
};

inline void proxy_core::shutdown() {
  closing = true;
  error_code ignored;
  acceptor.close(ignored);
  for (auto* open : live) open->stop();
}

inline net::awaitable<void> proxy_core::accept_loop() {
  net::steady_timer backoff(io);
  error_code ec;
  while (!closing) {
    auto client = co_await acceptor.async_accept(net::redirect_error(net::use_awaitable, ec));
    if (closing) co_return;
    if (ec) {
      if (ec == net::error::operation_aborted || ec == net::error::bad_descriptor) co_return;
      // Out of descriptors or the like: wait, rather than spin, for one to free up.
      backoff.expires_after(std::chrono::milliseconds{50});
      co_await backoff.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    const auto most = policy.limits.max_connections;
    if (admitted < most || refusing < most) {
      connection::start(std::make_shared<connection>(*this, std::move(client), admitted < most));
    } else {
      // Beyond the connections being refused too: close at once, still counted.
      network_attempt attempt;
      attempt.reason = network_block_reason::limit;
      log->record(std::move(attempt));
    }
  }
}

}  // namespace detail

/// Serves one listening socket under one policy, on a thread of its own.
///
/// Each accepted connection's first byte picks its protocol: 0x05 is SOCKS5
/// (no authentication; CONNECT with a domain name, IPv4 or IPv6 address;
/// replies 0x02 for a policy refusal, 0x04 when the host cannot be resolved
/// or reached, 0x07 for another command), anything else HTTP/1.1:
///   CONNECT host:port            vetted, connected, "200 Connection
///                                established", then bytes both ways untouched
///                                (no TLS interception);
///   GET http://host[:port]/path  (any method) vetted, connected, forwarded in
///                                origin-form without hop-by-hop fields, the
///                                response streamed back; one request per
///                                connection (Connection: close).
/// A refusal is 403 (400 for a request that is not a proxy request or whose
/// Host header names another host than its URL, 431 for a header over
/// limits.max_header_bytes) with one line of text/plain saying why. An upstream
/// that cannot be reached is 502 (504 past connect_timeout).
///
/// Every attempt is recorded once, when its request was parsed, in that order
/// (network_attempt). A connection that closes before sending a request is
/// no attempt.
class egress_proxy {
 public:
  /// `listener` must be bound and listening, in any network namespace; the
  /// proxy owns it. Throws std::invalid_argument for an invalid policy and
  /// infrastructure_error for a descriptor that is not a listening TCP socket.
  egress_proxy(unique_fd listener, network_policy policy)
      : log_(std::make_shared<detail::attempt_log>(policy.limits.max_attempts_recorded)) {
    policy.validate();
    sockaddr_storage local{};
    socklen_t size = sizeof local;
    if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&local), &size) != 0)
      throw infrastructure_error(fmt::format("egress_proxy: getsockname: {}", std::strerror(errno)));
    if (local.ss_family != AF_INET && local.ss_family != AF_INET6)
      throw infrastructure_error("egress_proxy: the listener is not a TCP/IP socket");
    core_ = std::make_unique<detail::proxy_core>();
    core_->policy = std::move(policy);
    core_->log = log_;
    boost::system::error_code ec;
    core_->acceptor.assign(local.ss_family == AF_INET ? detail::tcp::v4() : detail::tcp::v6(), listener.get(), ec);
    if (ec) throw infrastructure_error(fmt::format("egress_proxy: taking the listener: {}", ec.message()));
    listener.release();
    detail::net::co_spawn(core_->io, core_->accept_loop(), [](std::exception_ptr) {});
    thread_ = std::thread([core = core_.get()] {
      // A throw here would be std::terminate in the user's process: keep serving instead.
      for (;;) {
        try {
          core->io.run();
          return;
        } catch (...) {
        }
      }
    });
  }

  ~egress_proxy() { close(); }
  egress_proxy(const egress_proxy&) = delete;
  egress_proxy& operator=(const egress_proxy&) = delete;

  /// A copy of the report so far: attempts in arrival order, at most
  /// limits.max_attempts_recorded (the rest counted in attempts_dropped),
  /// byte counts as of now. Safe from any thread, also after close().
  network_report snapshot() const { return log_->snapshot(); }

  /// Stops accepting, closes every client and upstream socket, waits for the
  /// proxy thread; afterwards the proxy holds no descriptor (the io_context's
  /// own are gone too). Idempotent.
  void close() {
    std::lock_guard lock(close_mutex_);
    if (!core_) return;
    detail::net::post(core_->io, [core = core_.get()] { core->shutdown(); });
    if (thread_.joinable()) thread_.join();
    core_.reset();
  }

 private:
  std::shared_ptr<detail::attempt_log> log_;
  std::unique_ptr<detail::proxy_core> core_;
  std::thread thread_;
  std::mutex close_mutex_;
};

/// egress.hpp's gateway over egress_proxy.
class asio_egress_gateway final : public egress_gateway {
 public:
  std::unique_ptr<egress_session> open(unique_fd listener, const network_policy& policy) override {
    return std::make_unique<session>(std::move(listener), policy);
  }

 private:
  class session final : public egress_session {
   public:
    session(unique_fd listener, const network_policy& policy) : proxy_(std::move(listener), policy) {}
    network_report snapshot() const override { return proxy_.snapshot(); }
    void close() override { proxy_.close(); }

   private:
    egress_proxy proxy_;
  };
};

}  // namespace bashexec::network

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

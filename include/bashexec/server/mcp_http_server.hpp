// server/mcp_http_server: the Streamable HTTP transport of MCP (revision
// 2025-11-25) for `bashexec mcp --http` (docs/tool-protocol.md, "Over HTTP").
//
// One endpoint (`/mcp`): POST carries client messages — answered 202 when
// they hold no request, else with an SSE stream that carries the requests'
// responses and what relates to them (progress, elicitation questions);
// GET opens the session's own stream, or with Last-Event-ID resumes a
// stream that lost its connection; DELETE ends the session. Each session is
// an `mcp_server` of its own behind a socket pair (server/http_sessions.hpp):
// this transport admits requests (server/http_guard.hpp), writes their
// messages to the session as lines, and routes each line the session writes
// back to the stream it belongs on, where it is also kept for replay
// (server/sse_replay.hpp).
//
// What a client cannot do to it: reach it from a page of another origin or a
// rebound name (Host and Origin allowlists, 403), use it without the bearer
// token when one is set (401), hold a connection with a slow request (the
// whole request must arrive within `request_timeout`), exhaust it with
// bodies, headers, connections or sessions (413, 431, 503), or stall it by
// not reading a stream (each write is bounded by `write_timeout`, each
// connection's backlog by `max_queued_bytes`: past either the connection is
// closed, its events kept for a reconnect). A dropped connection never
// stops a session's commands; an ended or idle-expired session kills them.
//
// Built on Boost.Asio (C++20 coroutines, one thread) and Boost.Beast's
// HTTP/1.1 parser and serializer; no HTTP is parsed by hand. Heavy to
// compile and off the umbrella header: include it where the server is built.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <csignal>
#include <cstring>
#include <pthread.h>
#include <ifaddrs.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bashexec/detail/kernel/socket_owner.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/server/executor_api.hpp"
#include "bashexec/server/http_guard.hpp"
#include "bashexec/server/http_sessions.hpp"
#include "bashexec/server/mcp_protocol.hpp"
#include "bashexec/server/mcp_tasks.hpp"
#include "bashexec/server/message_route.hpp"
#include "bashexec/server/request_parse.hpp"
#include "bashexec/server/rpc_id.hpp"
#include "bashexec/server/sse_replay.hpp"

// GCC 12 warns -Wmismatched-new-delete on Asio coroutine frames (a false
// positive: the frame's operator new and delete are Asio's own pair).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace bashexec::server {

/// How `mcp_http_server` listens, whom it admits and what it bounds.
struct mcp_http_options {
  /// Where it listens; port 0 takes any free port (`port()` says which).
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;
  /// The one endpoint.
  std::string path = "/mcp";
  /// The bearer token every request must carry; empty: none is asked, which
  /// only a loopback address allows (the constructor refuses otherwise).
  std::string token;
  /// Host and Origin values admitted besides the defaults (http_guard.hpp).
  std::vector<std::string> allowed_hosts;
  std::vector<std::string> allowed_origins;
  /// Sessions alive at once; an initialize past it is answered 503.
  std::size_t max_sessions = 64;
  /// Connections open at once; one past it is answered 503 and closed.
  std::size_t max_connections = 512;
  /// The bounds of one request: its header (431), its body (413; the
  /// message limit of the stdio transport), the time it may take to arrive.
  std::size_t max_header_bytes = std::size_t{16} << 10;
  std::size_t max_body_bytes = request_limits{}.max_line_bytes;
  std::chrono::milliseconds request_timeout{std::chrono::seconds(10)};
  /// How long a connection may wait for its next request.
  std::chrono::milliseconds keep_alive_timeout{std::chrono::seconds(60)};
  /// How long one write may wait for a client that does not read.
  std::chrono::milliseconds write_timeout{std::chrono::seconds(30)};
  /// Unread events one connection may hold before it is closed.
  std::size_t max_queued_bytes = std::size_t{8} << 20;
  /// A session with no request and no open stream for this long is ended
  /// (its commands killed).
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(30)};
  /// An SSE comment this often on a quiet stream: a dead client is noticed,
  /// and proxies keep the connection.
  std::chrono::milliseconds heartbeat{std::chrono::seconds(15)};
  /// Streams with requests still unanswered, per session (429 past it).
  std::size_t max_open_streams = 64;
  /// Refuse a connection from one of the commands this process runs (a
  /// descendant, or a process in a command cgroup one of its executors
  /// made), and one from this host whose process cannot be found: under
  /// `network: full` a confined command shares the host's loopback, and
  /// must not ask the server that confines it for a session of its own
  /// (docs/security.md, "MCP over HTTP"). Off only for a server whose
  /// clients are themselves such commands.
  bool refuse_own_commands = true;
  /// Each stream's replay buffer (sse_replay.hpp).
  std::size_t replay_events = 256;
  std::size_t replay_bytes = std::size_t{256} << 10;
  /// Bytes of messages written to a session and not yet taken by it (its
  /// server reads nothing while every worker slot is busy); a POST past it
  /// is answered 429.
  std::size_t max_session_backlog = std::size_t{32} << 20;
  /// The executor protocol (server/executor_api.hpp), served at
  /// `executor_path` for `remote_executor` behind the same admission (Host,
  /// Origin, token, own-command refusal); null: not served.
  std::shared_ptr<executor_api_backend> executor_api;
  std::string executor_path = "/exec/v1";
};

class mcp_http_server {
  using tcp = boost::asio::ip::tcp;
  using error_code = boost::system::error_code;
  using clock = std::chrono::steady_clock;
  using request = boost::beast::http::request<boost::beast::http::string_body>;
  using status = boost::beast::http::status;

 public:
  /// Binds and listens at once (so `port()` is known before `serve`).
  /// std::invalid_argument for options that cannot serve (a non-loopback
  /// address without a token); infrastructure_error when it cannot bind.
  mcp_http_server(http_session_factory sessions, mcp_http_options options)
      : options_(std::move(options)), sessions_factory_(std::move(sessions)), acceptor_(io_) {
    if (!sessions_factory_ && !options_.executor_api)
      throw std::invalid_argument("sessions: a session factory (or an executor_api) is required");
    if (options_.executor_api && (options_.executor_path.empty() || options_.executor_path.front() != '/' ||
                                  options_.executor_path == options_.path || options_.executor_path == live_path ||
                                  options_.executor_path == ready_path))
      throw std::invalid_argument(fmt::format("executor_path: {} must start with '/' and be no other endpoint's",
                                              options_.executor_path));
    if (options_.path.empty() || options_.path.front() != '/')
      throw std::invalid_argument("path: must start with '/'");
    if (options_.path == live_path || options_.path == ready_path)
      throw std::invalid_argument(fmt::format("path: {} is the health probes' own", options_.path));
    error_code ec;
    const auto address = boost::asio::ip::make_address(options_.address, ec);
    if (ec) throw std::invalid_argument(fmt::format("address: {} is not an IP address", options_.address));
    if (!address.is_loopback() && options_.token.empty())
      throw std::invalid_argument(fmt::format(
          "token: required when listening on {} (not the loopback): any host that reaches it could run commands",
          options_.address));
    const tcp::endpoint at(address, options_.port);
    acceptor_.open(at.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(at, ec);
    if (!ec) acceptor_.listen(boost::asio::socket_base::max_listen_connections, ec);
    if (ec)
      throw infrastructure_error(fmt::format("cannot listen on {}:{}: {}", options_.address, options_.port,
                                             ec.message()));
    port_ = acceptor_.local_endpoint().port();
    post_target_->io = &io_;
    hosts_ = http::default_hosts(address.to_string(), port_);
    hosts_.insert(hosts_.end(), options_.allowed_hosts.begin(), options_.allowed_hosts.end());
    origins_ = http::default_origins(hosts_);
    origins_.insert(origins_.end(), options_.allowed_origins.begin(), options_.allowed_origins.end());
  }

  mcp_http_server(const mcp_http_server&) = delete;
  mcp_http_server& operator=(const mcp_http_server&) = delete;

  ~mcp_http_server() {
    stop();
    {
      // An executor request answered from now on has nowhere to go.
      std::lock_guard lock(post_target_->mutex);
      post_target_->io = nullptr;
    }
    // A session whose thread serve() did not see finish: stopped above
    // (through the post that never ran, here), joined now.
    for (auto& s : all_sessions_) {
      if (s->backend) s->backend->stop();
      if (s->thread.joinable()) s->thread.join();
    }
  }

  std::uint16_t port() const noexcept { return port_; }
  /// The endpoint's address, as a client spells it.
  std::string url() const {
    const bool v6 = options_.address.find(':') != std::string::npos;
    return v6 ? fmt::format("http://[{}]:{}{}", options_.address, port_, options_.path)
              : fmt::format("http://{}:{}{}", options_.address, port_, options_.path);
  }

  /// Serves on the calling thread until `stop()`: then no connection is
  /// accepted, every session is stopped (calls in flight aborted, their
  /// answers still written to streams that are open), and it returns once
  /// every session's server has finished.
  void serve() {
    boost::asio::co_spawn(io_, accept_loop(), boost::asio::detached);
    boost::asio::co_spawn(io_, sweep_idle(), boost::asio::detached);
    io_.run();
  }

  /// From any thread, a signal-watching one included.
  void stop() noexcept {
    try {
      boost::asio::post(io_, [this] { begin_shutdown(); });
    } catch (...) {
    }
  }

 private:
  // ---- one connection's SSE output ----------------------------------------

  /// The events waiting to go out on one connection, and the timer that
  /// wakes its writer.
  struct sink {
    explicit sink(const boost::asio::any_io_executor& executor) : wake(executor) {}
    std::deque<std::string> queue;
    std::size_t bytes = 0;
    bool finished = false;  // the stream has nothing more: end the response
    bool dead = false;      // gone, too far behind, or replaced: close it
    boost::asio::steady_timer wake;

    void push(std::string event, std::size_t max_bytes) {
      if (dead || finished) return;
      bytes += event.size();
      queue.push_back(std::move(event));
      if (bytes > max_bytes) dead = true;
      wake.cancel();
    }
    void finish() {
      finished = true;
      wake.cancel();
    }
    void kill() {
      dead = true;
      wake.cancel();
    }
  };

  /// One SSE stream of a session: a POST's (its requests' responses still
  /// to come) or the session's own (GET). Its events outlive a connection.
  struct event_stream {
    event_stream(std::uint64_t number, std::size_t events, std::size_t bytes) : buffer(number, events, bytes) {}
    http::replay_buffer buffer;
    std::set<std::string> pending;  // keys of the requests not answered yet
    bool standalone = false;
    bool retired = false;
    std::shared_ptr<sink> attached;
    bool complete() const { return !standalone && pending.empty(); }
  };

  struct session {
    explicit session(boost::asio::io_context& io) : pipe(io) {}
    std::string id;
    std::unique_ptr<http_session_backend> backend;
    std::thread thread;
    // Our end of the socket pair: a socket, so that Asio writes it with
    // MSG_NOSIGNAL (a session that closed its end is EPIPE, never SIGPIPE).
    boost::asio::local::stream_protocol::socket pipe;
    std::deque<std::string> to_server;
    bool writing = false;
    std::size_t backlog = 0;  // bytes in to_server
    std::string read_buffer;
    std::map<std::uint64_t, std::shared_ptr<event_stream>> streams;
    std::deque<std::uint64_t> retired;
    std::uint64_t next_stream = 1;
    std::shared_ptr<event_stream> standalone;
    std::map<std::string, std::shared_ptr<event_stream>> by_request;
    std::map<std::string, std::weak_ptr<event_stream>> by_progress;
    std::map<std::string, std::weak_ptr<event_stream>> by_task;
    std::deque<std::string> undelivered;  // for the session's stream, when it opens
    std::size_t undelivered_bytes = 0;
    std::optional<std::string> initialize_key;
    std::set<std::string> cancelled;  // requests the client cancelled, whose answer may still come
    std::vector<std::weak_ptr<sink>> lingering;  // resumed streams already complete
    std::size_t attached = 0;
    std::size_t open_streams = 0;
    clock::time_point last_seen = clock::now();
    bool ended = false;
    bool finalized = false;
  };

  static auto token(error_code& ec) { return boost::asio::redirect_error(boost::asio::use_awaitable, ec); }

  static std::optional<std::string_view> header(const request& req, std::string_view name) {
    const auto it = req.find(boost::beast::string_view(name.data(), name.size()));
    if (it == req.end()) return std::nullopt;
    return std::string_view(it->value().data(), it->value().size());
  }

  static std::string method_of(const nlohmann::json& message) {
    const auto it = message.find("method");
    return it != message.end() && it->is_string() ? it->get<std::string>() : std::string();
  }

  static bool lists(std::string_view accept, std::string_view type) {
    return accept.find(type) != std::string_view::npos || accept.find("*/*") != std::string_view::npos;
  }

  // ---- accepting, idling, stopping ----------------------------------------

  boost::asio::awaitable<void> accept_loop() {
    for (;;) {
      error_code ec;
      tcp::socket socket = co_await acceptor_.async_accept(token(ec));
      if (stopping_) co_return;
      if (ec) {
        if (ec == boost::asio::error::operation_aborted) co_return;
        // EMFILE and the like: wait a moment rather than spin.
        boost::asio::steady_timer pause(io_, std::chrono::milliseconds(50));
        co_await pause.async_wait(token(ec));
        continue;
      }
      // Answers are small and interactive: each write goes out at once
      // rather than wait for the client's delayed ACK (Nagle).
      socket.set_option(tcp::no_delay(true), ec);
      if (options_.refuse_own_commands)
        if (auto why = own_command_peer(socket)) {
          boost::asio::co_spawn(io_, refuse_connection(std::move(socket), std::move(*why)), boost::asio::detached);
          continue;
        }
      boost::asio::co_spawn(io_, serve_connection(std::move(socket)), boost::asio::detached);
    }
  }

  /// This host's own address: loopback, the connection's local address, or
  /// one of the interfaces' (a command may connect to any of them).
  static bool host_address(boost::asio::ip::address peer, const boost::asio::ip::address& own) {
    if (peer.is_v6() && peer.to_v6().is_v4_mapped())
      peer = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, peer.to_v6());
    if (peer.is_loopback() || peer == own) return true;
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return true;  // cannot tell: treated as local, so checked
    bool found = false;
    for (const ifaddrs* at = list; at && !found; at = at->ifa_next) {
      if (!at->ifa_addr) continue;
      if (at->ifa_addr->sa_family == AF_INET && peer.is_v4())
        found = std::memcmp(&reinterpret_cast<const sockaddr_in*>(at->ifa_addr)->sin_addr,
                            peer.to_v4().to_bytes().data(), 4) == 0;
      else if (at->ifa_addr->sa_family == AF_INET6 && peer.is_v6())
        found = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(at->ifa_addr)->sin6_addr,
                            peer.to_v6().to_bytes().data(), 16) == 0;
    }
    ::freeifaddrs(list);
    return found;
  }

  /// Why a connection is refused before it is read, if it is: it comes from
  /// this host, and its process is one of the commands an executor runs, or
  /// cannot be found (gone already, or hidden from this server).
  static std::optional<std::string> own_command_peer(tcp::socket& socket) {
    error_code ec;
    const tcp::endpoint peer = socket.remote_endpoint(ec);
    if (ec) return "the peer's address cannot be read";
    const tcp::endpoint own = socket.local_endpoint(ec);
    if (ec) return "the connection's own address cannot be read";
    if (!host_address(peer.address(), own.address())) return std::nullopt;  // another host
    sockaddr_storage peer_at{};
    sockaddr_storage own_at{};
    std::memcpy(&peer_at, peer.data(), std::min<std::size_t>(peer.size(), sizeof peer_at));
    std::memcpy(&own_at, own.data(), std::min<std::size_t>(own.size(), sizeof own_at));
    const auto inode = bashexec::detail::tcp_socket_inode(peer_at, own_at);  // the peer's end: its own = peer
    if (!inode || *inode == 0) return "a connection from this host whose socket has no process";
    bool unreadable = false;
    const auto holders = bashexec::detail::socket_holders(*inode, unreadable);
    if (holders.empty()) return "a connection from this host by a process this server cannot see";
    const pid_t self = ::getpid();
    // This process's executors name their command cgroups bashexec-PID-….
    const std::string own_cgroups = fmt::format("bashexec-{}-", self);
    for (const pid_t pid : holders)
      if (pid != self && (bashexec::detail::descends_from(pid, self) ||
                          bashexec::detail::in_cgroup_named(pid, own_cgroups)))
        return fmt::format("a connection from a command that bashexec runs (pid {}): a command may not ask the "
                           "server that confines it for a session",
                           pid);
    return std::nullopt;
  }

  boost::asio::awaitable<void> refuse_connection(tcp::socket socket, std::string why) {
    boost::beast::tcp_stream stream(std::move(socket));
    co_await refuse_and_close(stream, status::forbidden, mcp::invalid_request, why);
  }

  boost::asio::awaitable<void> sweep_idle() {
    boost::asio::steady_timer timer(io_);
    const auto every = std::clamp<std::chrono::milliseconds>(options_.idle_timeout / 4, std::chrono::milliseconds(50),
                                                             std::chrono::milliseconds(1000));
    while (!stopping_) {
      timer.expires_after(every);
      error_code ec;
      co_await timer.async_wait(token(ec));
      const auto now = clock::now();
      std::vector<std::shared_ptr<session>> idle;
      for (const auto& [id, s] : sessions_)
        if (s->attached == 0 && now - s->last_seen > options_.idle_timeout) idle.push_back(s);
      for (const auto& s : idle) end_session(s);
    }
  }

  void begin_shutdown() {
    if (stopping_) return;
    stopping_ = true;
    error_code ignored;
    acceptor_.close(ignored);
    const auto live = sessions_;
    for (const auto& [id, s] : live) end_session(s);
    if (options_.executor_api) options_.executor_api->stop();
    boost::asio::co_spawn(io_, wind_down(), boost::asio::detached);
  }

  /// Waits for the sessions to finish and their last answers to be written
  /// (bounded), then ends `serve`.
  boost::asio::awaitable<void> wind_down() {
    boost::asio::steady_timer timer(io_);
    const auto deadline = clock::now() + std::chrono::seconds(10);
    while (clock::now() < deadline && (live_sessions_ > 0 || active_streams_ > 0 || executor_requests_ > 0)) {
      timer.expires_after(std::chrono::milliseconds(10));
      error_code ec;
      co_await timer.async_wait(token(ec));
    }
    io_.stop();
  }

  // ---- sessions -------------------------------------------------------------

  std::shared_ptr<session> create_session() {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
      throw infrastructure_error("socketpair for an MCP session failed");
    auto s = std::make_shared<session>(io_);
    s->id = http::new_session_id();
    const int theirs = pair[1];
    error_code assigned;
    s->pipe.assign(boost::asio::local::stream_protocol(), pair[0], assigned);
    if (assigned) {
      ::close(pair[0]);
      ::close(theirs);
      throw infrastructure_error(fmt::format("an MCP session's socket: {}", assigned.message()));
    }
    // Non-blocking for send_to_session's direct write (Asio's own
    // operations do not depend on it).
    s->pipe.non_blocking(true, assigned);
    if (assigned) {
      ::close(theirs);  // ours closes with the session
      throw infrastructure_error(fmt::format("an MCP session's socket: {}", assigned.message()));
    }
    try {
      s->backend = sessions_factory_(theirs, "http-" + s->id);
    } catch (...) {
      ::close(theirs);
      throw;
    }
    http_session_backend* backend = s->backend.get();
    s->thread = std::thread([backend, theirs] {
      // The session's server writes its end with write(2), and so do the
      // threads it starts (they inherit this mask): a closed peer is EPIPE
      // for them, never a SIGPIPE that would end the host.
      sigset_t pipe_signal;
      sigemptyset(&pipe_signal);
      sigaddset(&pipe_signal, SIGPIPE);
      ::pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
      backend->serve();
      // End of its output: the transport's reader sees it and finalizes.
      ::shutdown(theirs, SHUT_RDWR);
      ::close(theirs);
    });
    sessions_.emplace(s->id, s);
    all_sessions_.insert(s);
    ++live_sessions_;
    boost::asio::co_spawn(io_, read_session(s), boost::asio::detached);
    return s;
  }

  /// No more requests reach it; its server stops (calls in flight answer as
  /// aborted, background commands are killed) and is finalized at the end
  /// of its output.
  void end_session(const std::shared_ptr<session>& s) {
    if (s->ended) return;
    s->ended = true;
    sessions_.erase(s->id);
    if (s->backend) s->backend->stop();
  }

  void finalize(const std::shared_ptr<session>& s) {
    if (s->finalized) return;
    s->finalized = true;
    end_session(s);
    for (auto& [number, st] : s->streams)
      if (st->attached) st->attached->finish();
    for (auto& held : s->lingering)
      if (auto out = held.lock()) out->finish();
    s->lingering.clear();
    if (s->thread.joinable()) s->thread.join();  // it has returned: its output ended
    s->backend.reset();
    error_code ignored;
    s->pipe.close(ignored);
    s->streams.clear();
    s->by_request.clear();
    s->standalone.reset();
    all_sessions_.erase(s);
    --live_sessions_;
  }

  /// The session's output, one JSON-RPC message per line, each routed.
  boost::asio::awaitable<void> read_session(std::shared_ptr<session> s) {
    constexpr std::size_t max_line = std::size_t{64} << 20;
    for (;;) {
      error_code ec;
      const std::size_t n = co_await boost::asio::async_read_until(
          s->pipe, boost::asio::dynamic_buffer(s->read_buffer, max_line), '\n', token(ec));
      if (ec) break;
      std::string line = s->read_buffer.substr(0, n - 1);
      s->read_buffer.erase(0, n);
      route(s, std::move(line));
    }
    finalize(s);
  }

  void send_to_session(const std::shared_ptr<session>& s, std::string line) {
    line += '\n';
    if (!s->writing) {
      // Nothing queued: written now, as far as the socket takes it without
      // waiting. The request then reaches its server before this thread
      // writes the POST's response header (a TCP send, and a wakeup of the
      // client), and the common case needs no writer coroutine.
      error_code ec;
      const std::size_t written = s->pipe.write_some(boost::asio::buffer(line), ec);
      if (ec && ec != boost::asio::error::would_block && ec != boost::asio::error::try_again) {
        end_session(s);  // its server is gone: as when the writer fails
        return;
      }
      if (written == line.size()) return;
      line.erase(0, written);
    }
    s->backlog += line.size();
    s->to_server.push_back(std::move(line));
    // Marked here, not when the writer starts: co_spawn only schedules it,
    // and a second message before it runs must not start a second writer.
    if (!s->writing) {
      s->writing = true;
      boost::asio::co_spawn(io_, write_session(s), boost::asio::detached);
    }
  }

  /// The one writer of a session's queue (`writing` is set while it runs).
  boost::asio::awaitable<void> write_session(std::shared_ptr<session> s) {
    while (!s->to_server.empty()) {
      error_code ec;
      co_await boost::asio::async_write(s->pipe, boost::asio::buffer(s->to_server.front()), token(ec));
      if (ec) {
        s->to_server.clear();
        s->backlog = 0;
        end_session(s);
        break;
      }
      s->backlog -= s->to_server.front().size();
      s->to_server.pop_front();
    }
    s->writing = false;
  }

  // ---- routing what a session writes --------------------------------------

  static std::shared_ptr<event_stream> live(const std::map<std::string, std::weak_ptr<event_stream>>& index,
                                      const std::string& key) {
    const auto it = index.find(key);
    if (it == index.end()) return nullptr;
    auto st = it->second.lock();
    return st && !st->retired ? st : nullptr;
  }

  /// The newest POST stream still waiting for a response, preferring one
  /// with a connection.
  static std::shared_ptr<event_stream> newest_open(const session& s) {
    std::shared_ptr<event_stream> unattached;
    for (auto it = s.streams.rbegin(); it != s.streams.rend(); ++it) {
      const auto& st = it->second;
      if (st->standalone || st->complete()) continue;
      if (st->attached) return st;
      if (!unattached) unattached = st;
    }
    return unattached;
  }

  void route(const std::shared_ptr<session>& s, std::string line) {
    const mcp::message_route facts = mcp::route_line(line);
    const auto& answered = facts.answered;
    std::shared_ptr<event_stream> target;
    if (answered.size() == 1 && s->cancelled.erase(answered.front()) != 0)
      return;  // answered before the cancellation took: the client forgot it
    if (!answered.empty()) {
      for (const auto& key : answered)
        if (auto it = s->by_request.find(key); it != s->by_request.end()) {
          if (!target) target = it->second;
          it->second->pending.erase(key);
          if (it->second != target) maybe_retire(*s, it->second);
          s->by_request.erase(it);
        }
      if (s->initialize_key && answered.front() == *s->initialize_key) {
        s->initialize_key.reset();
        if (facts.is_error) {
          // A session whose initialize failed serves nothing.
          if (target) deliver(*s, target, line);
          end_session(s);
          return;
        }
      }
    } else if (facts.what == mcp::message_route::shape::message) {
      if (facts.progress_token) target = live(s->by_progress, *facts.progress_token);
      if (!target && facts.task) target = live(s->by_task, *facts.task);
      if (!target) {
        const auto open = newest_open(*s);
        const bool standalone_attached = s->standalone && s->standalone->attached;
        if (facts.is_request && open && open->attached)
          target = open;  // a question goes where the call it is about is heard
        else if (standalone_attached)
          target = s->standalone;
        else if (open && open->attached)
          target = open;
        else if (s->standalone)
          target = s->standalone;  // kept for the client's reconnect
        else
          target = open;
      }
    }
    if (!target) {
      keep_undelivered(*s, std::move(line));
      return;
    }
    deliver(*s, target, line);
  }

  void keep_undelivered(session& s, std::string line) {
    s.undelivered_bytes += line.size();
    s.undelivered.push_back(std::move(line));
    while (s.undelivered.size() > options_.replay_events || s.undelivered_bytes > options_.replay_bytes) {
      s.undelivered_bytes -= s.undelivered.front().size();
      s.undelivered.pop_front();
    }
  }

  void deliver(session& s, const std::shared_ptr<event_stream>& st, std::string_view data) {
    std::string event = st->buffer.append(data);
    if (st->attached) st->attached->push(std::move(event), options_.max_queued_bytes);
    maybe_retire(s, st);
  }

  /// A POST stream whose every response is out ends its response; it stays
  /// a while for a client that reconnects to read its end.
  void maybe_retire(session& s, const std::shared_ptr<event_stream>& st) {
    if (!st->complete() || st->retired) return;
    st->retired = true;
    --s.open_streams;
    if (st->attached) st->attached->finish();
    s.retired.push_back(st->buffer.stream());
    while (s.retired.size() > 16) {
      s.streams.erase(s.retired.front());
      s.retired.pop_front();
    }
  }

  // ---- connections ------------------------------------------------------------

  boost::asio::awaitable<void> serve_connection(tcp::socket socket) {
    struct counted {
      std::size_t& count;
      explicit counted(std::size_t& total) : count(total) { ++count; }
      ~counted() { --count; }
    } count(connections_);
    boost::beast::tcp_stream stream(std::move(socket));
    boost::beast::flat_buffer buffer;
    error_code ec;
    if (connections_ > options_.max_connections) {
      co_await refuse_and_close(stream, status::service_unavailable, mcp::internal_error,
                                fmt::format("the server holds {} connections already", options_.max_connections));
      co_return;
    }
    for (;;) {
      if (buffer.size() == 0) {
        // The next request may be a while coming on a kept-alive connection.
        stream.expires_after(options_.keep_alive_timeout);
        const std::size_t got = co_await stream.async_read_some(buffer.prepare(4096), token(ec));
        if (ec || stopping_) co_return;
        buffer.commit(got);
      }
      // From its first byte, the whole request within request_timeout.
      stream.expires_after(options_.request_timeout);
      boost::beast::http::request_parser<boost::beast::http::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
      parser.body_limit(options_.max_body_bytes);
      co_await boost::beast::http::async_read_header(stream, buffer, parser, token(ec));
      if (ec == boost::beast::http::error::header_limit) {
        co_await refuse_and_close(
            stream, status::request_header_fields_too_large, mcp::invalid_request,
            fmt::format("the request header is longer than {} bytes", options_.max_header_bytes));
        co_return;
      }
      if (ec == boost::beast::http::error::body_limit) {  // a Content-Length past the limit
        co_await refuse_and_close(stream, status::payload_too_large, mcp::invalid_request,
                                  fmt::format("the request body is longer than {} bytes", options_.max_body_bytes));
        co_return;
      }
      if (ec) {
        if (ec != boost::beast::error::timeout && ec != boost::beast::http::error::end_of_stream &&
            ec != boost::asio::error::eof && ec != boost::asio::error::connection_reset)
          co_await refuse(stream, status::bad_request, mcp::invalid_request, "malformed HTTP request", false);
        co_return;
      }
      co_await boost::beast::http::async_read(stream, buffer, parser, token(ec));
      if (ec == boost::beast::http::error::body_limit) {
        co_await refuse_and_close(stream, status::payload_too_large, mcp::invalid_request,
                                  fmt::format("the request body is longer than {} bytes", options_.max_body_bytes));
        co_return;
      }
      if (ec) co_return;
      stream.expires_never();
      request req = parser.release();
      const bool keep = co_await handle(stream, req);
      if (!keep || !req.keep_alive() || stopping_) {
        co_await close_gracefully(stream);
        co_return;
      }
    }
  }

  /// Shuts the sending side and drains what the client still sends (a
  /// little, briefly): closing with unread bytes resets the connection, and
  /// a reset can destroy the answer before the client reads it.
  static boost::asio::awaitable<void> close_gracefully(boost::beast::tcp_stream& stream) {
    error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) co_return;
    stream.expires_after(std::chrono::seconds(2));
    std::array<char, 16384> sink;
    for (std::size_t drained = 0; drained < (std::size_t{1} << 20);) {
      const std::size_t got = co_await stream.async_read_some(boost::asio::buffer(sink), token(ec));
      if (ec) break;
      drained += got;
    }
    stream.socket().close(ec);
  }

  template <class Response>
  boost::asio::awaitable<bool> write(boost::beast::tcp_stream& stream, Response& response) {
    error_code ec;
    stream.expires_after(options_.write_timeout);
    co_await boost::beast::http::async_write(stream, response, token(ec));
    stream.expires_never();
    co_return !ec;
  }

  /// An HTTP refusal that is also a JSON-RPC error (id null, or `id`).
  boost::asio::awaitable<bool> refuse(boost::beast::tcp_stream& stream, status code, int rpc_code,
                                      std::string_view message, bool keep, nlohmann::json id = nullptr,
                                      std::string_view extra_header = {}, std::string_view extra_value = {}) {
    boost::beast::http::response<boost::beast::http::string_body> response{code, 11};
    response.set(boost::beast::http::field::content_type, "application/json");
    if (!extra_header.empty())
      response.set(boost::beast::string_view(extra_header.data(), extra_header.size()),
                   boost::beast::string_view(extra_value.data(), extra_value.size()));
    response.keep_alive(keep);
    response.body() = mcp::dump_line(mcp::error(std::move(id), rpc_code, message));
    response.prepare_payload();
    const bool written = co_await write(stream, response);
    co_return written && keep;
  }

  /// A refusal after which the connection is closed (gracefully).
  boost::asio::awaitable<void> refuse_and_close(boost::beast::tcp_stream& stream, status code, int rpc_code,
                                                std::string_view message) {
    co_await refuse(stream, code, rpc_code, message, false);
    co_await close_gracefully(stream);
  }

  /// The health probes, for an orchestrator's liveness and readiness
  /// checks (docs/tool-protocol.md, "Health probes"): answered before the
  /// Host, Origin and token checks — a kubelet sends the pod's address as
  /// Host and cannot read a Secret into a header — and so they say nothing
  /// but the state. Live: the server's loop answers. Ready: it would open a
  /// session now (not shutting down, not at max_sessions).
  static constexpr std::string_view live_path = "/livez";
  static constexpr std::string_view ready_path = "/readyz";

  boost::asio::awaitable<bool> answer_probe(boost::beast::tcp_stream& stream, const request& req, bool readiness) {
    namespace beast_http = boost::beast::http;
    const bool keep = req.keep_alive();
    if (req.method() != beast_http::verb::get && req.method() != beast_http::verb::head)
      co_return co_await refuse(stream, status::method_not_allowed, mcp::invalid_request,
                                "a health probe is a GET", keep, nullptr, "Allow", "GET, HEAD");
    std::string_view state = "live";
    if (readiness) state = stopping_ ? "stopping" : live_sessions_ >= options_.max_sessions ? "full" : "ready";
    const bool fine = state == "live" || state == "ready";
    beast_http::response<beast_http::string_body> response{fine ? status::ok : status::service_unavailable, 11};
    response.set(beast_http::field::content_type, "application/json");
    response.set(beast_http::field::cache_control, "no-store");
    response.keep_alive(keep);
    if (req.method() == beast_http::verb::get) response.body() = fmt::format("{{\"status\":\"{}\"}}", state);
    response.prepare_payload();
    const bool written = co_await write(stream, response);
    co_return written && keep;
  }

  /// Admits or refuses a request, then serves it. False: close the connection.
  boost::asio::awaitable<bool> handle(boost::beast::tcp_stream& stream, request& req) {
    namespace beast_http = boost::beast::http;
    const std::string_view target(req.target().data(), req.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    if (path == live_path || path == ready_path) co_return co_await answer_probe(stream, req, path == ready_path);
    const auto host = header(req, "Host");
    if (!host)
      co_return co_await refuse(stream, status::bad_request, mcp::invalid_request, "a Host header is required",
                                false);
    if (!http::host_allowed(*host, hosts_))
      co_return co_await refuse(stream, status::forbidden, mcp::invalid_request,
                                fmt::format("Host {} is not one this server answers to (--allow-host adds one)",
                                            command_summary(*host, 100)),
                                false);
    if (!http::origin_allowed(header(req, "Origin"), origins_))
      co_return co_await refuse(stream, status::forbidden, mcp::invalid_request,
                                fmt::format("Origin {} is not allowed (--allow-origin adds one)",
                                            command_summary(*header(req, "Origin"), 100)),
                                false);
    if (!options_.token.empty() && !http::bearer_matches(header(req, "Authorization"), options_.token))
      co_return co_await refuse(stream, status::unauthorized, mcp::invalid_request,
                                "a valid bearer token is required (Authorization: Bearer TOKEN)", true, nullptr,
                                "WWW-Authenticate", "Bearer");
    if (options_.executor_api && path == options_.executor_path) {
      if (stopping_)
        co_return co_await refuse(stream, status::service_unavailable, mcp::internal_error,
                                  "the server is shutting down", false);
      co_return co_await handle_executor(stream, req);
    }
    if (path != options_.path || !sessions_factory_)
      co_return co_await refuse(stream, status::not_found, mcp::invalid_request,
                                fmt::format("no endpoint here: MCP is served at {}", options_.path), true);
    if (stopping_)
      co_return co_await refuse(stream, status::service_unavailable, mcp::internal_error,
                                "the server is shutting down", false);
    switch (req.method()) {
      case beast_http::verb::post: co_return co_await handle_post(stream, req);
      case beast_http::verb::get: co_return co_await handle_get(stream, req);
      case beast_http::verb::delete_: co_return co_await handle_delete(stream, req);
      default:
        co_return co_await refuse(stream, status::method_not_allowed, mcp::invalid_request,
                                  "the MCP endpoint takes POST, GET and DELETE", true, nullptr,
                                  "Allow", "GET, POST, DELETE");
    }
  }

  /// The session the request names: refused 400 without an id, 404 for one
  /// that is not (or no longer) a session, 400 for a protocol version the
  /// server does not speak.
  boost::asio::awaitable<std::shared_ptr<session>> find_session(boost::beast::tcp_stream& stream, const request& req,
                                                                bool& keep) {
    const auto id = header(req, "Mcp-Session-Id");
    if (!id) {
      keep = co_await refuse(stream, status::bad_request, mcp::invalid_request,
                             "an MCP-Session-Id header is required (initialize first)", true);
      co_return nullptr;
    }
    const auto it = http::plausible_session_id(*id) ? sessions_.find(std::string(*id)) : sessions_.end();
    if (it == sessions_.end()) {
      keep = co_await refuse(stream, status::not_found, mcp::invalid_request,
                             "no such session (it ended or expired): initialize a new one", true);
      co_return nullptr;
    }
    if (const auto version = header(req, "MCP-Protocol-Version"); !http::header_protocol_version(version)) {
      keep = co_await refuse(stream, status::bad_request, mcp::invalid_request,
                             fmt::format("MCP-Protocol-Version {} is not one this server speaks",
                                         command_summary(*version, 40)),
                             true);
      co_return nullptr;
    }
    it->second->last_seen = clock::now();
    co_return it->second;
  }

  // ---- the executor protocol ---------------------------------------------------

  /// Where an executor request's answer is posted, from whatever thread
  /// gives it; null once this server is being destroyed.
  struct post_target {
    std::mutex mutex;
    boost::asio::io_context* io = nullptr;
  };

  /// One request of the executor protocol: handed to the backend, answered
  /// when it answers (a long poll waits here, on no thread).
  boost::asio::awaitable<bool> handle_executor(boost::beast::tcp_stream& stream, request& req) {
    namespace beast_http = boost::beast::http;
    const bool keep = req.keep_alive();
    if (req.method() != beast_http::verb::post)
      co_return co_await refuse(stream, status::method_not_allowed, mcp::invalid_request,
                                "the executor endpoint takes POST", keep, nullptr, "Allow", "POST");
    const auto type = header(req, "Content-Type");
    if (!type || !http::iequal(type->substr(0, std::min<std::size_t>(type->size(), 16)), "application/json"))
      co_return co_await refuse(stream, status::unsupported_media_type, mcp::invalid_request,
                                "a POST carries Content-Type: application/json", keep);
    struct pending {
      explicit pending(boost::asio::io_context& io) : wake(io) {}
      boost::asio::steady_timer wake;
      std::optional<std::pair<unsigned, std::string>> answer;
    };
    auto waiting = std::make_shared<pending>(io_);
    waiting->wake.expires_at(boost::asio::steady_timer::time_point::max());
    ++executor_requests_;
    options_.executor_api->handle(std::move(req.body()), [waiting, target = post_target_](unsigned code,
                                                                                          std::string body) {
      std::lock_guard lock(target->mutex);
      if (target->io == nullptr) return;
      boost::asio::post(*target->io, [waiting, code, body = std::move(body)]() mutable {
        waiting->answer.emplace(code, std::move(body));
        waiting->wake.cancel();
      });
    });
    while (!waiting->answer) {
      error_code ec;
      co_await waiting->wake.async_wait(token(ec));
    }
    --executor_requests_;
    beast_http::response<beast_http::string_body> response{static_cast<status>(waiting->answer->first), 11};
    response.set(beast_http::field::content_type, "application/json");
    response.set(beast_http::field::cache_control, "no-store");
    response.keep_alive(keep);
    response.body() = std::move(waiting->answer->second);
    response.prepare_payload();
    const bool written = co_await write(stream, response);
    co_return written && keep;
  }

  boost::asio::awaitable<bool> handle_post(boost::beast::tcp_stream& stream, request& req) {
    const auto type = header(req, "Content-Type");
    if (!type || !http::iequal(type->substr(0, std::min<std::size_t>(type->size(), 16)), "application/json"))
      co_return co_await refuse(stream, status::unsupported_media_type, mcp::invalid_request,
                                "a POST carries Content-Type: application/json", true);
    const auto accept = header(req, "Accept");
    if (!accept || !lists(*accept, "application/json") || !lists(*accept, "text/event-stream"))
      co_return co_await refuse(stream, status::not_acceptable, mcp::invalid_request,
                                "a POST must accept application/json and text/event-stream", true);
    // In JSON a raw line break can only be whitespace between tokens: the
    // message becomes one line exactly.
    std::string& body = req.body();
    for (char& c : body)
      if (c == '\n' || c == '\r') c = ' ';
    request_limits limits;
    limits.max_line_bytes = options_.max_body_bytes;
    parsed_line parsed = parse_request_line(body, limits, /*allow_array=*/true, /*exact_ids=*/true);
    if (!parsed.request) {
      const auto refusal = mcp::refusal(std::move(parsed));
      boost::beast::http::response<boost::beast::http::string_body> response{status::bad_request, 11};
      response.set(boost::beast::http::field::content_type, "application/json");
      response.body() = mcp::dump_line(refusal);
      response.prepare_payload();
      co_return co_await write(stream, response);
    }
    const nlohmann::json& message = *parsed.request;
    const bool initialize = message.is_object() && method_of(message) == "initialize";
    std::shared_ptr<session> s;
    bool keep = true;
    if (initialize) {
      if (header(req, "Mcp-Session-Id"))
        co_return co_await refuse(stream, status::bad_request, mcp::invalid_request,
                                  "initialize opens a new session: send it without MCP-Session-Id", true,
                                  message.value("id", nlohmann::json()));
      if (live_sessions_ >= options_.max_sessions)
        co_return co_await refuse(stream, status::service_unavailable, mcp::internal_error,
                                  fmt::format("the server holds {} sessions already; end one (DELETE) or wait for "
                                              "one to expire",
                                              options_.max_sessions),
                                  true, message.value("id", nlohmann::json()), "Retry-After", "5");
      std::string failure;
      try {
        s = create_session();
      } catch (const std::exception& e) {
        failure = e.what();
      }
      if (!s)
        co_return co_await refuse(stream, status::internal_server_error, mcp::internal_error,
                                  fmt::format("the session could not be started: {}", failure), true);
    } else {
      s = co_await find_session(stream, req, keep);
      if (!s) co_return keep;
    }
    if (s->backlog > options_.max_session_backlog)
      co_return co_await refuse(stream, status::too_many_requests, mcp::invalid_request,
                                fmt::format("the session has {} bytes of messages it has not read yet (all its "
                                            "calls are busy); retry once some have answered",
                                            s->backlog),
                                true, nullptr, "Retry-After", "1");
    // The requests in it (a batch holds several), by key.
    std::vector<const nlohmann::json*> requests;
    const auto collect = [&](const nlohmann::json& element) {
      if (element.is_object() && element.contains("id") && element.contains("method")) requests.push_back(&element);
    };
    if (message.is_array())
      for (const auto& element : message) collect(element);
    else
      collect(message);
    // A cancelled request gets no response (the MCP layer drops it): its
    // stream ends now rather than wait for one.
    const auto cancel = [&](const nlohmann::json& element) {
      if (!element.is_object() || method_of(element) != "notifications/cancelled") return;
      const auto params = element.find("params");
      if (params == element.end() || !params->is_object() || !params->contains("requestId")) return;
      const std::string key = mcp::id_key((*params)["requestId"]);
      const auto it = s->by_request.find(key);
      if (it == s->by_request.end()) return;
      const auto st = it->second;
      st->pending.erase(key);
      s->by_request.erase(it);
      if (s->cancelled.size() >= 1024) s->cancelled.erase(s->cancelled.begin());
      s->cancelled.insert(key);
      maybe_retire(*s, st);
    };
    if (message.is_array())
      for (const auto& element : message) cancel(element);
    else
      cancel(message);
    if (requests.empty()) {
      send_to_session(s, std::move(body));
      boost::beast::http::response<boost::beast::http::empty_body> accepted{status::accepted, 11};
      accepted.keep_alive(req.keep_alive());
      accepted.prepare_payload();
      co_return co_await write(stream, accepted);
    }
    std::set<std::string> keys;
    for (const auto* r : requests) {
      const std::string key = mcp::id_key((*r)["id"]);
      if (s->by_request.count(key) != 0 || !keys.insert(key).second)
        co_return co_await refuse(stream, status::conflict, mcp::invalid_request,
                                  "a request with this id is still in flight", true, (*r)["id"]);
    }
    if (s->open_streams >= options_.max_open_streams)
      co_return co_await refuse(stream, status::too_many_requests, mcp::invalid_request,
                                fmt::format("the session has {} requests unanswered already",
                                            options_.max_open_streams),
                                true);
    auto st = std::make_shared<event_stream>(s->next_stream++, options_.replay_events, options_.replay_bytes);
    ++s->open_streams;
    s->streams.emplace(st->buffer.stream(), st);
    for (const auto* r : requests) {
      const std::string key = mcp::id_key((*r)["id"]);
      st->pending.insert(key);
      s->by_request[key] = st;
      s->cancelled.erase(key);  // an id used again is the new request's
      if (initialize) s->initialize_key = key;
      const auto params = r->find("params");
      if (params == r->end() || !params->is_object()) continue;
      if (const auto meta = params->find("_meta"); meta != params->end() && meta->is_object())
        if (const auto progress = meta->find("progressToken"); progress != meta->end())
          s->by_progress[mcp::id_key(*progress)] = st;
      if ((*r)["method"] == "tasks/result")
        if (const auto task = params->find("taskId"); task != params->end() && task->is_string())
          s->by_task[task->get<std::string>()] = st;
    }
    send_to_session(s, std::move(body));
    std::vector<std::string> first{http::priming_event(st->buffer.stream())};
    co_return co_await stream_events(stream, s, st, initialize, std::move(first));
  }

  boost::asio::awaitable<bool> handle_get(boost::beast::tcp_stream& stream, request& req) {
    const auto accept = header(req, "Accept");
    if (!accept || !lists(*accept, "text/event-stream"))
      co_return co_await refuse(stream, status::not_acceptable, mcp::invalid_request,
                                "a GET must accept text/event-stream", true);
    bool keep = true;
    auto s = co_await find_session(stream, req, keep);
    if (!s) co_return keep;
    std::vector<std::string> first;
    std::shared_ptr<event_stream> st;
    if (const auto last = header(req, "Last-Event-ID")) {
      const auto seen = http::parse_event_id(*last);
      const auto it = seen ? s->streams.find(seen->stream) : s->streams.end();
      http::replay replayed;
      if (it != s->streams.end()) replayed = it->second->buffer.since(*seen);
      if (it == s->streams.end() || replayed.what == http::replay::kind::unknown)
        co_return co_await refuse(stream, status::bad_request, mcp::invalid_request,
                                  fmt::format("Last-Event-ID {} is no event this session can resume from",
                                              command_summary(*last, 40)),
                                  true);
      st = it->second;
      if (replayed.what == http::replay::kind::gap) {
        // Said, not hidden: the oldest events past the replay bound are lost.
        const nlohmann::json warning = mcp::notification(
            "notifications/message",
            {{"level", "warning"},
             {"logger", "bashexec"},
             {"data", fmt::format("events after {} were dropped from the replay buffer ({} events, {} bytes per "
                                  "stream); what follows is what it still holds",
                                  std::string(*last), options_.replay_events, options_.replay_bytes)}});
        first.push_back(fmt::format("event: message\ndata: {}\n\n", mcp::dump_line(warning)));
      }
      for (auto& event : replayed.events) first.push_back(std::move(event));
    } else {
      // A second GET replaces the first (whose connection a reconnecting
      // client has lost, though the server may not have noticed yet).
      if (!s->standalone) {
        s->standalone = std::make_shared<event_stream>(s->next_stream++, options_.replay_events, options_.replay_bytes);
        s->standalone->standalone = true;
        s->streams.emplace(s->standalone->buffer.stream(), s->standalone);
      }
      st = s->standalone;
      first.push_back(http::priming_event(st->buffer.stream()));
      while (!s->undelivered.empty()) {
        first.push_back(st->buffer.append(s->undelivered.front()));
        s->undelivered_bytes -= s->undelivered.front().size();
        s->undelivered.pop_front();
      }
    }
    co_return co_await stream_events(stream, s, st, false, std::move(first));
  }

  boost::asio::awaitable<bool> handle_delete(boost::beast::tcp_stream& stream, request& req) {
    bool keep = true;
    auto s = co_await find_session(stream, req, keep);
    if (!s) co_return keep;
    end_session(s);
    boost::beast::http::response<boost::beast::http::empty_body> ended{status::ok, 11};
    ended.keep_alive(req.keep_alive());
    ended.prepare_payload();
    co_return co_await write(stream, ended);
  }

  /// The SSE response: `first` (a replay), then the stream's events as they
  /// come, until it is complete (a POST's) or the connection goes.
  boost::asio::awaitable<bool> stream_events(boost::beast::tcp_stream& stream, std::shared_ptr<session> s,
                                             std::shared_ptr<event_stream> st, bool with_session_id,
                                             std::vector<std::string> first) {
    namespace beast_http = boost::beast::http;
    beast_http::response<beast_http::empty_body> response{status::ok, 11};
    response.set(beast_http::field::content_type, "text/event-stream");
    response.set(beast_http::field::cache_control, "no-cache");
    if (with_session_id) response.set("Mcp-Session-Id", s->id);
    response.chunked(true);
    auto out = std::make_shared<sink>(stream.get_executor());
    for (auto& event : first) out->push(std::move(event), std::numeric_limits<std::size_t>::max());
    if (st->attached) st->attached->kill();  // a reconnect replaces the connection it lost
    st->attached = out;
    ++s->attached;
    ++active_streams_;
    if (s->finalized) {
      out->finish();
    } else if (st->complete()) {
      if (first.empty()) {
        // A client resuming a stream whose end it has read (the SDK does
        // after an error response): held open, not ended, or it would come
        // back at once, and again. It ends with the session or the client.
        std::erase_if(s->lingering, [](const std::weak_ptr<sink>& held) { return held.expired(); });
        s->lingering.push_back(out);
      } else {
        out->finish();
      }
    }
    struct detach {
      mcp_http_server& server;
      session& s;
      event_stream& st;
      const std::shared_ptr<sink>& out;
      ~detach() {
        if (st.attached == out) st.attached.reset();
        --s.attached;
        s.last_seen = clock::now();
        --server.active_streams_;
      }
    } on_exit{*this, *s, *st, out};

    // The header and the events ready go out in one write, and the last
    // events with the end of the response: on the loopback each write is a
    // packet and a wakeup of the client. The chunk framing (RFC 9112 7.1:
    // hex size, CRLF, data, CRLF; a zero chunk ends it) is written here for
    // that reason; Beast serializes the header.
    std::ostringstream head;
    head << response.base();
    std::string wire = head.str();
    error_code ec;
    for (;;) {
      if (out->dead) co_return false;
      if (!out->queue.empty() || out->finished || !wire.empty()) {
        std::size_t size = 0;
        for (const auto& event : out->queue) size += event.size();
        if (size > 0) {
          wire += fmt::format("{:x}\r\n", size);
          for (const auto& event : out->queue) wire += event;
          wire += "\r\n";
        }
        out->queue.clear();
        out->bytes = 0;
        const bool last = out->finished;
        if (last) wire += "0\r\n\r\n";
        stream.expires_after(options_.write_timeout);
        co_await boost::asio::async_write(stream, boost::asio::buffer(wire), token(ec));
        stream.expires_never();
        wire.clear();
        if (ec) co_return false;
        if (last) co_return true;
        continue;
      }
      out->wake.expires_after(options_.heartbeat);
      co_await out->wake.async_wait(token(ec));
      if (!ec && out->queue.empty() && !out->finished && !out->dead) {
        constexpr std::string_view beat = ": keep-alive\n\n";  // an SSE comment
        wire = fmt::format("{:x}\r\n{}\r\n", beat.size(), beat);
      }
    }
  }

  mcp_http_options options_;
  http_session_factory sessions_factory_;
  std::vector<std::string> hosts_;
  std::vector<std::string> origins_;
  std::uint16_t port_ = 0;
  std::map<std::string, std::shared_ptr<session>> sessions_;  // by id, while they take requests
  std::set<std::shared_ptr<session>> all_sessions_;          // until finalized
  std::size_t live_sessions_ = 0;
  std::size_t connections_ = 0;
  std::size_t active_streams_ = 0;
  std::size_t executor_requests_ = 0;
  bool stopping_ = false;
  // Last: destroyed first, with the coroutine frames it still holds, while
  // the state they refer to is alive.
  boost::asio::io_context io_{1};
  std::shared_ptr<post_target> post_target_ = std::make_shared<post_target>();
  tcp::acceptor acceptor_;
};

}  // namespace bashexec::server

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

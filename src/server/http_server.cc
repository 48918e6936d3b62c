#include "server/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace fovea::http {

using Clock = std::chrono::steady_clock;

// A connection the poller holds reads into `buffer`; `parser` takes the current request out of it.
struct Server::Connection {
  enum class Phase { Idle, Head, Body };
  explicit Connection(const Limits& limits) : parser(limits) {}
  int fd = -1;
  std::string buffer;  // bytes received and not yet parsed (pipelined requests)
  RequestParser parser;
  Phase phase = Phase::Idle;
  bool triaged = false;                          // the head of the current request went through triage
  bool fresh = true;                             // bytes (or a returned connection) the parser has not seen
  Clock::time_point deadline;                    // of the phase: idle keep-alive, head, or body
  Clock::time_point last_active = Clock::now();  // last byte received or response sent: eviction order
  Request request;                               // the complete request, for the handler
  size_t reserved = 0;                           // body bytes counted against max_body_memory
};

namespace {

// The body of errors the server itself answers (before any handler runs), in OpenAI's error shape.
std::string error_body(const std::string& message, const char* type) {
  std::string escaped;
  for (char c : message) {
    if (c == '"' || c == '\\') escaped += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) escaped += c;
  }
  return std::string("{\"error\":{\"message\":\"") + escaped + "\",\"type\":\"" + type +
         "\",\"param\":null,\"code\":null}}";
}

bool send_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;  // EPIPE, ECONNRESET, or the send timeout (EAGAIN)
    }
    data += n;
    size -= size_t(n);
  }
  return true;
}

// The poller never blocks on a client: what does not fit the socket's send buffer at once is not sent (the
// replies it sends are small; a client that does not read them loses its connection).
bool send_now(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += size_t(n);
  }
  return true;
}

std::string timeout_reply() {
  return format_response(408, "application/json", error_body("request timed out", "invalid_request_error"), false);
}

Clock::time_point after_ms(Clock::time_point t, int ms) { return t + std::chrono::milliseconds(ms); }

class ExchangeImpl final : public Exchange {
 public:
  ExchangeImpl(int fd, const Request& request, const std::atomic<bool>& stopping)
      : fd_(fd), request_(request), stopping_(stopping) {}

  const Request& request() const override { return request_; }
  bool responded() const { return started_; }
  // An unfinished stream cannot be followed by another response on the same connection.
  bool keep_alive() const {
    return request_.keep_alive && !close_after_ && !stopping_.load() && !gone_ && !streaming_;
  }
  bool gone() const { return gone_; }

  bool respond(int status, const std::string& content_type, const std::string& body,
               const std::vector<std::string>& extra_headers) override {
    if (started_) return false;
    started_ = true;
    return send(format_response(status, content_type, request_.method == "HEAD" ? "" : body, keep_alive(),
                                extra_headers));
  }
  bool begin_stream(int status, const std::string& content_type,
                    const std::vector<std::string>& extra_headers) override {
    if (started_) return false;
    started_ = true;
    const std::string head = format_chunked_head(status, content_type, keep_alive(), extra_headers);
    streaming_ = true;
    return send(head);
  }
  bool write_chunk(const std::string& data) override { return streaming_ && send(format_chunk(data)); }
  bool end_stream() override {
    if (!streaming_) return false;
    streaming_ = false;
    return send(chunk_terminator());
  }
  bool client_gone() override {
    if (gone_) return true;
    pollfd p{fd_, POLLRDHUP, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) gone_ = true;
    return gone_;
  }
  void close_after() override { close_after_ = true; }

 private:
  bool send(const std::string& data) {
    if (gone_) return false;
    if (!send_all(fd_, data.data(), data.size())) gone_ = true;
    return !gone_;
  }

  int fd_;
  const Request& request_;
  const std::atomic<bool>& stopping_;
  bool started_ = false;
  bool streaming_ = false;
  bool close_after_ = false;
  bool gone_ = false;
};

int open_listen_socket(const std::string& host, int port, int* bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  FOVEA_CHECK(rc == 0, "cannot resolve listen address '", host, "': ", gai_strerror(rc));
  std::string last_error = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  FOVEA_CHECK(fd >= 0, "cannot listen on ", host, ":", port, ": ", last_error);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *bound_port = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                           : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return fd;
}

}  // namespace

Server::Server(ServerOptions options, Handler handler, Triage triage)
    : options_(std::move(options)), handler_(std::move(handler)), triage_(std::move(triage)) {}

Server::~Server() { stop(); }

void Server::start() {
  FOVEA_CHECK(listen_fd_ < 0 && !poller_.joinable(), "server already started");
  listen_fd_ = open_listen_socket(options_.host, options_.port, &port_);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  FOVEA_CHECK(wake_fd_ >= 0, "eventfd: ", std::strerror(errno));
  accepting_ = true;
  poller_ = std::thread([this] { poll_loop(); });
  for (int i = 0; i < std::max(1, options_.handler_threads); ++i) workers_.emplace_back([this] { worker_loop(); });
}

void Server::wake_poller() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void Server::stop_accepting() {
  accepting_ = false;
  wake_poller();
}

bool Server::wait_idle(int timeout_ms) {
  std::unique_lock lock(mutex_);
  return idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [this] { return active_requests_.load() == 0 && ready_.empty(); });
}

void Server::stop() {
  {
    // Set under the workers' mutex: a worker that has checked its wait's predicate but not yet blocked holds
    // it, so it either sees stopping_ or is blocked when notify_all comes. Without the lock the notify could fall
    // between the two and that worker slept forever, hanging stop() (a server stopped right after start: found
    // by the ThreadSanitizer run of test_fetch, 1 in ~18 repetitions).
    std::lock_guard lock(mutex_);
    if (stopping_.exchange(true)) return;
  }
  accepting_ = false;
  wake_poller();
  work_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  for (auto& w : workers_) w.join();
  workers_.clear();
  std::lock_guard lock(mutex_);
  for (auto& c : ready_) close_connection(std::move(c));
  for (auto& c : returned_) close_connection(std::move(c));
  ready_.clear();
  returned_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
}

bool Server::reserve_body(Connection& conn) {
  const Request& r = conn.parser.request();
  size_t wanted = r.body.size();
  const std::string length = r.header("content-length");  // validated by the parser
  if (!length.empty()) wanted = std::max(wanted, size_t(std::strtoull(length.c_str(), nullptr, 10)));
  if (wanted <= conn.reserved) return true;
  const size_t more = wanted - conn.reserved;
  if (body_memory_.fetch_add(more) + more > options_.max_body_memory) {
    body_memory_.fetch_sub(more);
    return false;
  }
  conn.reserved = wanted;
  return true;
}

void Server::release_body(Connection& conn) {
  body_memory_.fetch_sub(conn.reserved);
  conn.reserved = 0;
}

void Server::close_connection(std::unique_ptr<Connection> conn) {
  if (!conn) return;
  release_body(*conn);
  ::close(conn->fd);
  open_connections_--;
}

void Server::give_back(std::unique_ptr<Connection> conn) {
  const auto now = Clock::now();
  conn->parser.reset();
  conn->request = Request{};
  release_body(*conn);
  conn->phase = Connection::Phase::Idle;
  conn->triaged = false;
  conn->fresh = true;  // pipelined bytes may already hold the next request
  conn->last_active = now;
  conn->deadline = after_ms(now, options_.idle_timeout_ms);
  {
    std::lock_guard lock(mutex_);
    returned_.push_back(std::move(conn));
  }
  wake_poller();
}

void Server::poll_loop() {
  std::vector<std::unique_ptr<Connection>> polled;  // connections between or inside requests, not in a handler
  std::vector<pollfd> fds;
  while (!stopping_) {
    {
      std::lock_guard lock(mutex_);
      for (auto& c : returned_) polled.push_back(std::move(c));
      returned_.clear();
    }
    if (!accepting_ && listen_fd_ >= 0) {
      ::close(listen_fd_);
      listen_fd_ = -1;
    }
    fds.assign({pollfd{wake_fd_, POLLIN, 0}, pollfd{listen_fd_, POLLIN, 0}});
    for (const auto& c : polled) fds.push_back(pollfd{c->fd, POLLIN | POLLRDHUP, 0});
    if (::poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR) break;
    if (fds[0].revents) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_, &count, sizeof count);
    }
    std::vector<std::unique_ptr<Connection>> still_polled;
    const auto now = Clock::now();
    for (size_t i = 0; i < polled.size(); ++i) {
      auto& conn = polled[i];
      switch (advance(*conn, fds[i + 2].revents, now)) {
        case Progress::Ready: {
          std::lock_guard lock(mutex_);
          ready_.push_back(std::move(conn));
          work_cv_.notify_one();
          break;
        }
        case Progress::Waiting:
          still_polled.push_back(std::move(conn));
          break;
        case Progress::Closed:
          close_connection(std::move(conn));
          break;
      }
    }
    polled.swap(still_polled);
    if (listen_fd_ >= 0 && (fds[1].revents & POLLIN)) accept_new(polled);
  }
  for (auto& c : polled) close_connection(std::move(c));
}

// At the limit a new connection takes the place of the least recently active one the poller holds (an idle
// keep-alive client reconnects; a client that sends nothing loses its place), so idle sockets cannot lock
// everyone else out. Only when every connection is inside a request is the newcomer refused with 503.
void Server::accept_new(std::vector<std::unique_ptr<Connection>>& polled) {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) break;  // EAGAIN: no more pending
    if (open_connections_.load() >= options_.max_connections) {
      auto oldest = std::min_element(polled.begin(), polled.end(),
                                     [](const auto& a, const auto& b) { return a->last_active < b->last_active; });
      if (oldest == polled.end()) {
        send_now(fd, format_response(503, "application/json", error_body("too many connections", "server_error"),
                                     false));
        ::close(fd);
        continue;
      }
      close_connection(std::move(*oldest));
      polled.erase(oldest);
      evicted_++;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval send_timeout{options_.send_timeout_ms / 1000, (options_.send_timeout_ms % 1000) * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
    open_connections_++;
    auto conn = std::make_unique<Connection>(options_.limits);
    conn->fd = fd;
    conn->deadline = after_ms(Clock::now(), options_.idle_timeout_ms);
    polled.push_back(std::move(conn));
  }
}

// Reads what the socket holds (bounded per turn, so one fast sender cannot starve the others) and parses it.
Server::Progress Server::advance(Connection& conn, short revents, Clock::time_point now) {
  if (revents & POLLIN) {
    char chunk[64 * 1024];
    for (size_t turn = 0; turn < 16; ++turn) {
      const ssize_t n = ::recv(conn.fd, chunk, sizeof chunk, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0) return Progress::Closed;  // the peer closed or reset: nothing can be answered any more
      conn.buffer.append(chunk, size_t(n));
      conn.fresh = true;
      conn.last_active = now;
    }
  } else if (revents & (POLLHUP | POLLERR | POLLNVAL)) {
    return Progress::Closed;
  }
  const Progress p = parse_buffered(conn, now);
  if (p != Progress::Waiting) return p;
  if (now < conn.deadline) return Progress::Waiting;
  if (conn.phase != Connection::Phase::Idle) send_now(conn.fd, timeout_reply());
  return Progress::Closed;
}

Server::Progress Server::parse_buffered(Connection& conn, Clock::time_point now) {
  while (conn.fresh) {
    conn.fresh = false;
    if (conn.phase == Connection::Phase::Idle) {
      if (conn.buffer.empty()) return Progress::Waiting;
      conn.phase = Connection::Phase::Head;
      conn.deadline = after_ms(now, options_.header_timeout_ms);
    }
    const RequestParser::State state = conn.parser.feed(conn.buffer);
    if (state == RequestParser::State::Error) {
      send_now(conn.fd, format_response(conn.parser.error_status(), "application/json",
                                        error_body(conn.parser.error_message(), "invalid_request_error"), false));
      return Progress::Closed;
    }
    if (!conn.parser.headers_done()) return Progress::Waiting;
    const bool complete = state == RequestParser::State::Done;
    if (!reserve_body(conn)) {
      send_now(conn.fd, format_response(503, "application/json",
                                        error_body("the server is receiving too many request bodies; retry later",
                                                   "server_error"),
                                        false, {"Retry-After: 1"}));
      return Progress::Closed;
    }
    if (!conn.triaged) {
      conn.triaged = true;
      conn.phase = Connection::Phase::Body;
      conn.deadline = after_ms(now, options_.body_timeout_ms);
      QuickReply quick;
      if (triage_ && triage_(conn.parser.request(), complete, &quick)) {
        const Request& head = conn.parser.request();
        const bool keep = complete && head.keep_alive && !stopping_.load() && accepting_.load();
        if (!send_now(conn.fd, format_response(quick.status, quick.content_type, head.method == "HEAD" ? "" : quick.body,
                                               keep, quick.extra_headers)) ||
            !keep)
          return Progress::Closed;
        conn.parser.reset();
        release_body(conn);
        conn.phase = Connection::Phase::Idle;
        conn.triaged = false;
        conn.fresh = true;  // a pipelined request may follow
        conn.last_active = now;
        conn.deadline = after_ms(now, options_.idle_timeout_ms);
        continue;
      }
      if (!complete && conn.parser.expects_continue() && !send_now(conn.fd, "HTTP/1.1 100 Continue\r\n\r\n"))
        return Progress::Closed;
    }
    if (complete) {
      conn.request = std::move(conn.parser.request());
      return Progress::Ready;
    }
  }
  return Progress::Waiting;
}

void Server::worker_loop() {
  for (;;) {
    std::unique_ptr<Connection> conn;
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [this] { return stopping_ || !ready_.empty(); });
      if (stopping_) return;
      conn = std::move(ready_.front());
      ready_.pop_front();
      active_requests_++;
    }
    serve_connection(std::move(conn));
    {
      std::lock_guard lock(mutex_);
      active_requests_--;
    }
    idle_cv_.notify_all();
  }
}

void Server::serve_connection(std::unique_ptr<Connection> conn) {
  ExchangeImpl exchange(conn->fd, conn->request, stopping_);
  try {
    handler_(exchange);
  } catch (const std::exception& e) {
    if (!exchange.responded())
      exchange.respond(500, "application/json", error_body(e.what(), "server_error"), {});
    else
      exchange.close_after();  // a stream broken midway cannot be framed correctly any more
  }
  if (!exchange.responded())
    exchange.respond(500, "application/json", error_body("no response", "server_error"), {});
  if (exchange.keep_alive()) {
    give_back(std::move(conn));
  } else {
    close_connection(std::move(conn));
  }
}

}  // namespace fovea::http

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

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.h"

namespace fovea::http {

using Clock = std::chrono::steady_clock;

struct Server::Connection {
  int fd = -1;
  std::string buffer;  // bytes received and not yet parsed (pipelined requests)
  Clock::time_point idle_since = Clock::now();  // when the last response was sent (or the connection opened)
  Clock::time_point head_since = Clock::now();  // when the first byte of the pending request head arrived
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

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : int(left);
}

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

Server::Server(ServerOptions options, Handler handler) : options_(std::move(options)), handler_(std::move(handler)) {}

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
  if (stopping_.exchange(true)) return;
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

void Server::close_connection(std::unique_ptr<Connection> conn) {
  if (!conn) return;
  ::close(conn->fd);
  open_connections_--;
}

void Server::give_back(std::unique_ptr<Connection> conn) {
  conn->idle_since = Clock::now();
  {
    std::lock_guard lock(mutex_);
    if (conn->buffer.find("\r\n\r\n") != std::string::npos) {
      ready_.push_back(std::move(conn));  // a pipelined request head is already here: no need to poll
      work_cv_.notify_one();
      return;
    }
    conn->head_since = conn->idle_since;  // any partial head left over counts from now
    returned_.push_back(std::move(conn));
  }
  wake_poller();
}

void Server::poll_loop() {
  std::vector<std::unique_ptr<Connection>> idle;
  std::vector<pollfd> fds;
  while (!stopping_) {
    {
      std::lock_guard lock(mutex_);
      for (auto& c : returned_) idle.push_back(std::move(c));
      returned_.clear();
    }
    if (!accepting_ && listen_fd_ >= 0) {
      ::close(listen_fd_);
      listen_fd_ = -1;
    }
    fds.assign({pollfd{wake_fd_, POLLIN, 0}, pollfd{listen_fd_, POLLIN, 0}});
    for (const auto& c : idle) fds.push_back(pollfd{c->fd, POLLIN | POLLRDHUP, 0});
    if (::poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR) break;
    if (fds[0].revents) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_, &count, sizeof count);
    }
    // Idle connections: readable ones go to a handler, hung-up or timed-out ones are closed.
    std::vector<std::unique_ptr<Connection>> still_idle;
    const auto now = Clock::now();
    for (size_t i = 0; i < idle.size(); ++i) {
      auto& conn = idle[i];
      switch (collect_head(*conn, fds[i + 2].revents, now)) {
        case HeadState::Complete: {
          std::lock_guard lock(mutex_);
          ready_.push_back(std::move(conn));
          work_cv_.notify_one();
          break;
        }
        case HeadState::Waiting:
          still_idle.push_back(std::move(conn));
          break;
        case HeadState::TimedOut: {
          const std::string reply = format_response(408, "application/json",
                                                    error_body("request timed out", "invalid_request_error"), false);
          send_all(conn->fd, reply.data(), reply.size());
          close_connection(std::move(conn));
          break;
        }
        case HeadState::Closed:
          close_connection(std::move(conn));
          break;
      }
    }
    idle.swap(still_idle);
    if (listen_fd_ >= 0 && (fds[1].revents & POLLIN)) {
      for (;;) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) break;  // EAGAIN: no more pending
        if (open_connections_.load() >= options_.max_connections) {
          const std::string refusal =
              format_response(503, "application/json", error_body("too many connections", "server_error"), false);
          send_all(fd, refusal.data(), refusal.size());
          ::close(fd);
          continue;
        }
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        timeval send_timeout{options_.send_timeout_ms / 1000, (options_.send_timeout_ms % 1000) * 1000};
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
        open_connections_++;
        auto conn = std::make_unique<Connection>();
        conn->fd = fd;
        idle.push_back(std::move(conn));
      }
    }
  }
  for (auto& c : idle) close_connection(std::move(c));
}

// Request heads are collected here, without blocking, so that clients trickling bytes do not each hold a
// handler thread; a connection goes to a handler once its buffer holds a whole head (or more than a head may
// be, which the parser then refuses).
Server::HeadState Server::collect_head(Connection& conn, short revents, Clock::time_point now) {
  if (revents & POLLIN) {
    char chunk[16 * 1024];
    const ssize_t n = ::recv(conn.fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return HeadState::Closed;
    if (n > 0) {
      if (conn.buffer.empty()) conn.head_since = now;
      conn.buffer.append(chunk, size_t(n));
    }
  } else if (revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) {
    return HeadState::Closed;
  }
  if (conn.buffer.find("\r\n\r\n") != std::string::npos || conn.buffer.size() > options_.limits.max_header_bytes)
    return HeadState::Complete;
  if (!conn.buffer.empty())
    return now - conn.head_since > std::chrono::milliseconds(options_.header_timeout_ms) ? HeadState::TimedOut
                                                                                          : HeadState::Waiting;
  return now - conn.idle_since > std::chrono::milliseconds(options_.idle_timeout_ms) ? HeadState::Closed
                                                                                      : HeadState::Waiting;
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
  RequestParser parser(options_.limits);
  const auto start = Clock::now();
  auto deadline = start + std::chrono::milliseconds(options_.header_timeout_ms);
  bool sent_continue = false;
  bool body_deadline_set = false;
  char chunk[64 * 1024];
  for (;;) {
    const auto state = parser.feed(conn->buffer);
    if (state == RequestParser::State::Done) break;
    if (state == RequestParser::State::Error) {
      const std::string reply = format_response(parser.error_status(), "application/json",
                                                error_body(parser.error_message(), "invalid_request_error"), false);
      send_all(conn->fd, reply.data(), reply.size());
      close_connection(std::move(conn));
      return;
    }
    if (parser.headers_done() && !body_deadline_set) {
      body_deadline_set = true;
      deadline = Clock::now() + std::chrono::milliseconds(options_.body_timeout_ms);
    }
    if (parser.headers_done() && parser.expects_continue() && !sent_continue) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      sent_continue = send_all(conn->fd, kContinue.data(), kContinue.size());
    }
    pollfd p{conn->fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, std::min(remaining_ms(deadline), 1000));
    if (ready == 0) {
      if (remaining_ms(deadline) > 0 && !stopping_) continue;
      if (!conn->buffer.empty() || parser.headers_done()) {
        const std::string reply = format_response(408, "application/json",
                                                  error_body("request timed out", "invalid_request_error"), false);
        send_all(conn->fd, reply.data(), reply.size());
      }
      close_connection(std::move(conn));
      return;
    }
    const ssize_t n = ready < 0 ? -1 : ::recv(conn->fd, chunk, sizeof chunk, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {  // the peer closed (possibly between keep-alive requests) or the socket failed
      close_connection(std::move(conn));
      return;
    }
    conn->buffer.append(chunk, size_t(n));
  }

  ExchangeImpl exchange(conn->fd, parser.request(), stopping_);
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

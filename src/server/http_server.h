// A small HTTP/1.1 server over POSIX sockets. One poller thread accepts connections and reads every request,
// head and body, without blocking, so clients that trickle bytes hold no thread; a request refused on its head
// alone (a missing API key) is answered before its body is read, and cheap routes (/health) are answered by the
// poller itself. A fixed pool of handler threads takes complete requests, runs the handler and gives the
// connection back. A handler may stream (chunked transfer encoding) and can ask whether the client has gone
// away, so a long request can be cancelled. At the connection limit the least recently active connection the
// poller holds (not one being handled) makes room for the new one.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/http_message.h"

namespace fovea::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;             // 0: pick a free port (see HttpServer::port())
  int handler_threads = 256;   // requests handled at once (each waits on its engine request); more wait
  int max_connections = 1024;  // open connections; beyond this the least recently active idle one is closed
  Limits limits;
  int header_timeout_ms = 30000;     // to receive a whole request head once its first byte arrived
  int body_timeout_ms = 60000;       // to receive the whole body
  int idle_timeout_ms = 60000;       // keep-alive connection with no request
  int send_timeout_ms = 30000;       // a client that does not read its response
  // Request bodies held at once (being received or handled; a Content-Length counts in full once its head is
  // in). A body that would go beyond gets 503 and the connection closes, so many large slow bodies cannot
  // exhaust memory.
  size_t max_body_memory = size_t(1) << 30;
};

// The response side of one request, handed to the handler.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual const Request& request() const = 0;
  // A whole response. Returns false when the client is gone.
  virtual bool respond(int status, const std::string& content_type, const std::string& body,
                       const std::vector<std::string>& extra_headers = {}) = 0;
  // A streamed response: the head, then chunks, then end_stream(). Each returns false once the client is gone.
  virtual bool begin_stream(int status, const std::string& content_type,
                            const std::vector<std::string>& extra_headers = {}) = 0;
  virtual bool write_chunk(const std::string& data) = 0;
  virtual bool end_stream() = 0;
  // True when the peer closed or reset the connection (checked without blocking).
  virtual bool client_gone() = 0;
  // The connection will be closed after this response (e.g. the server is stopping).
  virtual void close_after() = 0;
};

using Handler = std::function<void(Exchange&)>;

// An answer the poller sends itself. `complete` says whether the request's body has been read; a reply to an
// incomplete request closes the connection (the body is never read).
struct QuickReply {
  int status = 0;
  std::string content_type;
  std::string body;
  std::vector<std::string> extra_headers;
};
// Runs on the poller thread once a request's head is parsed: returns true (and fills `reply`) to answer at once
// without a handler. It must not block.
using Triage = std::function<bool(const Request& head, bool complete, QuickReply* reply)>;

class Server {
 public:
  Server(ServerOptions options, Handler handler, Triage triage = {});
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void start();            // binds and listens (throws fovea::Error on failure), then serves in the background
  int port() const { return port_; }
  void stop_accepting();   // closes the listening socket; requests in progress go on
  // Waits until no handler is running (or the timeout passes); returns whether it became idle.
  bool wait_idle(int timeout_ms);
  void stop();             // stops accepting, waits for running handlers, closes every connection
  int open_connections() const { return open_connections_.load(); }
  int active_requests() const { return active_requests_.load(); }
  int64_t evicted_connections() const { return evicted_.load(); }
  size_t body_memory() const { return body_memory_.load(); }

  struct Connection;

 private:
  enum class Progress { Waiting, Ready, Closed };
  Progress advance(Connection& conn, short revents, std::chrono::steady_clock::time_point now);
  Progress parse_buffered(Connection& conn, std::chrono::steady_clock::time_point now);
  bool reserve_body(Connection& conn);  // counts the body against max_body_memory; false when it does not fit
  void release_body(Connection& conn);
  void accept_new(std::vector<std::unique_ptr<Connection>>& polled);
  void poll_loop();
  void worker_loop();
  void serve_connection(std::unique_ptr<Connection> conn);
  void give_back(std::unique_ptr<Connection> conn);  // to the poller, after a keep-alive response
  void close_connection(std::unique_ptr<Connection> conn);
  void wake_poller();

  ServerOptions options_;
  Handler handler_;
  Triage triage_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> accepting_{false};
  std::atomic<int> open_connections_{0};
  std::atomic<int> active_requests_{0};
  std::atomic<int64_t> evicted_{0};
  std::atomic<size_t> body_memory_{0};  // sum of the connections' reserved body bytes
  std::thread poller_;
  std::vector<std::thread> workers_;

  std::mutex mutex_;  // guards the queues below
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::deque<std::unique_ptr<Connection>> ready_;     // connections holding a whole request, waiting for a handler
  std::vector<std::unique_ptr<Connection>> returned_;  // kept-alive connections going back to the poller
};

}  // namespace fovea::http

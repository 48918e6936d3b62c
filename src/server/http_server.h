// A small HTTP/1.1 server over POSIX sockets. One poller thread accepts connections, watches idle keep-alive
// connections and collects request heads without blocking; a fixed pool of handler threads takes a connection
// whose head is complete, reads the body, runs the handler, and gives the connection back to the poller. A handler may stream (chunked
// transfer encoding) and can ask whether the client has gone away, so a long request can be cancelled.
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
  int max_connections = 1024;  // open connections; beyond this a new one gets 503 and is closed
  Limits limits;
  int header_timeout_ms = 30000;     // to receive a whole request head once its first byte arrived
  int body_timeout_ms = 60000;       // to receive the whole body
  int idle_timeout_ms = 60000;       // keep-alive connection with no request
  int send_timeout_ms = 30000;       // a client that does not read its response
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

class Server {
 public:
  Server(ServerOptions options, Handler handler);
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

  struct Connection;

 private:
  enum class HeadState { Waiting, Complete, TimedOut, Closed };
  HeadState collect_head(Connection& conn, short revents, std::chrono::steady_clock::time_point now);
  void poll_loop();
  void worker_loop();
  void serve_connection(std::unique_ptr<Connection> conn);
  void give_back(std::unique_ptr<Connection> conn);  // to the poller, after a keep-alive response
  void close_connection(std::unique_ptr<Connection> conn);
  void wake_poller();

  ServerOptions options_;
  Handler handler_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> accepting_{false};
  std::atomic<int> open_connections_{0};
  std::atomic<int> active_requests_{0};
  std::thread poller_;
  std::vector<std::thread> workers_;

  std::mutex mutex_;  // guards the queues below
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::deque<std::unique_ptr<Connection>> ready_;     // readable connections waiting for a handler
  std::vector<std::unique_ptr<Connection>> returned_;  // kept-alive connections going back to the poller
};

}  // namespace fovea::http

// HTTP/1.1 messages for the server: an incremental request parser (Content-Length and chunked bodies, limits on
// header and body size) and the response/chunk/SSE framing. No sockets here, so all of it is unit-tested.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace fovea::http {

struct Limits {
  size_t max_header_bytes = 16 * 1024;          // request line + headers
  size_t max_body_bytes = 64ull * 1024 * 1024;  // decoded body
};

struct Request {
  std::string method;
  std::string target;  // as sent: path plus query
  std::string path;    // target without the query
  std::string query;
  int version_minor = 1;  // HTTP/1.x
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
  std::string body;
  bool keep_alive = true;

  // The first header with this (lower-case) name, or "" when absent.
  std::string header(const std::string& lower_name) const;
  bool has_header(const std::string& lower_name) const;
};

// Feed bytes as they arrive; the parser consumes from the front of the buffer what belongs to this request and
// leaves any pipelined bytes of the next one in place.
class RequestParser {
 public:
  enum class State { NeedMore, Done, Error };

  explicit RequestParser(Limits limits = {}) : limits_(limits) {}
  State feed(std::string& buffer);
  void reset();

  bool headers_done() const { return phase_ > Phase::Headers; }
  bool expects_continue() const { return expects_continue_; }
  const Request& request() const { return request_; }
  Request& request() { return request_; }
  // On State::Error: the status to answer with (400, 413, 431, 501, 505) and why.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

 private:
  enum class Phase { Headers, FixedBody, ChunkSize, ChunkData, ChunkDataEnd, Trailers, Done, Error };
  State fail(int status, std::string message);
  State parse_head(const std::string& head);
  State plan_body();  // after the head: connection semantics and how the body is framed
  State step(std::string& buffer, bool* progressed);

  Limits limits_;
  Phase phase_ = Phase::Headers;
  Request request_;
  size_t body_remaining_ = 0;
  size_t trailer_bytes_ = 0;
  bool expects_continue_ = false;
  int error_status_ = 0;
  std::string error_message_;
};

const char* status_reason(int status);

// A complete response with Content-Length. `extra_headers` lines are "Name: value" without CRLF.
std::string format_response(int status, const std::string& content_type, const std::string& body, bool keep_alive,
                            const std::vector<std::string>& extra_headers = {});
// The head of a response whose body follows in chunked transfer encoding.
std::string format_chunked_head(int status, const std::string& content_type, bool keep_alive,
                                const std::vector<std::string>& extra_headers = {});
// One chunk of a chunked body (empty data gives nothing: the terminator is separate).
std::string format_chunk(const std::string& data);
inline std::string chunk_terminator() { return "0\r\n\r\n"; }
// One server-sent event carrying `data` (which must be a single line, as JSON is): "data: ...\n\n".
std::string sse_event(const std::string& data);

}  // namespace fovea::http

#include "server/http_message.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace fovea::http {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string("!#$%&'*+-.^_`|~").find(c) != std::string::npos;
}

// Strict decimal parse of a Content-Length value; false on anything else or overflow.
bool parse_length(const std::string& s, size_t* out) {
  if (s.empty() || s.size() > 18) return false;
  size_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + size_t(c - '0');
  }
  *out = n;
  return true;
}

// A chunk-size line: hex digits, optionally followed by ";extensions".
bool parse_chunk_size(const std::string& line, size_t* out) {
  const std::string digits = trim(line.substr(0, line.find(';')));
  if (digits.empty() || digits.size() > 15) return false;
  size_t n = 0;
  for (char c : digits) {
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    else return false;
    n = n * 16 + size_t(v);
  }
  *out = n;
  return true;
}

bool contains_token(const std::string& list, const std::string& token) {
  size_t start = 0;
  const std::string l = lower(list);
  while (start <= l.size()) {
    size_t end = l.find(',', start);
    if (end == std::string::npos) end = l.size();
    if (trim(l.substr(start, end - start)) == token) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

std::string Request::header(const std::string& lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return value;
  return "";
}

bool Request::has_header(const std::string& lower_name) const {
  for (const auto& h : headers)
    if (h.first == lower_name) return true;
  return false;
}

void RequestParser::reset() {
  phase_ = Phase::Headers;
  request_ = Request{};
  body_remaining_ = 0;
  trailer_bytes_ = 0;
  expects_continue_ = false;
  error_status_ = 0;
  error_message_.clear();
}

RequestParser::State RequestParser::fail(int status, std::string message) {
  phase_ = Phase::Error;
  error_status_ = status;
  error_message_ = std::move(message);
  return State::Error;
}

namespace {
// True when a line of buffer[0, limit) ends in a bare LF. HTTP lines end in CRLF; a client that sends a bare LF
// would otherwise wait for a CRLF that never comes until the request times out (408 after 30 s).
bool has_bare_lf(const std::string& buffer, size_t limit) {
  limit = std::min(limit, buffer.size());
  for (size_t i = buffer.find('\n'); i < limit; i = buffer.find('\n', i + 1))
    if (i == 0 || buffer[i - 1] != '\r') return true;
  return false;
}
constexpr const char* kBareLf = "a line of the request ends in a bare LF (HTTP lines end in CRLF)";
}  // namespace

RequestParser::State RequestParser::feed(std::string& buffer) {
  for (;;) {
    if (phase_ == Phase::Done) return State::Done;
    if (phase_ == Phase::Error) return State::Error;
    bool progressed = false;
    const State s = step(buffer, &progressed);
    if (s != State::NeedMore) return s;
    if (!progressed) return State::NeedMore;
  }
}

RequestParser::State RequestParser::step(std::string& buffer, bool* progressed) {
  switch (phase_) {
    case Phase::Headers: {
      // Leading empty lines before a request line are allowed (RFC 9112 2.2).
      while (buffer.rfind("\r\n", 0) == 0) buffer.erase(0, 2);
      const size_t end = buffer.find("\r\n\r\n");
      if (has_bare_lf(buffer, end == std::string::npos ? buffer.size() : end)) return fail(400, kBareLf);
      if (end == std::string::npos) {
        if (buffer.size() > limits_.max_header_bytes) return fail(431, "request headers too large");
        return State::NeedMore;
      }
      if (end + 4 > limits_.max_header_bytes) return fail(431, "request headers too large");
      const std::string head = buffer.substr(0, end + 2);
      buffer.erase(0, end + 4);
      *progressed = true;
      return parse_head(head);
    }
    case Phase::FixedBody: {
      const size_t take = std::min(body_remaining_, buffer.size());
      request_.body.append(buffer, 0, take);
      buffer.erase(0, take);
      body_remaining_ -= take;
      *progressed = take > 0;
      if (body_remaining_ == 0) phase_ = Phase::Done;
      return phase_ == Phase::Done ? State::Done : State::NeedMore;
    }
    case Phase::ChunkSize: {
      const size_t eol = buffer.find("\r\n");
      if (has_bare_lf(buffer, eol)) return fail(400, kBareLf);
      if (eol == std::string::npos) {
        if (buffer.size() > 1024) return fail(400, "chunk size line too long");
        return State::NeedMore;
      }
      size_t size = 0;
      if (!parse_chunk_size(buffer.substr(0, eol), &size)) return fail(400, "bad chunk size");
      buffer.erase(0, eol + 2);
      *progressed = true;
      if (size == 0) {
        phase_ = Phase::Trailers;
      } else {
        if (request_.body.size() + size > limits_.max_body_bytes) return fail(413, "request body too large");
        body_remaining_ = size;
        phase_ = Phase::ChunkData;
      }
      return State::NeedMore;
    }
    case Phase::ChunkData: {
      const size_t take = std::min(body_remaining_, buffer.size());
      request_.body.append(buffer, 0, take);
      buffer.erase(0, take);
      body_remaining_ -= take;
      *progressed = take > 0;
      if (body_remaining_ == 0) phase_ = Phase::ChunkDataEnd;
      return State::NeedMore;
    }
    case Phase::ChunkDataEnd: {
      if (buffer.size() < 2) return State::NeedMore;
      if (buffer.compare(0, 2, "\r\n") != 0) return fail(400, "chunk data not followed by CRLF");
      buffer.erase(0, 2);
      *progressed = true;
      phase_ = Phase::ChunkSize;
      return State::NeedMore;
    }
    case Phase::Trailers: {
      // Trailer fields are read and dropped; an empty line ends the message.
      const size_t eol = buffer.find("\r\n");
      if (has_bare_lf(buffer, eol)) return fail(400, kBareLf);
      if (eol == std::string::npos) {
        if (trailer_bytes_ + buffer.size() > limits_.max_header_bytes) return fail(431, "trailers too large");
        return State::NeedMore;
      }
      trailer_bytes_ += eol + 2;
      if (trailer_bytes_ > limits_.max_header_bytes) return fail(431, "trailers too large");
      const bool last = eol == 0;
      buffer.erase(0, eol + 2);
      *progressed = true;
      if (last) phase_ = Phase::Done;
      return last ? State::Done : State::NeedMore;
    }
    case Phase::Done:
      return State::Done;
    case Phase::Error:
      return State::Error;
  }
  return State::Error;
}

RequestParser::State RequestParser::parse_head(const std::string& head) {
  size_t pos = head.find("\r\n");
  const std::string line = head.substr(0, pos);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.find(' ', sp2 + 1) != std::string::npos) return fail(400, "bad request line");
  request_.method = line.substr(0, sp1);
  request_.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string version = line.substr(sp2 + 1);
  if (request_.method.empty() || !std::all_of(request_.method.begin(), request_.method.end(), is_token_char))
    return fail(400, "bad method");
  if (request_.target.empty()) return fail(400, "empty request target");
  if (version == "HTTP/1.1") request_.version_minor = 1;
  else if (version == "HTTP/1.0") request_.version_minor = 0;
  else if (version.rfind("HTTP/", 0) == 0) return fail(505, "HTTP version not supported");
  else return fail(400, "bad HTTP version");
  const size_t q = request_.target.find('?');
  request_.path = request_.target.substr(0, q);
  request_.query = q == std::string::npos ? "" : request_.target.substr(q + 1);

  pos += 2;
  while (pos < head.size()) {
    const size_t eol = head.find("\r\n", pos);
    const std::string field = head.substr(pos, eol - pos);
    pos = eol + 2;
    if (field.empty()) break;
    if (field[0] == ' ' || field[0] == '\t') return fail(400, "obsolete header line folding");
    const size_t colon = field.find(':');
    if (colon == std::string::npos || colon == 0) return fail(400, "bad header line");
    const std::string name = lower(field.substr(0, colon));
    if (!std::all_of(name.begin(), name.end(), is_token_char)) return fail(400, "bad header name");
    request_.headers.emplace_back(name, trim(field.substr(colon + 1)));
  }
  return plan_body();
}

}  // namespace fovea::http

namespace fovea::http {

RequestParser::State RequestParser::plan_body() {
  const std::string connection = request_.header("connection");
  request_.keep_alive = request_.version_minor == 1 ? !contains_token(connection, "close")
                                                    : contains_token(connection, "keep-alive");
  expects_continue_ = lower(request_.header("expect")) == "100-continue";

  int length_headers = 0;
  std::string length_value;
  for (const auto& [name, value] : request_.headers) {
    if (name != "content-length") continue;
    if (length_headers++ > 0 && value != length_value) return fail(400, "conflicting Content-Length headers");
    length_value = value;
  }
  const std::string encoding = lower(request_.header("transfer-encoding"));
  if (!encoding.empty()) {
    // A message with both is a smuggling vector (RFC 9112 6.3): refuse it instead of guessing.
    if (length_headers > 0) return fail(400, "both Transfer-Encoding and Content-Length");
    if (trim(encoding) != "chunked") return fail(501, "unsupported transfer encoding: " + encoding);
    phase_ = Phase::ChunkSize;
    return State::NeedMore;
  }
  if (length_headers > 0) {
    size_t length = 0;
    if (!parse_length(length_value, &length)) return fail(400, "bad Content-Length");
    if (length > limits_.max_body_bytes) return fail(413, "request body too large");
    body_remaining_ = length;
    // Reserved up to 1 MiB only: a client announcing a large body must send it before it costs memory.
    request_.body.reserve(std::min(length, size_t(1) << 20));
    phase_ = length == 0 ? Phase::Done : Phase::FixedBody;
    return phase_ == Phase::Done ? State::Done : State::NeedMore;
  }
  phase_ = Phase::Done;  // no body framing: no body
  return State::Done;
}

const char* status_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

namespace {
std::string head_lines(int status, const std::string& content_type, bool keep_alive,
                       const std::vector<std::string>& extra_headers) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + status_reason(status) + "\r\n";
  if (!content_type.empty()) out += "Content-Type: " + content_type + "\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& h : extra_headers) out += h + "\r\n";
  return out;
}
}  // namespace

std::string format_response(int status, const std::string& content_type, const std::string& body, bool keep_alive,
                            const std::vector<std::string>& extra_headers) {
  std::string out = head_lines(status, content_type, keep_alive, extra_headers);
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  out += body;
  return out;
}

std::string format_chunked_head(int status, const std::string& content_type, bool keep_alive,
                                const std::vector<std::string>& extra_headers) {
  return head_lines(status, content_type, keep_alive, extra_headers) + "Transfer-Encoding: chunked\r\n\r\n";
}

std::string format_chunk(const std::string& data) {
  if (data.empty()) return "";
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

std::string sse_event(const std::string& data) { return "data: " + data + "\n\n"; }

}  // namespace fovea::http

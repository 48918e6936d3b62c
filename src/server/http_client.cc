#include "server/http_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "server/http_message.h"
#include "server/media.h"

namespace fovea {
namespace {

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : int(left);
}

// Closes the socket on every exit path.
struct Socket {
  int fd = -1;
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

void connect_with_deadline(Socket& sock, const ParsedUrl& url, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  // getaddrinfo has no timeout of its own; numeric hosts and /etc/hosts names return at once.
  const int rc = ::getaddrinfo(url.host.c_str(), std::to_string(url.port).c_str(), &hints, &found);
  if (rc != 0) throw MediaError(str("cannot resolve image host ", url.host, ": ", gai_strerror(rc)));
  std::string last_error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int error = 0;
      socklen_t len = sizeof error;
      if (::poll(&p, 1, ms_left(deadline)) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 &&
          error == 0) {
        sock.fd = fd;
        break;
      }
      last_error = error ? std::strerror(error) : "timed out";
    } else {
      last_error = std::strerror(errno);
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (sock.fd < 0) throw MediaError(str("cannot connect to image host ", url.host, ": ", last_error));
}

void send_request(const Socket& sock, const ParsedUrl& url, Clock::time_point deadline) {
  const std::string request = "GET " + url.target + " HTTP/1.1\r\nHost: " + url.host +
                              (url.port != 80 ? ":" + std::to_string(url.port) : "") +
                              "\r\nUser-Agent: fovea\r\nAccept: image/*\r\nConnection: close\r\n\r\n";
  size_t sent = 0;
  while (sent < request.size()) {
    pollfd p{sock.fd, POLLOUT, 0};
    if (::poll(&p, 1, ms_left(deadline)) != 1) throw MediaError("timed out sending the image request");
    const ssize_t n = ::send(sock.fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) throw MediaError(str("image request failed: ", std::strerror(errno)));
    if (n > 0) sent += size_t(n);
  }
}

// Reads until the peer closes (we asked for Connection: close) or the response is complete.
std::string read_response(const Socket& sock, int64_t max_bytes, Clock::time_point deadline) {
  std::string data;
  char buf[64 * 1024];
  const int64_t cap = max_bytes + 64 * 1024;  // the head on top of the body limit
  for (;;) {
    pollfd p{sock.fd, POLLIN, 0};
    if (::poll(&p, 1, ms_left(deadline)) != 1) throw MediaError("timed out fetching the image");
    const ssize_t n = ::recv(sock.fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) throw MediaError(str("image fetch failed: ", std::strerror(errno)));
    if (n == 0) return data;
    data.append(buf, size_t(n));
    if (int64_t(data.size()) > cap) throw MediaError(str("remote image is larger than the limit of ", max_bytes, " bytes"));
  }
}

struct Response {
  int status = 0;
  std::string location;
  std::string body;
};

// Parses a response with the request parser's body logic by rewriting the status line as a request line.
Response parse_response(std::string raw, int64_t max_bytes) {
  const size_t eol = raw.find("\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || eol == std::string::npos || eol < 12)
    throw MediaError("malformed response from image host");
  Response out;
  out.status = std::atoi(raw.substr(9, 3).c_str());
  raw.replace(0, eol, "GET / HTTP/1.1");
  http::Limits limits;
  limits.max_body_bytes = size_t(max_bytes);
  limits.max_header_bytes = 64 * 1024;
  http::RequestParser parser(limits);
  const auto state = parser.feed(raw);
  if (state == http::RequestParser::State::Error) {
    if (parser.error_status() == 413) throw MediaError(str("remote image is larger than the limit of ", max_bytes, " bytes"));
    throw MediaError("malformed response from image host: " + parser.error_message());
  }
  out.location = parser.request().header("location");
  const bool framed = parser.request().has_header("content-length") || parser.request().has_header("transfer-encoding");
  if (state == http::RequestParser::State::NeedMore) {
    if (framed) throw MediaError("image host closed the connection before the whole body arrived");
  }
  // Without framing headers the body runs to the end of the connection.
  out.body = framed ? parser.request().body : raw;
  if (int64_t(out.body.size()) > max_bytes) throw MediaError(str("remote image is larger than the limit of ", max_bytes, " bytes"));
  return out;
}

}  // namespace

ParsedUrl parse_http_url(const std::string& url) {
  ParsedUrl out;
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) throw MediaError(str("bad URL: ", url));
  out.scheme = url.substr(0, scheme_end);
  for (char& c : out.scheme) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (out.scheme != "http" && out.scheme != "https") throw MediaError(str("unsupported URL scheme: ", out.scheme));
  out.port = out.scheme == "https" ? 443 : 80;
  const size_t host_begin = scheme_end + 3;
  const size_t path_begin = url.find_first_of("/?#", host_begin);
  std::string authority = url.substr(host_begin, path_begin == std::string::npos ? std::string::npos : path_begin - host_begin);
  if (authority.find('@') != std::string::npos) throw MediaError("URLs with credentials are not supported");
  if (path_begin != std::string::npos) out.target = url.substr(path_begin);
  if (out.target[0] != '/') out.target = "/" + out.target;
  const size_t hash = out.target.find('#');
  if (hash != std::string::npos) out.target.resize(hash);
  // [v6addr]:port or host:port
  size_t port_colon = std::string::npos;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) throw MediaError(str("bad URL host: ", url));
    out.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') port_colon = close + 1;
  } else {
    port_colon = authority.rfind(':');
    out.host = authority.substr(0, port_colon);
  }
  if (port_colon != std::string::npos) {
    const std::string port = authority.substr(port_colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p <= 0 || p > 65535) throw MediaError(str("bad URL port: ", url));
    out.port = int(p);
  }
  if (out.host.empty()) throw MediaError(str("URL has no host: ", url));
  return out;
}

std::string http_get(const std::string& url, int64_t max_bytes, int timeout_ms, int max_redirects) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string current = url;
  for (int hop = 0;; ++hop) {
    const ParsedUrl parsed = parse_http_url(current);
    if (parsed.scheme == "https")
      throw MediaError("https image URLs are not supported (Fovea has no TLS); send the image as a data: URL");
    Socket sock;
    connect_with_deadline(sock, parsed, deadline);
    send_request(sock, parsed, deadline);
    const Response response = parse_response(read_response(sock, max_bytes, deadline), max_bytes);
    if (response.status >= 300 && response.status < 400 && !response.location.empty()) {
      if (hop >= max_redirects) throw MediaError("too many redirects fetching the image");
      current = response.location[0] == '/' ? parsed.scheme + "://" + parsed.host + ":" +
                                                  std::to_string(parsed.port) + response.location
                                            : response.location;
      continue;
    }
    if (response.status != 200) throw MediaError(str("image host answered HTTP ", response.status, " for ", url));
    if (response.body.empty()) throw MediaError(str("image host sent an empty body for ", url));
    return response.body;
  }
}

}  // namespace fovea

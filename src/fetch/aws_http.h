// One small HTTP exchange with an AWS credential endpoint (STS, the container credentials agent, the instance
// metadata service) through libcurl: no redirects, no retries (the caller's fetch retries), an answer of at most
// 64 KiB.
#pragma once
#include <string>
#include <vector>

namespace fovea {

struct HttpReply {
  long status = 0;
  std::string body;
};

struct HttpCall {
  std::string method = "GET";  // GET, PUT or POST
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;
  int timeout_ms = 5000;  // connect and the whole exchange
};

// Throws FetchError("<what>: <reason>") when no HTTP answer came back; retryable for time-outs and connection
// errors. Any status is returned: the caller decides what it means.
HttpReply http_call(const HttpCall& call, const std::string& what);

// The <Code> of an AWS XML error body (NoSuchKey, AccessDenied, InvalidIdentityToken), "" when there is none.
// Only a short alphanumeric code is taken, so a hostile body cannot put anything else into a message.
std::string aws_error_code(const std::string& body);

// RFC 3986 percent-encoding of everything but unreserved characters (and '/' when `keep_slash`).
std::string percent_encode(const std::string& text, bool keep_slash);

}  // namespace fovea

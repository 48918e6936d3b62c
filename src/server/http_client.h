// A minimal HTTP/1.1 client for fetching remote images: GET only, http:// only (no TLS in the product), one
// connection per fetch, a total deadline, a size limit, a few redirects. Throws MediaError on any failure.
#pragma once
#include <cstdint>
#include <string>

namespace fovea {

struct ParsedUrl {
  std::string scheme;  // "http" or "https"
  std::string host;
  int port = 80;
  std::string target = "/";  // path + query
};

// Throws MediaError on anything that is not scheme://host[:port][/path].
ParsedUrl parse_http_url(const std::string& url);

std::string http_get(const std::string& url, int64_t max_bytes, int timeout_ms, int max_redirects = 3);

}  // namespace fovea

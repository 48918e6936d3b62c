#include "fetch/aws_http.h"

#include <cctype>
#include <memory>

#include "fetch/curl_api.h"
#include "fetch/fetch.h"

namespace fovea {
namespace {

constexpr size_t kMaxReply = 64 * 1024;  // credentials are a few KiB; more is not a credential endpoint

struct Reply {
  std::string body;
  bool too_big = false;
};

size_t on_reply(char* data, size_t size, size_t count, void* user) {
  auto* reply = static_cast<Reply*>(user);
  const size_t n = size * count;
  if (reply->body.size() + n > kMaxReply) {
    reply->too_big = true;
    return 0;
  }
  reply->body.append(data, n);
  return n;
}

}  // namespace

HttpReply http_call(const HttpCall& call, const std::string& what) {
  const CurlApi& api = curl_api();
  // A handle of its own: credentials are resolved in the middle of a fetch that owns the thread's handle.
  std::unique_ptr<CURL, void (*)(CURL*)> curl(api.easy_init(), api.easy_cleanup);
  if (!curl) throw FetchError(what + ": cannot create a libcurl handle", false);
  CURL* c = curl.get();
  Reply reply;
  char error_buffer[CURL_ERROR_SIZE] = {0};
  api.easy_setopt(c, CURLOPT_URL, call.url.c_str());
  api.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  api.easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);
  limit_to_http(api, c);
  api.easy_setopt(c, CURLOPT_USERAGENT, "fovea");
  api.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, long(call.timeout_ms));
  api.easy_setopt(c, CURLOPT_TIMEOUT_MS, long(call.timeout_ms));
  api.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_reply);
  api.easy_setopt(c, CURLOPT_WRITEDATA, &reply);
  const std::string ca_file = ca_bundle("");
  if (!ca_file.empty()) api.easy_setopt(c, CURLOPT_CAINFO, ca_file.c_str());
  if (call.method == "POST" || call.method == "PUT") {
    api.easy_setopt(c, CURLOPT_CUSTOMREQUEST, call.method.c_str());
    api.easy_setopt(c, CURLOPT_POSTFIELDS, call.body.c_str());
    api.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(call.body.size()));
  }
  curl_slist* headers = nullptr;
  for (const std::string& h : call.headers) headers = api.slist_append(headers, h.c_str());
  headers = api.slist_append(headers, "Expect:");  // no 100-continue round trip
  api.easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  const CURLcode rc = api.easy_perform(c);
  HttpReply out;
  api.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out.status);
  api.slist_free_all(headers);
  if (reply.too_big) throw FetchError(what + ": the answer is larger than 64 KiB", false);
  if (rc != CURLE_OK) {
    const bool retryable = rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_COULDNT_CONNECT ||
                           rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
                           rc == CURLE_GOT_NOTHING;
    throw FetchError(what + ": " + (error_buffer[0] ? error_buffer : api.easy_strerror(rc)), retryable);
  }
  out.body = std::move(reply.body);
  return out;
}

std::string aws_error_code(const std::string& body) {
  const size_t b = body.find("<Code>");
  const size_t e = body.find("</Code>");
  if (b == std::string::npos || e == std::string::npos || e <= b + 6 || e - b > 70) return "";
  const std::string code = body.substr(b + 6, e - b - 6);
  for (unsigned char c : code)
    if (!std::isalnum(c) && c != '.') return "";
  return code;
}

std::string percent_encode(const std::string& text, bool keep_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += char(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace fovea

// Image bytes from anywhere: http://, https:// and s3://bucket/key (S3-compatible object storage, SigV4-signed
// with credentials from the AWS SDKs' default chain: fetch/aws_credentials.h). One libcurl connection cache is shared by every
// thread of the process, so repeated fetches from one host reuse connections and TLS sessions.
//
// This is the API the CLI, the server and the Python binding call:
//   std::string bytes = fovea::fetch_bytes("https://host/cat.jpg", fovea::FetchOptions{});
// It throws FetchError with a one-line message naming the URL (never its credentials or query string).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.h"

namespace fovea {

struct FetchOptions {
  int64_t max_bytes = 64ll * 1024 * 1024;  // a larger body is refused, with or without Content-Length
  int connect_timeout_ms = 10000;
  int timeout_ms = 60000;    // per attempt, connect included
  int retries = 3;           // further attempts after 5xx, 429, timeouts and connection errors (never after 4xx)
  int backoff_ms = 250;      // wait before the first retry; doubles for each next one (capped at 8 s)
  int max_redirects = 3;     // http(s) only; S3 requests never follow redirects
  std::string ca_file;       // PEM bundle to verify TLS peers with; "" -> env FOVEA_CA_BUNDLE or CURL_CA_BUNDLE,
                             // else the system's. Verification is never switched off.
  std::string s3_endpoint;   // "" -> env AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, config endpoint_url, else AWS
  const std::atomic<bool>* cancel = nullptr;  // set -> a transfer in flight stops soon with an error
};

class FetchError : public Error {
 public:
  FetchError(const std::string& message, bool retryable) : Error(message), retryable_(retryable) {}
  bool retryable() const { return retryable_; }

 private:
  bool retryable_;
};

// True for http://, https:// and s3:// URLs (case-insensitive scheme).
bool is_fetch_url(const std::string& url);

// Downloads the whole body of `url`, retrying per `options`. Throws FetchError.
std::string fetch_bytes(const std::string& url, const FetchOptions& options = {});

// `url` as it may appear in messages and logs: user info dropped, query string replaced by "?...".
std::string redact_url(const std::string& url);

// Bounds how many downloads run at once across the threads that share it (e.g. a server's handler threads).
class FetchLimiter {
 public:
  explicit FetchLimiter(int max_concurrent);
  std::string fetch(const std::string& url, const FetchOptions& options);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace fovea

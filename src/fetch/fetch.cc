#include "fetch/fetch.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "fetch/aws_http.h"
#include "fetch/curl_api.h"
#include "fetch/s3.h"

namespace fovea {
namespace {

bool starts_with_ci(const std::string& s, const char* prefix) {
  for (size_t i = 0; prefix[i] != '\0'; ++i)
    if (i >= s.size() || std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

// One process-wide share of DNS results and TLS sessions. Connections are not shared through it (libcurl does
// not support one connection cache across concurrent threads); each thread's easy handle keeps its own.
class CurlShare {
 public:
  static CURLSH* get() {
    static CurlShare instance;
    return instance.share_;
  }

 private:
  CurlShare() {
    const CurlApi& api = curl_api();
    share_ = api.share_init();
    api.share_setopt(share_, CURLSHOPT_LOCKFUNC, &CurlShare::lock);
    api.share_setopt(share_, CURLSHOPT_UNLOCKFUNC, &CurlShare::unlock);
    api.share_setopt(share_, CURLSHOPT_USERDATA, this);
    api.share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    api.share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  }
  static void lock(CURL*, curl_lock_data data, curl_lock_access, void* self) {
    static_cast<CurlShare*>(self)->mutexes_[data % kLocks].lock();
  }
  static void unlock(CURL*, curl_lock_data data, void* self) {
    static_cast<CurlShare*>(self)->mutexes_[data % kLocks].unlock();
  }
  static constexpr int kLocks = 8;
  std::mutex mutexes_[kLocks];
  CURLSH* share_ = nullptr;
};

// Each thread reuses one easy handle: its connection cache keeps connections (and their TLS state) alive
// between fetches to the same host.
struct ThreadHandle {
  CURL* curl = nullptr;
  ThreadHandle() { curl = curl_api().easy_init(); }
  ~ThreadHandle() {
    if (curl != nullptr) curl_api().easy_cleanup(curl);
  }
};

CURL* thread_handle() {
  thread_local ThreadHandle handle;
  if (handle.curl == nullptr) throw FetchError("cannot create a libcurl handle", false);
  curl_api().easy_reset(handle.curl);
  return handle.curl;
}

struct Sink {
  std::string body;
  int64_t max_bytes = 0;
  bool too_big = false;
  const std::atomic<bool>* cancel = nullptr;
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t n = size * count;
  if (int64_t(sink->body.size() + n) > sink->max_bytes) {
    sink->too_big = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  sink->body.append(data, n);
  return n;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* sink = static_cast<Sink*>(user);
  return sink->cancel != nullptr && sink->cancel->load() ? 1 : 0;
}

// Turns a finished attempt into a FetchError (retryable or not), or returns when it succeeded.
// `unsigned_note` ("" when signed) tells why an S3 request went without credentials, for a 401 / 403.
void throw_on_failure(CURLcode rc, long status, const Sink& sink, bool s3, const std::string& where,
                      const FetchOptions& options, const char* curl_message, const std::string& unsigned_note) {
  // An error status counts even when its body was cut off for being too large.
  const bool answered = rc == CURLE_OK || rc == CURLE_WRITE_ERROR || rc == CURLE_FILESIZE_EXCEEDED;
  if (answered && status >= 300) {
    std::string reason = str("HTTP ", status);
    const std::string code = s3 ? aws_error_code(sink.body) : "";
    if (!code.empty()) reason += " " + code;
    if (s3 && status < 400) reason += " (the bucket may be in another region: set AWS_REGION)";
    if (s3 && (status == 401 || status == 403) && !unsigned_note.empty()) reason += " (" + unsigned_note + ")";
    throw FetchError(where + reason, status >= 500 || status == 429 || status == 408);
  }
  if (sink.too_big || rc == CURLE_FILESIZE_EXCEEDED)
    throw FetchError(str(where, "body is larger than the limit of ", options.max_bytes, " bytes"), false);
  switch (rc) {
    case CURLE_OK:
      return;
    case CURLE_OPERATION_TIMEDOUT:
      throw FetchError(str(where, "timed out (limit ", options.timeout_ms, " ms, connect ", options.connect_timeout_ms,
                           " ms)"),
                       true);
    case CURLE_ABORTED_BY_CALLBACK:
      throw FetchError(where + "cancelled", false);
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      throw FetchError(where + curl_message, true);
    default:
      throw FetchError(where + curl_message, false);
  }
}

// One attempt. Throws FetchError (retryable or not) naming `shown` (the redacted URL).
std::string fetch_once(const std::string& url, const std::string& shown, const FetchOptions& options) {
  const bool s3 = starts_with_ci(url, "s3://");
  std::string http_url = url;
  S3Config s3_config;
  if (s3) {
    const S3Location location = parse_s3_url(url);
    try {
      s3_config = resolve_s3_config(options.s3_endpoint);
    } catch (const FetchError& e) {
      throw FetchError("fetch " + shown + ": " + e.what(), e.retryable());
    }
    http_url = s3_object_url(location, s3_config);
  }
  const CurlApi& api = curl_api();
  CURLSH* share = CurlShare::get();
  CURL* curl = thread_handle();
  Sink sink;
  sink.max_bytes = options.max_bytes;
  sink.cancel = options.cancel;
  char error_buffer[CURL_ERROR_SIZE] = {0};
  api.easy_setopt(curl, CURLOPT_URL, http_url.c_str());
  api.easy_setopt(curl, CURLOPT_SHARE, share);
  api.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  api.easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  limit_to_http(api, curl);
  api.easy_setopt(curl, CURLOPT_USERAGENT, "fovea");
  api.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, long(std::max(1, options.connect_timeout_ms)));
  api.easy_setopt(curl, CURLOPT_TIMEOUT_MS, long(std::max(1, options.timeout_ms)));
  api.easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(options.max_bytes));
  api.easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  api.easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  api.easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  api.easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  api.easy_setopt(curl, CURLOPT_XFERINFODATA, &sink);
  const std::string ca_file = ca_bundle(options.ca_file);
  if (!ca_file.empty()) api.easy_setopt(curl, CURLOPT_CAINFO, ca_file.c_str());
  curl_slist* headers = nullptr;
  std::string sigv4;
  if (s3) {
    if (!s3_config.access_key.empty()) {
      // libcurl computes the SigV4 signature over the method, path, host, x-amz-date and our x-amz-* headers.
      sigv4 = "aws:amz:" + s3_config.region + ":s3";
      api.easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4.c_str());
      api.easy_setopt(curl, CURLOPT_USERNAME, s3_config.access_key.c_str());
      api.easy_setopt(curl, CURLOPT_PASSWORD, s3_config.secret_key.c_str());
      // S3 requires the payload's hash; a GET's payload is empty.
      headers = api.slist_append(
          headers, "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
      if (!s3_config.session_token.empty())
        headers = api.slist_append(headers, ("x-amz-security-token: " + s3_config.session_token).c_str());
      api.easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    }
  } else {
    api.easy_setopt(curl, CURLOPT_FOLLOWLOCATION, options.max_redirects > 0 ? 1L : 0L);
    api.easy_setopt(curl, CURLOPT_MAXREDIRS, long(std::max(0, options.max_redirects)));
  }
  const CURLcode rc = api.easy_perform(curl);
  long status = 0;
  api.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  api.easy_setopt(curl, CURLOPT_HTTPHEADER, static_cast<curl_slist*>(nullptr));
  api.slist_free_all(headers);
  api.easy_setopt(curl, CURLOPT_ERRORBUFFER, static_cast<char*>(nullptr));

  std::string unsigned_note;
  if (s3 && s3_config.access_key.empty())
    unsigned_note = "sent unsigned: " + (s3_config.why_unsigned.empty() ? std::string("no AWS credentials found")
                                                                        : s3_config.why_unsigned);
  throw_on_failure(rc, status, sink, s3, "fetch " + shown + ": ", options,
                   error_buffer[0] ? error_buffer : api.easy_strerror(rc), unsigned_note);
  return std::move(sink.body);
}

void sleep_unless_cancelled(int ms, const std::atomic<bool>* cancel) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    if (cancel != nullptr && cancel->load()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, 20)));
  }
}

}  // namespace

bool is_fetch_url(const std::string& url) {
  return starts_with_ci(url, "http://") || starts_with_ci(url, "https://") || starts_with_ci(url, "s3://");
}

std::string redact_url(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return url.substr(0, url.find_first_of("?#"));
  const size_t authority = scheme_end + 3;
  size_t path = url.find_first_of("/?#", authority);
  if (path == std::string::npos) path = url.size();
  std::string host = url.substr(authority, path - authority);
  const size_t at = host.rfind('@');
  if (at != std::string::npos) host = host.substr(at + 1);
  std::string rest = url.substr(path);
  const size_t hash = rest.find('#');
  if (hash != std::string::npos) rest.resize(hash);
  const size_t query = rest.find('?');
  if (query != std::string::npos) rest = rest.substr(0, query) + "?...";
  return url.substr(0, authority) + host + rest;
}

std::string fetch_bytes(const std::string& url, const FetchOptions& options) {
  const std::string shown = redact_url(url);
  if (!is_fetch_url(url)) throw FetchError(str("fetch ", shown, ": only http://, https:// and s3:// URLs"), false);
  int backoff = std::max(0, options.backoff_ms);
  for (int attempt = 0;; ++attempt) {
    try {
      return fetch_once(url, shown, options);
    } catch (const FetchError& e) {
      const bool cancelled = options.cancel != nullptr && options.cancel->load();
      if (!e.retryable() || attempt >= options.retries || cancelled) {
        if (attempt == 0) throw;
        throw FetchError(str(e.what(), " (after ", attempt + 1, " attempts)"), e.retryable());
      }
    }
    sleep_unless_cancelled(backoff, options.cancel);
    backoff = std::min(backoff * 2, 8000);
  }
}

struct FetchLimiter::State {
  std::mutex mutex;
  std::condition_variable cv;
  int free = 1;
};

FetchLimiter::FetchLimiter(int max_concurrent) : state_(std::make_shared<State>()) {
  state_->free = std::max(1, max_concurrent);
}

std::string FetchLimiter::fetch(const std::string& url, const FetchOptions& options) {
  {
    std::unique_lock lock(state_->mutex);
    state_->cv.wait(lock, [&] { return state_->free > 0; });
    state_->free--;
  }
  struct Release {
    State* s;
    ~Release() {
      {
        std::lock_guard lock(s->mutex);
        s->free++;
      }
      s->cv.notify_one();
    }
  } release{state_.get()};
  return fetch_bytes(url, options);
}

}  // namespace fovea

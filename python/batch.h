// The native half of one Engine.generate()/stream() call: its jobs go through the same request pump as
// `fovea run` (jobs/request_pump.h) on a thread of the Batch, URL images are downloaded ahead of the engine by
// the prefetcher (a job whose engine failed runs again on another one: the data-parallel dispatcher's retry, which
// says so with a restart event), and what finishes (and, for token
// streaming, every delta) waits in C++ until the Python thread takes it in next().
// Threads: engine threads and the pump thread never touch Python objects. next() waits with the GIL released
// and converts with it held.
#pragma once
#include <nanobind/nanobind.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "fetch/fetch.h"
#include "fetch/prefetch.h"
#include "fovea/engine.h"
#include "jobs/request_pump.h"

namespace fovea::py {

// One request as Python built it; a non-empty `error` fails it without reaching the engine (e.g. an unreadable
// image file), so a bad input costs only its own result.
// Images given as http(s):// or s3:// URLs arrive with empty bytes and their URL in `urls` (same slot); the
// Batch downloads them ahead of the engine and a failed download fails only this job.
struct Job {
  Request request;
  std::string error;
  ErrorKind error_kind = ErrorKind::InvalidRequest;  // of `error`: InvalidImage for an image it could not have
  std::vector<std::string> urls;  // per image slot: "" or the URL to fetch
};

// How a Batch runs: fovea.Engine's arguments of the same names (fovea run's --fetch-timeout, --prefetch, ...).
struct BatchOptions {
  int concurrency = 64;              // requests of the call in the engine at once
  bool deltas = false;               // also report every token delta (Engine.stream(..., deltas=True))
  std::string ca_file;               // "" -> FOVEA_CA_BUNDLE / CURL_CA_BUNDLE / the system's roots
  std::string s3_endpoint;           // "" -> AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL / AWS
  double fetch_timeout = 60.0;       // seconds per attempt
  int fetch_retries = 3;
  int fetch_parallel = 8;            // downloads at once
  int prefetch = 32;                 // jobs whose first URL image is fetched ahead
  int64_t max_image_bytes = 64ll * 1024 * 1024;

  FetchOptions fetch_options() const;
};

class Batch {
 public:
  Batch(std::shared_ptr<InferenceService> service, std::vector<Job> jobs, const BatchOptions& options);
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  // Waits for news and returns it as a list of tuples (see fovea/_fovea.pyi: finished results, and with deltas
  // ("delta", index, text, tokens, logprobs) / ("restart", index)); None once everything was returned.
  // Checks for Ctrl-C every 100 ms.
  nanobind::object next();
  // Requests not yet handed to the engine finish at once as "cancelled"; those in flight run to their end.
  void cancel() { cancelled_ = true; }
  size_t size() const { return jobs_.size(); }

 private:
  struct Delta {
    size_t index = 0;
    bool restart = false;  // the job's engine failed: what it streamed so far is void, it starts again
    std::string text;
    std::vector<int32_t> tokens;
    std::vector<TokenLogprob> logprobs;
  };
  using Item = std::variant<FinishedRequest, Delta>;

  void resolve_urls(size_t i, Prefetcher& prefetcher);
  void pump(int concurrency);
  void post(std::vector<Item> items);
  nanobind::tuple convert(const FinishedRequest& f) const;
  nanobind::tuple convert(const Delta& d) const;
  nanobind::list convert(const std::vector<TokenLogprob>& logprobs) const;

  std::shared_ptr<InferenceService> service_;
  std::vector<Job> jobs_;
  BatchOptions options_;
  std::vector<bool> reported_;  // guarded by mutex_
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Item> ready_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace fovea::py

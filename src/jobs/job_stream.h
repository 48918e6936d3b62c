// One stream of jobs for a caller that takes results as they come (the Python Engine.generate()/stream() call):
// the jobs go through the same request pump as `fovea run` (jobs/request_pump.h) on a thread of the stream, URL
// images are downloaded ahead of the engine by the prefetcher, and what finishes (and, with `deltas`, every token
// delta) waits here until the consumer takes it with wait(). A job whose engine failed runs again on another one
// (the data-parallel dispatcher's retry), which the stream reports as a restart item.
// Threads: the pump thread builds and submits jobs and posts results; engine threads post deltas; any one
// consumer thread calls wait() and cancel(). No language binding lives here, so ThreadSanitizer sees all of it
// (tests/jobs/test_job_stream.cc); python/batch.cc wraps it.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "fetch/fetch.h"
#include "fovea/engine.h"
#include "jobs/request_pump.h"

namespace fovea {

class Prefetcher;

// One request as the caller built it; a non-empty `error` fails it without reaching the engine (e.g. an
// unreadable image file), so a bad input costs only its own result.
// Images given as http(s):// or s3:// URLs arrive with empty bytes and their URL in `urls` (same slot); the
// stream downloads them ahead of the engine and a failed download fails only this job (as invalid_image).
struct StreamJob {
  Request request;
  std::string error;
  ErrorKind error_kind = ErrorKind::InvalidRequest;  // of `error`: InvalidImage for an image it could not have
  std::vector<std::string> urls;                     // per image slot: "" or the URL to fetch
};

// How a stream runs: fovea.Engine's arguments of the same names (fovea run's --fetch-timeout, --prefetch, ...).
struct JobStreamOptions {
  int concurrency = 64;         // requests of the stream in the engine at once
  bool deltas = false;          // also report every token delta
  std::string ca_file;          // "" -> FOVEA_CA_BUNDLE / CURL_CA_BUNDLE / the system's roots
  std::string s3_endpoint;      // "" -> AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL / AWS
  double fetch_timeout = 60.0;  // seconds per attempt
  int fetch_retries = 3;
  int fetch_parallel = 8;  // downloads at once
  int prefetch = 32;       // jobs whose first URL image is fetched ahead
  int64_t max_image_bytes = 64ll * 1024 * 1024;

  FetchOptions fetch_options() const;
};

// New tokens of one job, or (restart) word that its engine failed: what it streamed so far is void, it runs
// again elsewhere and streams from the start.
struct StreamDelta {
  size_t index = 0;
  bool restart = false;
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
};

// What wait() hands over: a job's one final result, or (with deltas) a delta; a job's deltas come before its
// result and in the order the engine produced them.
using StreamItem = std::variant<FinishedRequest, StreamDelta>;

class JobStream {
 public:
  // Starts the pump thread at once.
  JobStream(std::shared_ptr<InferenceService> service, std::vector<StreamJob> jobs, const JobStreamOptions& options);
  ~JobStream();  // cancels and waits for the jobs in flight (engine threads finish them)
  JobStream(const JobStream&) = delete;
  JobStream& operator=(const JobStream&) = delete;

  // Waits up to `timeout` for news and moves it to *items (appended). Returns true once every job's result has
  // been handed over (this call's items included): nothing more will come.
  bool wait(std::chrono::milliseconds timeout, std::vector<StreamItem>* items);
  // Jobs not yet handed to the engine finish at once with the error "cancelled"; those in flight run to their end.
  void cancel() { cancelled_ = true; }
  size_t size() const { return jobs_.size(); }

 private:
  void resolve_urls(size_t i, Prefetcher& prefetcher);
  void pump();
  void post(std::vector<StreamItem> items);
  void report_unfinished(const std::string& failure);

  std::shared_ptr<InferenceService> service_;
  std::vector<StreamJob> jobs_;  // job i belongs to the pump thread until it is submitted
  JobStreamOptions options_;
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<bool> reported_;      // guarded by mutex_: a final result was posted
  std::vector<StreamItem> ready_;   // guarded by mutex_
  bool done_ = false;               // guarded by mutex_
  std::thread thread_;
};

}  // namespace fovea

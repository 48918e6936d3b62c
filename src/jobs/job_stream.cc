#include "jobs/job_stream.h"

#include <algorithm>

#include "core/error.h"
#include "fetch/prefetch.h"

namespace fovea {

FetchOptions JobStreamOptions::fetch_options() const {
  FetchOptions fetch;
  fetch.timeout_ms = int(fetch_timeout * 1000.0);
  fetch.connect_timeout_ms = std::min(fetch.connect_timeout_ms, fetch.timeout_ms);
  fetch.retries = fetch_retries;
  fetch.max_bytes = max_image_bytes;
  fetch.ca_file = ca_file;
  fetch.s3_endpoint = s3_endpoint;
  return fetch;
}

JobStream::JobStream(std::shared_ptr<InferenceService> service, std::vector<StreamJob> jobs,
                     const JobStreamOptions& options)
    : service_(std::move(service)), jobs_(std::move(jobs)), options_(options), reported_(jobs_.size(), false) {
  thread_ = std::thread([this] { pump(); });
}

JobStream::~JobStream() {
  cancel();
  thread_.join();
}

bool JobStream::wait(std::chrono::milliseconds timeout, std::vector<StreamItem>* items) {
  std::unique_lock lock(mutex_);
  cv_.wait_for(lock, timeout, [this] { return !ready_.empty() || done_; });
  for (StreamItem& item : ready_) items->push_back(std::move(item));
  ready_.clear();
  return done_;  // set after the last post, under the same lock: nothing can follow
}

// The first URL image of each job is downloaded ahead through the prefetcher (taken in job order); further URL
// images of the same job, rare, are fetched when the job is built.
void JobStream::resolve_urls(size_t i, Prefetcher& prefetcher) {
  StreamJob& job = jobs_[i];
  Prefetched first = prefetcher.take(i);
  bool first_taken = false;
  for (size_t k = 0; k < job.urls.size() && job.error.empty(); ++k) {
    if (job.urls[k].empty()) continue;
    std::string bytes;
    if (!first_taken) {
      first_taken = true;
      job.error = first.error;
      bytes = std::move(first.bytes);
    } else {
      try {
        bytes = fetch_bytes(job.urls[k], options_.fetch_options());
      } catch (const std::exception& e) {
        job.error = e.what();
      }
    }
    if (job.error.empty() && bytes.empty()) job.error = "empty image at " + redact_url(job.urls[k]);
    if (!job.error.empty()) job.error_kind = ErrorKind::InvalidImage;  // a download failed: as every door says
    job.request.images[k].bytes = std::move(bytes);
  }
}

void JobStream::pump() {
  std::vector<std::string> first_urls(jobs_.size());
  for (size_t i = 0; i < jobs_.size(); ++i)
    for (const std::string& url : jobs_[i].urls)
      if (!url.empty() && jobs_[i].error.empty()) {
        first_urls[i] = url;
        break;
      }
  // Declared before the pump runs and destroyed after it: its destructor stops downloads a cancel left behind.
  Prefetcher prefetcher(std::move(first_urls), options_.fetch_options(), options_.prefetch, options_.fetch_parallel);
  PumpCallbacks callbacks;
  // Called once per job, in index order (a retry after an engine failure is the dispatcher's, below the pump).
  // URLs resolve here, just before the job reaches the engine; a cancelled stream downloads nothing more.
  callbacks.make_request = [this, &prefetcher](size_t i, Request* request, std::string* error) {
    StreamJob& job = jobs_[i];
    if (cancelled_) {
      *error = "cancelled";
      return false;
    }
    resolve_urls(i, prefetcher);
    if (!job.error.empty()) throw RequestError(job.error_kind, job.error);
    *request = std::move(job.request);
    return true;
  };
  if (options_.deltas)
    callbacks.on_event = [this](size_t i, const RequestEvent& ev) {
      if (!ev.restart && ev.text_delta.empty() && ev.token_delta.empty() && ev.logprob_delta.empty()) return;
      std::vector<StreamItem> items;
      items.emplace_back(StreamDelta{i, ev.restart, ev.text_delta, ev.token_delta, ev.logprob_delta});
      post(std::move(items));
    };
  callbacks.on_finished = [this](std::vector<FinishedRequest>& finished) {
    post(std::vector<StreamItem>(std::make_move_iterator(finished.begin()), std::make_move_iterator(finished.end())));
  };
  std::string failure;
  try {
    pump_requests(*service_, jobs_.size(), options_.concurrency, callbacks);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  report_unfinished(failure);
}

// Only after a failure of the pump itself is a job left without a result: every job still gets one, and then
// the consumer learns that the stream is over.
void JobStream::report_unfinished(const std::string& failure) {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (reported_[i]) continue;
    FinishedRequest f;
    f.index = i;
    f.final.finished = true;
    f.final.finish_reason = "error";
    f.final.error = failure.empty() ? "lost" : failure;
    ready_.emplace_back(std::move(f));
  }
  done_ = true;
  cv_.notify_all();
}

void JobStream::post(std::vector<StreamItem> items) {
  std::lock_guard lock(mutex_);
  for (StreamItem& item : items) {
    if (const auto* f = std::get_if<FinishedRequest>(&item)) reported_[f->index] = true;
    ready_.push_back(std::move(item));
  }
  cv_.notify_all();
}

}  // namespace fovea

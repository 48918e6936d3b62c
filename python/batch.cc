#include "batch.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>

namespace nb = nanobind;

namespace fovea::py {
namespace {

// Generated text may end inside a UTF-8 sequence (one byte-fallback token): replace, never raise.
nb::str utf8(const std::string& s) {
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace"));
}

}  // namespace

FetchOptions BatchOptions::fetch_options() const {
  FetchOptions fetch;
  fetch.timeout_ms = int(fetch_timeout * 1000.0);
  fetch.connect_timeout_ms = std::min(fetch.connect_timeout_ms, fetch.timeout_ms);
  fetch.retries = fetch_retries;
  fetch.max_bytes = max_image_bytes;
  fetch.ca_file = ca_file;
  fetch.s3_endpoint = s3_endpoint;
  return fetch;
}

Batch::Batch(std::shared_ptr<InferenceService> service, std::vector<Job> jobs, const BatchOptions& options)
    : service_(std::move(service)), jobs_(std::move(jobs)), options_(options), reported_(jobs_.size(), false) {
  thread_ = std::thread([this] { pump(options_.concurrency); });
}

Batch::~Batch() {
  cancel();
  nb::gil_scoped_release release;  // in-flight requests finish on engine threads, which never need the GIL
  thread_.join();
}

nb::object Batch::next() {
  std::vector<Item> got;
  bool done = false;
  while (got.empty() && !done) {
    {
      nb::gil_scoped_release release;
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return !ready_.empty() || done_; });
      got.swap(ready_);
      done = done_;
    }
    if (got.empty() && !done && PyErr_CheckSignals() != 0) throw nb::python_error();
  }
  if (got.empty()) return nb::none();
  nb::list out;
  for (const Item& item : got) std::visit([&](const auto& x) { out.append(convert(x)); }, item);
  return out;
}

// The first URL image of each job is downloaded ahead through the prefetcher (taken in job order); further URL
// images of the same job, rare, are fetched when the job is built.
void Batch::resolve_urls(size_t i, Prefetcher& prefetcher) {
  Job& job = jobs_[i];
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

void Batch::pump(int concurrency) {
  std::vector<std::string> first_urls(jobs_.size());
  for (size_t i = 0; i < jobs_.size(); ++i)
    for (const std::string& url : jobs_[i].urls)
      if (!url.empty() && jobs_[i].error.empty()) {
        first_urls[i] = url;
        break;
      }
  Prefetcher prefetcher(std::move(first_urls), options_.fetch_options(), options_.prefetch, options_.fetch_parallel);
  PumpCallbacks callbacks;
  // Called once per job, in index order (a retry after an engine failure is the dispatcher's, below the pump).
  // URLs resolve here, just before the job reaches the engine.
  callbacks.make_request = [this, &prefetcher](size_t i, Request* request, std::string* error) {
    Job& job = jobs_[i];
    resolve_urls(i, prefetcher);
    if (cancelled_) *error = "cancelled";
    else if (!job.error.empty()) throw RequestError(job.error_kind, job.error);
    else *request = std::move(job.request);
    return error->empty();
  };
  if (options_.deltas)
    callbacks.on_event = [this](size_t i, const RequestEvent& ev) {
      if (!ev.restart && ev.text_delta.empty() && ev.token_delta.empty() && ev.logprob_delta.empty()) return;
      std::vector<Item> items;
      items.emplace_back(Delta{i, ev.restart, ev.text_delta, ev.token_delta, ev.logprob_delta});
      post(std::move(items));
    };
  callbacks.on_finished = [this](std::vector<FinishedRequest>& finished) {
    post(std::vector<Item>(std::make_move_iterator(finished.begin()), std::make_move_iterator(finished.end())));
  };
  std::string failure;
  try {
    pump_requests(*service_, jobs_.size(), concurrency, callbacks);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  std::vector<Item> lost;  // only after a failure of the pump itself: every job still gets a result
  {
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (reported_[i]) continue;
      FinishedRequest f;
      f.index = i;
      f.final.finished = true;
      f.final.finish_reason = "error";
      f.final.error = failure.empty() ? "lost" : failure;
      lost.emplace_back(std::move(f));
    }
  }
  post(std::move(lost));
  std::lock_guard lock(mutex_);
  done_ = true;
  cv_.notify_all();
}

void Batch::post(std::vector<Item> items) {
  std::lock_guard lock(mutex_);
  for (Item& item : items) {
    if (const auto* f = std::get_if<FinishedRequest>(&item)) reported_[f->index] = true;
    ready_.push_back(std::move(item));
  }
  cv_.notify_all();
}

nb::list Batch::convert(const std::vector<TokenLogprob>& logprobs) const {
  nb::list out;
  for (const TokenLogprob& lp : logprobs) {
    nb::list top;
    for (const auto& [token, value] : lp.top)
      top.append(nb::make_tuple(token, utf8(service_->token_text(token)), value));
    out.append(nb::make_tuple(lp.token, utf8(service_->token_text(lp.token)), lp.logprob, top));
  }
  return out;
}

nb::tuple Batch::convert(const Delta& d) const {
  if (d.restart) return nb::make_tuple("restart", d.index);
  nb::list tokens;
  for (int32_t t : d.tokens) tokens.append(t);
  return nb::make_tuple("delta", d.index, utf8(d.text), tokens, convert(d.logprobs));
}

nb::tuple Batch::convert(const FinishedRequest& f) const {
  const RequestEvent& ev = f.final;
  nb::list tokens, prompt_ids, choices;
  for (int32_t t : f.tokens) tokens.append(t);
  for (int32_t t : ev.prompt_token_ids) prompt_ids.append(t);
  for (float value : ev.choice_logprobs) choices.append(value);
  nb::dict answers;
  for (const auto& [answer, value] : ev.answer_logprobs) answers[utf8(answer)] = value;
  std::string error = ev.error;
  if (error.empty() && (ev.finish_reason == "error" || ev.finish_reason == "cancelled")) error = ev.finish_reason;
  // A failure without a kind (cancelled by the caller, lost by the pump) counts as ours.
  const ErrorKind kind = error.empty()                     ? ErrorKind::None
                         : ev.error_kind == ErrorKind::None ? ErrorKind::Internal
                                                            : ev.error_kind;
  const nb::object kind_name = kind == ErrorKind::None ? nb::none() : nb::object(nb::str(error_kind_name(kind)));
  return nb::make_tuple(f.index, utf8(f.text), tokens, convert(f.logprobs), answers, ev.finish_reason,
                        error.empty() ? nb::none() : nb::object(utf8(error)), ev.prompt_tokens, ev.completion_tokens,
                        ev.ms, choices, kind_name, prompt_ids);
}

}  // namespace fovea::py

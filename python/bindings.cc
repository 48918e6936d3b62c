// fovea._fovea, the native half of the Python package (nanobind): an engine handle over InferenceService and a
// Batch that feeds one call's requests through the same request pump as `fovea run`, on a thread of its own.
// Threads: engine threads never touch Python objects. Finished requests wait in C++ (Batch::ready_) until the
// Python thread takes them in Batch.next(), which waits with the GIL released and converts with it held.
// Everything else (argument checking, images, progress, asyncio) lives in python/fovea/*.py.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/service.h"
#include "engine/stats_json.h"
#include "fetch/fetch.h"
#include "fetch/prefetch.h"
#include "jobs/request_pump.h"
#include "server/media.h"
#include "server/openai_api.h"

namespace nb = nanobind;

namespace fovea {
namespace {

// One request as Python built it; a non-empty `error` fails it without reaching the engine (e.g. an unreadable
// image file), so a bad input costs only its own result.
// Images given as http(s):// or s3:// URLs arrive with empty bytes and their URL in `urls` (same slot); the
// Batch downloads them ahead of the engine (fetch/prefetch.h) and a failed download fails only this job.
struct Job {
  Request request;
  std::string error;
  std::vector<std::string> urls;  // per image slot: "" or the URL to fetch
  bool fetched = false;           // the URLs were resolved (make_request may run again for a retried job)
};

// Generated text may end inside a UTF-8 sequence (one byte-fallback token): replace, never raise.
nb::str utf8(const std::string& s) {
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace"));
}

TilingPolicy parse_tiling(const std::string& name) {
  if (name == "official") return TilingPolicy::Official;
  if (name == "compact") return TilingPolicy::Compact;
  throw nb::value_error("tiling must be 'official' or 'compact'");
}

// OpenAI-style chat messages through the server's own parser, so `messages` mean here what they mean to
// `fovea serve`. The caller runs this process: local paths and remote URLs are allowed.
void apply_messages(const std::string& messages_json, Job* job) {
  openai::ChatRequest chat;
  openai::ApiError error;
  MediaOptions media;
  media.allowed_media_dir = "/";
  media.allow_remote = true;
  const auto loader = [&](const std::string& url) { return load_image_url(url, media); };
  if (!openai::parse_chat_request("{\"messages\": " + messages_json + "}", openai::ParseOptions{}, loader, &chat,
                                  &error)) {
    job->error = error.message;
    return;
  }
  job->request.system = chat.request.system;
  job->request.prompt = chat.request.prompt;
  for (auto& image : chat.request.images) job->request.images.push_back(std::move(image));
}

Job make_job(const std::vector<nb::bytes>& images, const std::vector<std::string>& labels, const std::string& prompt,
             const std::string& system, const std::string& messages_json, int max_tokens, float temperature,
             float top_p, uint64_t seed, const std::vector<std::string>& stop, int top_logprobs,
             const std::vector<std::string>& answers, const std::vector<std::string>& choices,
             const std::string& tiling, int max_tiles,
             const std::string& error) {
  Job job;
  job.error = error;
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string label = i < labels.size() ? labels[i] : "";
    const bool url = images[i].size() == 0 && is_fetch_url(label);
    job.request.images.push_back({std::string(images[i].c_str(), images[i].size()), url ? redact_url(label) : label});
    job.urls.push_back(url ? label : "");
  }
  job.request.prompt = prompt;
  job.request.system = system;
  if (!messages_json.empty() && job.error.empty()) apply_messages(messages_json, &job);
  GenerationParams& p = job.request.params;
  p.max_tokens = max_tokens;
  p.temperature = temperature;
  p.top_p = top_p;
  p.seed = seed;
  p.stop = stop;
  p.top_logprobs = top_logprobs;
  p.answers = answers;
  p.choices = choices;
  job.request.tiling = parse_tiling(tiling);
  job.request.max_tiles = max_tiles;
  return job;
}

// One generate()/stream() call: its jobs go through pump_requests on a thread of this Batch; finished ones
// collect in ready_ for next().
class Batch {
 public:
  Batch(std::shared_ptr<InferenceService> service, std::vector<Job> jobs, int concurrency)
      : service_(std::move(service)), jobs_(std::move(jobs)), reported_(jobs_.size(), false) {
    thread_ = std::thread([this, concurrency] { pump(concurrency); });
  }
  ~Batch() {
    cancel();
    nb::gil_scoped_release release;  // in-flight requests finish on engine threads, which never need the GIL
    thread_.join();
  }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  // Waits for finished requests and returns them as tuples (see fovea/_convert.py); None once all were returned.
  // Checks for Ctrl-C every 100 ms.
  nb::object next() {
    std::vector<FinishedRequest> got;
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
    for (const FinishedRequest& f : got) out.append(convert(f));
    return out;
  }

  // Requests not yet handed to the engine finish at once as "cancelled"; those in flight run to their end.
  void cancel() { cancelled_ = true; }
  size_t size() const { return jobs_.size(); }

 private:
  // The first URL image of each job is downloaded ahead through the prefetcher (taken in job order); further
  // URL images of the same job, rare, are fetched when the job is built.
  static constexpr int kPrefetchWindow = 32, kFetchParallel = 8;

  void resolve_urls(size_t i, Prefetcher& prefetcher) {
    Job& job = jobs_[i];
    job.fetched = true;
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
          bytes = fetch_bytes(job.urls[k]);
        } catch (const std::exception& e) {
          job.error = e.what();
        }
      }
      if (job.error.empty() && bytes.empty()) job.error = "empty image at " + redact_url(job.urls[k]);
      job.request.images[k].bytes = std::move(bytes);
    }
  }

  void pump(int concurrency) {
    std::vector<std::string> first_urls(jobs_.size());
    for (size_t i = 0; i < jobs_.size(); ++i)
      for (const std::string& url : jobs_[i].urls)
        if (!url.empty() && jobs_[i].error.empty()) {
          first_urls[i] = url;
          break;
        }
    Prefetcher prefetcher(std::move(first_urls), FetchOptions{}, kPrefetchWindow, kFetchParallel);
    PumpCallbacks callbacks;
    // The first call for job i comes in index order (a retry, after an engine failed, comes later): the URLs are
    // resolved then, once. The request is copied, not moved, so that a retry finds it whole.
    callbacks.make_request = [this, &prefetcher](size_t i, Request* request, std::string* error) {
      if (!jobs_[i].fetched) resolve_urls(i, prefetcher);
      if (cancelled_) *error = "cancelled";
      else if (!jobs_[i].error.empty()) *error = jobs_[i].error;
      else *request = jobs_[i].request;
      return error->empty();
    };
    callbacks.on_finished = [this](std::vector<FinishedRequest>& finished) { post(finished); };
    std::string failure;
    try {
      pump_requests(*service_, jobs_.size(), concurrency, callbacks);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    std::vector<FinishedRequest> lost;  // only after a failure of the pump itself: every job still gets a result
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (reported_[i]) continue;
      FinishedRequest f;
      f.index = i;
      f.final.finished = true;
      f.final.finish_reason = "error";
      f.final.error = failure.empty() ? "lost" : failure;
      lost.push_back(std::move(f));
    }
    post(lost);
    std::lock_guard lock(mutex_);
    done_ = true;
    cv_.notify_all();
  }

  void post(std::vector<FinishedRequest>& finished) {
    std::lock_guard lock(mutex_);
    for (auto& f : finished) {
      reported_[f.index] = true;
      ready_.push_back(std::move(f));
    }
    cv_.notify_all();
  }

  // (index, text, tokens, logprobs [(token, text, logprob, [(token, text, logprob)])], answer_logprobs dict,
  //  finish_reason, error, prompt_tokens, completion_tokens, ms, choice_logprobs [one per choice], error_kind)
  nb::tuple convert(const FinishedRequest& f) const {
    const RequestEvent& ev = f.final;
    nb::list tokens, logprobs;
    for (int32_t t : f.tokens) tokens.append(t);
    for (const TokenLogprob& lp : f.logprobs) {
      nb::list top;
      for (const auto& [token, value] : lp.top) top.append(nb::make_tuple(token, utf8(service_->token_text(token)), value));
      logprobs.append(nb::make_tuple(lp.token, utf8(service_->token_text(lp.token)), lp.logprob, top));
    }
    nb::dict answers;
    for (const auto& [answer, value] : ev.answer_logprobs) answers[utf8(answer)] = value;
    std::string error = ev.error;
    if (error.empty() && (ev.finish_reason == "error" || ev.finish_reason == "cancelled")) error = ev.finish_reason;
    nb::list choices;
    for (float value : ev.choice_logprobs) choices.append(value);
    // A failure without a kind (cancelled by the caller, lost by the pump) counts as ours.
    const ErrorKind kind = error.empty() ? ErrorKind::None
                           : ev.error_kind == ErrorKind::None ? ErrorKind::Internal : ev.error_kind;
    return nb::make_tuple(f.index, utf8(f.text), tokens, logprobs, answers, ev.finish_reason,
                          error.empty() ? nb::none() : nb::object(utf8(error)), ev.prompt_tokens,
                          ev.completion_tokens, ev.ms, choices,
                          kind == ErrorKind::None ? nb::none() : nb::object(nb::str(error_kind_name(kind))));
  }

  std::shared_ptr<InferenceService> service_;
  std::vector<Job> jobs_;
  std::vector<bool> reported_;  // guarded by mutex_
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<FinishedRequest> ready_;
  bool done_ = false;
  std::thread thread_;
};

class EngineHandle {
 public:
  explicit EngineHandle(const EngineConfig& config) {
    nb::gil_scoped_release release;  // loading takes seconds: let other Python threads run
    service_ = make_engine_service(config);
  }
  Batch* submit(std::vector<Job> jobs, int concurrency) {
    return new Batch(live(), std::move(jobs), concurrency);
  }
  std::string model_name() { return live()->model_name(); }
  std::string token_text(int32_t token) { return live()->token_text(token); }
  // Every EngineStats field as JSON text (engine/stats_json.h); fovea.Engine.stats() parses it.
  std::string stats_json_text() { return stats_json(live()->stats()).dump(); }
  // Finishes what is in flight and frees the model; Batches still alive keep the engine until they end.
  void close() {
    std::shared_ptr<InferenceService> service = std::move(service_);
    if (!service) return;
    nb::gil_scoped_release release;
    service->drain();
    service.reset();
  }

 private:
  std::shared_ptr<InferenceService> live() {
    if (!service_) throw nb::value_error("the engine is closed");
    return service_;
  }
  std::shared_ptr<InferenceService> service_;
};

}  // namespace
}  // namespace fovea

NB_MODULE(_fovea, m) {
  using namespace fovea;
  m.doc() = "Native core of the fovea package (use fovea.Engine, not this module).";
  nb::class_<EngineConfig> config(m, "EngineConfig");
  config.def(nb::init<>())
      .def_rw("model_dir", &EngineConfig::model_dir)
      .def_rw("backend", &EngineConfig::backend)
      .def_rw("gpus", &EngineConfig::gpus)
      .def_rw("replicas", &EngineConfig::replicas)
      .def_rw("kv_blocks", &EngineConfig::kv_blocks)
      .def_rw("block_size", &EngineConfig::block_size)
      .def_rw("max_step_tokens", &EngineConfig::max_step_tokens)
      .def_rw("max_batch_seqs", &EngineConfig::max_batch_seqs)
      .def_rw("preprocess_threads", &EngineConfig::preprocess_threads)
      .def_rw("prefix_cache", &EngineConfig::prefix_cache)
      .def_rw("vision_cache_tiles", &EngineConfig::vision_cache_tiles)
      .def_rw("max_queue", &EngineConfig::max_queue)
      .def_rw("max_image_pixels", &EngineConfig::max_image_pixels)
      .def_rw("cuda_graphs", &EngineConfig::cuda_graphs)
      .def_rw("vit_graphs", &EngineConfig::vit_graphs)
      .def_rw("batch_invariant", &EngineConfig::batch_invariant)
      .def_rw("gpu_normalize", &EngineConfig::gpu_normalize)
      .def_rw("quantization", &EngineConfig::quantization)
      .def_rw("memory_limit_bytes", &EngineConfig::memory_limit_bytes)
      .def_rw("load_format", &EngineConfig::load_format)
      .def_rw("w4", &EngineConfig::w4);

  nb::class_<Job>(m, "Job");
  m.def("make_job", &make_job, nb::kw_only(), nb::arg("images"), nb::arg("labels"), nb::arg("prompt"),
        nb::arg("system"), nb::arg("messages_json"), nb::arg("max_tokens"), nb::arg("temperature"), nb::arg("top_p"),
        nb::arg("seed"), nb::arg("stop"), nb::arg("top_logprobs"), nb::arg("answers"), nb::arg("choices"), nb::arg("tiling"),
        nb::arg("max_tiles"), nb::arg("error"));

  nb::class_<Batch>(m, "Batch")
      .def("next", &Batch::next)
      .def("cancel", &Batch::cancel)
      .def("__len__", &Batch::size);

  nb::class_<EngineHandle>(m, "EngineHandle")
      .def(nb::init<const EngineConfig&>())
      .def("submit", &EngineHandle::submit, nb::arg("jobs"), nb::arg("concurrency"), nb::rv_policy::take_ownership)
      .def("model_name", &EngineHandle::model_name)
      .def("token_text", &EngineHandle::token_text)
      .def("stats_json", &EngineHandle::stats_json_text)
      .def("close", &EngineHandle::close);
}

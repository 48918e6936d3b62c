// A stand-in for the Engine: answers each request with max_tokens tokens ("t0 t1 ..."), one every
// token_delay_ms, on its own thread; fails requests whose image bytes are "bad"; refuses submits beyond
// queue_limit requests in flight; counts cancels. "kv_blocks_used" is the number of requests in flight, so
// tests can check that everything is freed.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/error.h"
#include "fovea/engine.h"

namespace fovea::testing {

class FakeService final : public InferenceService {
 public:
  int token_delay_ms = 0;
  int queue_limit = 1000000;
  std::atomic<int> submitted{0};
  std::atomic<int> cancels{0};
  std::mutex mutex;
  std::vector<Request> requests;  // copies of what was submitted (image bytes included)

  ~FakeService() override {
    for (auto& t : threads_) t.join();
  }

  int64_t submit(Request request, RequestCallback callback) override {
    std::lock_guard lock(mutex);
    if (in_flight_.load() >= queue_limit) throw QueueFullError("queue full");
    const int64_t id = next_id_++;
    requests.push_back(request);
    submitted++;
    in_flight_++;
    threads_.emplace_back([this, id, request, callback] { generate(id, request, callback); });
    return id;
  }
  void cancel(int64_t id) override {
    std::lock_guard lock(mutex);
    cancelled_.insert(id);
    cancels++;
  }
  void drain() override {
    while (in_flight_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EngineStats stats() const override {
    EngineStats s;
    s.requests_submitted = submitted.load();
    s.kv_blocks_total = 100;
    s.kv_blocks_used = in_flight_.load();
    s.running = in_flight_.load();
    return s;
  }
  std::string model_name() const override { return "fake-model"; }
  std::string token_text(int32_t token) const override { return "t" + std::to_string(token); }
  int in_flight() const { return in_flight_.load(); }

 private:
  bool is_cancelled(int64_t id) {
    std::lock_guard lock(mutex);
    return cancelled_.count(id) != 0;
  }

  void generate(int64_t id, const Request& request, const RequestCallback& callback) {
    RequestEvent final;
    final.finished = true;
    final.prompt_tokens = 10;
    if (!request.images.empty() && request.images[0].bytes == "bad") {
      final.finish_reason = "error";
      final.error = "cannot decode image " + request.images[0].label;
      final.error_kind = ErrorKind::InvalidImage;
    } else {
      final.finish_reason = "length";
      for (int i = 0; i < request.params.max_tokens; ++i) {
        if (token_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(token_delay_ms));
        if (is_cancelled(id)) {
          final.finish_reason = "cancelled";
          break;
        }
        RequestEvent ev;
        ev.text_delta = (i ? " t" : "t") + std::to_string(i);
        ev.token_delta = {int32_t(i)};
        if (request.params.top_logprobs > 0) {
          TokenLogprob lp;
          lp.token = i;
          lp.logprob = -0.5f;
          for (int k = 0; k < request.params.top_logprobs; ++k) lp.top.emplace_back(i + k, -0.5f - float(k));
          ev.logprob_delta.push_back(lp);
        }
        callback(ev);
        final.completion_tokens = i + 1;
      }
      for (size_t a = 0; a < request.params.answers.size(); ++a)
        final.answer_logprobs[request.params.answers[a]] = -float(a + 1);
      for (size_t c = 0; c < request.params.choices.size(); ++c) final.choice_logprobs.push_back(-float(c + 1));
    }
    final.ms = 1.5;
    in_flight_--;  // before the final event: a client that saw it finished may read the stats at once
    callback(final);
  }

  std::atomic<int> in_flight_{0};
  int64_t next_id_ = 1;
  std::set<int64_t> cancelled_;
  std::vector<std::thread> threads_;
};

// A replica that answers each request on a thread of its own, as an engine's scheduler thread would, and joins
// them all in drain(). A subclass says, in accept(), what the request's thread does; accept() runs under the
// replica's lock with the submission's ordinal and may throw to refuse it (a failed engine's submit).
class ThreadedReplica : public InferenceService {
 public:
  ~ThreadedReplica() override { drain(); }  // the threads' work must not touch the subclass's members
  int64_t submit(Request request, RequestCallback callback) override {
    std::lock_guard lock(mutex_);
    const int64_t n = submitted_++;
    threads_.emplace_back(accept(n, std::move(request), std::move(callback)));
    return n;
  }
  void cancel(int64_t) override {}
  void drain() override {
    std::lock_guard lock(mutex_);
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  EngineStats stats() const override { return {}; }
  std::string model_name() const override { return "fake"; }
  std::string token_text(int32_t) const override { return ""; }

 protected:
  virtual std::function<void()> accept(int64_t n, Request request, RequestCallback callback) = 0;

 private:
  std::mutex mutex_;
  int64_t submitted_ = 0;
  std::vector<std::thread> threads_;
};

// What a request sees when its device is lost mid-answer: one token ("lost"), then the engine-failure error
// that the data-parallel dispatcher retries elsewhere.
inline void fail_as_lost_device(const RequestCallback& callback) {
  RequestEvent token;
  token.text_delta = "lost";
  token.token_delta = {99};
  callback(token);
  RequestEvent final_event;
  final_event.finished = true;
  final_event.finish_reason = "error";
  final_event.error = "engine failed: device lost";
  final_event.error_kind = ErrorKind::EngineFailed;
  callback(final_event);
}

}  // namespace fovea::testing

// The data-parallel dispatcher over fake engines: least-work routing, image affinity, cancel by the
// dispatcher's id, per-engine stats, and an engine that fails mid-batch losing no request (the dispatcher's
// retry sends its requests to the engine that still works, whoever submitted them).
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "fake_service.h"
#include "engine/data_parallel.h"
#include "jobs/request_pump.h"

namespace fovea {
namespace {

// Holds every request until the test finishes it; counts cancels; can fail like a broken device.
class HoldingEngine final : public InferenceService {
 public:
  struct Held {
    int64_t id;
    Request request;
    RequestCallback callback;
  };
  std::mutex mutex;
  std::vector<Held> held;
  std::vector<int64_t> cancelled;
  bool refuse_as_failed = false;  // submit() throws EngineFailedError
  bool refuse_as_full = false;    // submit() throws QueueFullError
  int finished = 0;

  int64_t submit(Request request, RequestCallback callback) override {
    std::lock_guard lock(mutex);
    if (refuse_as_failed) throw EngineFailedError("engine failed: device lost");
    if (refuse_as_full) throw QueueFullError("queue full: test");
    const int64_t id = 100 + int64_t(held.size());
    held.push_back({id, std::move(request), std::move(callback)});
    return id;
  }
  void cancel(int64_t id) override {
    std::lock_guard lock(mutex);
    cancelled.push_back(id);
  }
  void drain() override {}
  EngineStats stats() const override {
    EngineStats s;
    s.requests_finished = finished;
    s.kv_blocks_total = 10;
    return s;
  }
  std::string model_name() const override { return "fake"; }
  std::string token_text(int32_t) const override { return ""; }

  // Sends request k's final event (an error of that kind when given).
  void finish(size_t k, const std::string& error = "", ErrorKind kind = ErrorKind::EngineFailed) {
    RequestEvent ev;
    ev.finished = true;
    ev.finish_reason = error.empty() ? "length" : "error";
    ev.error = error;
    ev.error_kind = error.empty() ? ErrorKind::None : kind;
    finished += error.empty();
    held.at(k).callback(ev);
  }
};

struct Rig {
  std::vector<HoldingEngine*> engines;
  std::unique_ptr<DataParallelService> service;
  std::vector<RequestEvent> finals;
  std::vector<RequestEvent> events;  // every event, finals included
  std::mutex mutex;

  explicit Rig(int n, int retries = 1) {
    std::vector<std::unique_ptr<InferenceService>> owned;
    std::vector<std::string> labels;
    for (int i = 0; i < n; ++i) {
      auto e = std::make_unique<HoldingEngine>();
      engines.push_back(e.get());
      owned.push_back(std::move(e));
      labels.push_back("cpu#" + std::to_string(i));
    }
    DataParallelService::Options options;
    options.work = [](const Request& r) { return int64_t(r.params.max_tokens); };  // the test's own costs
    options.engine_failure_retries = retries;
    service = std::make_unique<DataParallelService>(std::move(owned), std::move(labels), options);
  }
  int64_t submit(int max_tokens, const std::string& image = "") {
    Request r;
    r.params.max_tokens = max_tokens;
    if (!image.empty()) r.images.push_back({image, "img"});
    return service->submit(r, [this](const RequestEvent& ev) {
      std::lock_guard lock(mutex);
      events.push_back(ev);
      if (ev.finished) finals.push_back(ev);
    });
  }
  std::vector<size_t> held() const {
    std::vector<size_t> out;
    for (auto* e : engines) out.push_back(e->held.size());
    return out;
  }
};

TEST(DataParallel, RoutesToTheEngineWithTheLeastQueuedWork) {
  Rig rig(3);
  rig.submit(10);  // -> 0
  rig.submit(5);   // -> 1
  rig.submit(1);   // -> 2
  rig.submit(1);   // -> 2 (1 < 5 < 10)
  EXPECT_EQ(rig.held(), (std::vector<size_t>{1, 1, 2}));
  rig.submit(3);   // -> 2 (2 < 5)
  rig.submit(1);   // -> 1 (engines 1 and 2 both hold 5: the lower index)
  EXPECT_EQ(rig.held(), (std::vector<size_t>{1, 2, 3}));
  rig.engines[0]->finish(0);  // engine 0 is empty again
  rig.submit(4);
  EXPECT_EQ(rig.held(), (std::vector<size_t>{2, 2, 3}));
  EXPECT_EQ(rig.finals.size(), 1u);
}

TEST(DataParallel, QuestionsAboutOneImageMeetOneEngine) {
  Rig rig(2);
  rig.submit(100, "photo-A");  // -> 0
  rig.submit(1, "photo-B");    // -> 1
  rig.submit(1, "photo-A");    // affinity: 0, although 0 holds far more work
  rig.submit(1, "photo-A");
  rig.submit(1, "photo-B");
  EXPECT_EQ(rig.held(), (std::vector<size_t>{3, 2}));
  for (const auto& h : rig.engines[0]->held) EXPECT_EQ(h.request.images[0].bytes, "photo-A");
  for (const auto& h : rig.engines[1]->held) EXPECT_EQ(h.request.images[0].bytes, "photo-B");
}

TEST(DataParallel, CancelReachesTheEngineWithItsOwnId) {
  Rig rig(2);
  rig.submit(5);
  const int64_t id = rig.submit(1);  // -> engine 1, its id 100
  rig.service->cancel(id);
  ASSERT_EQ(rig.engines[1]->cancelled.size(), 1u);
  EXPECT_EQ(rig.engines[1]->cancelled[0], 100);
  EXPECT_TRUE(rig.engines[0]->cancelled.empty());
  rig.engines[1]->finish(0);
  rig.service->cancel(id);  // finished: nothing to cancel
  EXPECT_EQ(rig.engines[1]->cancelled.size(), 1u);
}

TEST(DataParallel, AFullEngineHandsTheRequestToTheNextAndAllFullIsQueueFull) {
  Rig rig(2);
  rig.engines[0]->refuse_as_full = true;
  rig.submit(1);
  EXPECT_EQ(rig.held(), (std::vector<size_t>{0, 1}));
  rig.engines[1]->refuse_as_full = true;
  try {
    rig.submit(1);
    FAIL() << "every engine full should be queue full";
  } catch (const QueueFullError& e) {
    EXPECT_NE(std::string(e.what()).find("queue full: test"), std::string::npos) << e.what();
  }
}

TEST(DataParallel, AFailedEngineLeavesTheRotationAndStatsSaySo) {
  Rig rig(2, /*retries=*/0);  // its failure reaches the caller
  rig.submit(1, "photo-A");  // -> 0
  rig.submit(1);             // -> 1
  rig.engines[0]->finish(0, "engine failed: CUDA error");
  ASSERT_EQ(rig.finals.size(), 1u);
  EXPECT_EQ(rig.finals[0].error_kind, ErrorKind::EngineFailed);
  EXPECT_NE(rig.finals[0].error.find("cpu#0"), std::string::npos) << rig.finals[0].error;
  rig.submit(50, "photo-A");  // its engine is out: affinity gives way
  rig.submit(50);
  EXPECT_EQ(rig.held(), (std::vector<size_t>{1, 3}));
  rig.engines[1]->finish(0);
  const EngineStats s = rig.service->stats();
  ASSERT_EQ(s.engines.size(), 2u);
  EXPECT_TRUE(s.engines[0].failed);
  EXPECT_FALSE(s.engines[1].failed);
  EXPECT_EQ(s.engines[0].engine, "cpu#0");
  EXPECT_EQ(s.requests_finished, 1);
  EXPECT_EQ(s.kv_blocks_total, 20);
  EXPECT_FALSE(s.failed);
}

TEST(DataParallel, AnEngineThatRefusesAsFailedIsSkippedAndNoneLeftIsAnEngineFailure) {
  Rig rig(2);
  rig.engines[0]->refuse_as_failed = true;
  rig.submit(1);
  rig.submit(1);
  EXPECT_EQ(rig.held(), (std::vector<size_t>{0, 2}));
  rig.engines[1]->refuse_as_failed = true;
  try {
    rig.submit(1);
    FAIL() << "no engine left should throw";
  } catch (const EngineFailedError& e) {
    EXPECT_NE(std::string(e.what()).find("no working engine left"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(rig.service->stats().failed);
}

TEST(DataParallel, ARequestWhoseEngineFailedRunsAgainOnAnotherWithTheSameSeed) {
  Rig rig(2);
  const int64_t id = rig.submit(1, "photo-A");  // -> 0
  RequestEvent delta;
  delta.text_delta = "half an answ";
  delta.token_delta = {7};
  rig.engines[0]->held[0].callback(delta);
  rig.engines[0]->finish(0, "engine failed: CUDA error");
  ASSERT_EQ(rig.held(), (std::vector<size_t>{1, 1})) << "the request went to engine 1";
  EXPECT_TRUE(rig.finals.empty()) << rig.finals[0].error;
  ASSERT_EQ(rig.events.size(), 2u);
  EXPECT_EQ(rig.events[0].text_delta, "half an answ");
  EXPECT_TRUE(rig.events[1].restart) << "what engine 0 sent is void";
  EXPECT_FALSE(rig.events[1].finished);
  const Request& first = rig.engines[0]->held[0].request;
  const Request& again = rig.engines[1]->held[0].request;
  ASSERT_TRUE(first.params.seed.has_value()) << "the dispatcher seeds a request that gave none";
  EXPECT_EQ(again.params.seed, first.params.seed);
  EXPECT_EQ(again.images[0].bytes, "photo-A");
  rig.service->cancel(id);  // the dispatcher's id follows the request to its new engine
  EXPECT_EQ(rig.engines[1]->cancelled, (std::vector<int64_t>{100}));
  EXPECT_TRUE(rig.engines[0]->cancelled.empty());
  rig.engines[1]->finish(0);
  ASSERT_EQ(rig.finals.size(), 1u);
  EXPECT_EQ(rig.finals[0].error, "");
  EXPECT_TRUE(rig.service->stats().engines[0].failed);
}

TEST(DataParallel, ARetryIsOnceAndNeverOnAnEngineTheRequestWasOn) {
  Rig rig(3);
  rig.submit(1);  // -> 0
  rig.engines[0]->finish(0, "engine failed: lost");
  ASSERT_EQ(rig.held(), (std::vector<size_t>{1, 1, 0}));
  rig.engines[1]->finish(0, "engine failed: lost too");
  ASSERT_EQ(rig.finals.size(), 1u) << "one retry, not two";
  EXPECT_EQ(rig.finals[0].error_kind, ErrorKind::EngineFailed);
  EXPECT_NE(rig.finals[0].error.find("cpu#1"), std::string::npos) << rig.finals[0].error;
  EXPECT_TRUE(rig.events.size() == 1 && !rig.events[0].restart) << "nothing was delivered: no restart event";
  EXPECT_EQ(rig.held(), (std::vector<size_t>{1, 1, 0}));
}

TEST(DataParallel, WithNoEngineLeftTheFailureStandsAndSaysWhy) {
  Rig rig(2);
  rig.submit(1);  // -> 0
  rig.engines[1]->refuse_as_failed = true;
  rig.engines[0]->finish(0, "engine failed: CUDA error");
  ASSERT_EQ(rig.finals.size(), 1u);
  EXPECT_EQ(rig.finals[0].error_kind, ErrorKind::EngineFailed);
  EXPECT_NE(rig.finals[0].error.find("not retried"), std::string::npos) << rig.finals[0].error;
  EXPECT_TRUE(rig.service->stats().failed);
}

TEST(DataParallel, ACancelledRequestIsNotRetried) {
  Rig rig(2);
  const int64_t id = rig.submit(1);  // -> 0
  rig.service->cancel(id);
  rig.engines[0]->finish(0, "engine failed: lost");
  EXPECT_EQ(rig.held(), (std::vector<size_t>{1, 0}));
  ASSERT_EQ(rig.finals.size(), 1u);
}

// Answers every request at once on its own thread; from request `fail_from` on it behaves like a failed device:
// requests end with an engine-failure error and later submits are refused.
class FlakyEngine final : public testing::ThreadedReplica {
 public:
  explicit FlakyEngine(int fail_from) : fail_from_(fail_from) {}

 protected:
  std::function<void()> accept(int64_t n, Request request, RequestCallback callback) override {
    if (fail_from_ >= 0 && n > fail_from_) throw EngineFailedError("engine failed: device lost");
    const bool fail = fail_from_ >= 0 && n >= fail_from_;
    return [request, callback, fail] {
      RequestEvent ev;
      ev.text_delta = request.prompt + "!";
      callback(ev);
      RequestEvent final;
      final.finished = true;
      final.finish_reason = fail ? "error" : "length";
      if (fail) final.error = "engine failed: device lost";
      if (fail) final.error_kind = ErrorKind::EngineFailed;
      callback(final);
    };
  }

 private:
  int fail_from_;
};

TEST(DataParallel, AReplicaFailingMidBatchLosesNoRequest) {
  // Routing is made deterministic (every engine ties, so engine 0 gets everything until it fails): the failure
  // happens mid-batch however fast the threads answer, also under ThreadSanitizer.
  std::vector<std::unique_ptr<InferenceService>> engines;
  engines.push_back(std::make_unique<FlakyEngine>(3));  // its first three requests finish, then it fails
  engines.push_back(std::make_unique<FlakyEngine>(-1));
  DataParallelService::Options routing;
  routing.work = [](const Request&) { return int64_t(0); };  // all ties: everything goes to engine 0 until it fails
  DataParallelService service(std::move(engines), {"cpu#0", "cpu#1"}, routing);
  const size_t jobs = 40;
  std::vector<std::string> texts(jobs);
  std::vector<std::string> errors(jobs);
  int calls = 0;
  PumpCallbacks cb;
  cb.make_request = [&](size_t i, Request* r, std::string*) {
    r->prompt = "q" + std::to_string(i);
    r->images.push_back({"image-" + std::to_string(i % 7), "img"});
    return true;
  };
  cb.on_finished = [&](std::vector<FinishedRequest>& done) {
    for (const auto& f : done) {
      texts[f.index] = f.text;
      errors[f.index] = f.final.error;
      ++calls;
    }
  };
  pump_requests(service, jobs, 8, cb);  // no retry of its own: the dispatcher's
  EXPECT_EQ(calls, int(jobs));  // each job reported once
  for (size_t i = 0; i < jobs; ++i) {
    EXPECT_EQ(errors[i], "") << "job " << i;
    EXPECT_EQ(texts[i], "q" + std::to_string(i) + "!") << "job " << i;
  }
  EXPECT_TRUE(service.stats().engines[0].failed);
}

TEST(DataParallel, ParsesGpuLists) {
  EXPECT_TRUE(parse_gpu_list("", 4).empty());
  EXPECT_EQ(parse_gpu_list("all", 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(parse_gpu_list("0,1,3", 4), (std::vector<int>{0, 1, 3}));
  EXPECT_THROW(parse_gpu_list("0,4", 4), Error);
  EXPECT_THROW(parse_gpu_list("1,1", 4), Error);
  EXPECT_THROW(parse_gpu_list("0,,1", 4), Error);
  EXPECT_THROW(parse_gpu_list("x", 4), Error);
  EXPECT_THROW(parse_gpu_list("all", 0), Error);
}

}  // namespace
}  // namespace fovea

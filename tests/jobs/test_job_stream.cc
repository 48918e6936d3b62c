// JobStream (jobs/job_stream.h), the threading core of the Python Engine.generate()/stream(), driven from a
// consumer thread as Python drives it: every job gets exactly one final result, deltas come in order before
// their job's result, an engine failure mid-request gives a restart and a retried result (the data-parallel
// dispatcher's retry), cancel() finishes the jobs not yet started, a job with an error of its own or an image
// URL that cannot be fetched fails alone. Built under ThreadSanitizer too (scripts/test_sanitize.sh). No verdict
// waits on time: the fakes signal what happened.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "../engine/fake_service.h"
#include "core/error.h"
#include "engine/data_parallel.h"
#include "jobs/job_stream.h"
#include "server/http_server.h"

namespace fovea {
namespace {

using testing::FakeService;

// The consumer: a thread that takes everything the stream hands over until it says it is done.
class Consumer {
 public:
  explicit Consumer(JobStream& stream)
      : thread_([this, &stream] {
          while (!stream.wait(std::chrono::milliseconds(20), &items_)) {
          }
        }) {}
  ~Consumer() {
    if (thread_.joinable()) thread_.join();
  }
  std::vector<StreamItem> items() {
    thread_.join();
    return std::move(items_);
  }

 private:
  std::vector<StreamItem> items_;  // the consumer thread's until joined
  std::thread thread_;
};

// What one job got, in the order the consumer saw it.
struct JobLog {
  std::vector<StreamDelta> deltas;       // restarts included
  std::vector<FinishedRequest> finals;   // exactly one, expected
  bool delta_after_final = false;
  std::string streamed_text() const {  // the deltas after the last restart
    std::string text;
    for (const StreamDelta& d : deltas) text = d.restart ? "" : text + d.text;
    return text;
  }
  bool restarted() const {
    for (const StreamDelta& d : deltas)
      if (d.restart) return true;
    return false;
  }
};

std::vector<JobLog> by_job(const std::vector<StreamItem>& items, size_t jobs) {
  std::vector<JobLog> logs(jobs);
  for (const StreamItem& item : items) {
    if (const auto* f = std::get_if<FinishedRequest>(&item)) {
      logs.at(f->index).finals.push_back(*f);
    } else {
      const auto& d = std::get<StreamDelta>(item);
      logs.at(d.index).delta_after_final |= !logs.at(d.index).finals.empty();
      logs.at(d.index).deltas.push_back(d);
    }
  }
  return logs;
}

StreamJob job(size_t i, int max_tokens) {
  StreamJob j;
  j.request.prompt = "q" + std::to_string(i);
  j.request.params.max_tokens = max_tokens;
  return j;
}

std::string fake_text(int tokens) {  // what FakeService answers: "t0 t1 ..."
  std::string text;
  for (int i = 0; i < tokens; ++i) text += (i ? " t" : "t") + std::to_string(i);
  return text;
}

TEST(JobStream, EveryJobGetsOneResultAfterItsDeltasInOrder) {
  for (const bool deltas : {true, false}) {
    auto service = std::make_shared<FakeService>();
    const size_t count = 40;
    std::vector<StreamJob> jobs;
    for (size_t i = 0; i < count; ++i) jobs.push_back(job(i, int(i % 7)));
    JobStreamOptions options;
    options.concurrency = 5;
    options.deltas = deltas;
    JobStream stream(service, std::move(jobs), options);
    EXPECT_EQ(stream.size(), count);
    Consumer consumer(stream);
    const std::vector<JobLog> logs = by_job(consumer.items(), count);
    for (size_t i = 0; i < count; ++i) {
      const JobLog& log = logs[i];
      const int tokens = int(i % 7);
      ASSERT_EQ(log.finals.size(), 1u) << "job " << i;
      EXPECT_FALSE(log.delta_after_final) << "job " << i;
      EXPECT_FALSE(log.restarted()) << "job " << i;
      const FinishedRequest& f = log.finals[0];
      EXPECT_EQ(f.final.error, "") << "job " << i;
      EXPECT_EQ(f.text, fake_text(tokens)) << "job " << i;
      EXPECT_EQ(f.final.completion_tokens, tokens) << "job " << i;
      if (!deltas) {
        EXPECT_TRUE(log.deltas.empty()) << "job " << i;
        continue;
      }
      EXPECT_EQ(log.streamed_text(), f.text) << "job " << i;
      std::vector<int32_t> streamed;
      for (const StreamDelta& d : log.deltas) streamed.insert(streamed.end(), d.tokens.begin(), d.tokens.end());
      EXPECT_EQ(streamed, f.tokens) << "job " << i << ": the deltas' tokens in engine order";
    }
    std::lock_guard lock(service->mutex);
    std::multiset<std::string> prompts;
    for (const Request& r : service->requests) prompts.insert(r.prompt);
    ASSERT_EQ(prompts.size(), count) << "each job submitted once";
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(prompts.count("q" + std::to_string(i)), 1u);
  }
}

// A replica whose device is lost: every request it takes streams a word, then ends with an engine failure (on a
// thread of its own, as an engine would).
class FailingReplica final : public testing::ThreadedReplica {
 protected:
  std::function<void()> accept(int64_t, Request, RequestCallback callback) override {
    return [callback] { testing::fail_as_lost_device(callback); };
  }
};

TEST(JobStream, AnEngineFailureMidRequestRestartsTheJobAndItsRetryFinishesIt) {
  std::vector<std::unique_ptr<InferenceService>> engines;
  engines.push_back(std::make_unique<FailingReplica>());
  engines.push_back(std::make_unique<FakeService>());
  DataParallelService::Options routing;
  routing.work = [](const Request&) { return int64_t(0); };  // all ties: job 0 surely goes to the failing replica
  auto service = std::make_shared<DataParallelService>(std::move(engines), std::vector<std::string>{"cpu#0", "cpu#1"},
                                                       routing);
  const size_t count = 12;
  std::vector<StreamJob> jobs;
  for (size_t i = 0; i < count; ++i) jobs.push_back(job(i, 3));
  JobStreamOptions options;
  options.concurrency = 4;
  options.deltas = true;
  JobStream stream(service, std::move(jobs), options);
  Consumer consumer(stream);
  const std::vector<JobLog> logs = by_job(consumer.items(), count);
  for (size_t i = 0; i < count; ++i) {
    const JobLog& log = logs[i];
    ASSERT_EQ(log.finals.size(), 1u) << "job " << i;
    EXPECT_FALSE(log.delta_after_final) << "job " << i;
    const FinishedRequest& f = log.finals[0];
    EXPECT_EQ(f.final.error, "") << "job " << i << " was retried on the working replica";
    EXPECT_EQ(f.text, fake_text(3)) << "job " << i << ": only the retry's text";
    EXPECT_EQ(log.streamed_text(), f.text) << "job " << i << ": the failed engine's words are followed by a restart";
  }
  EXPECT_TRUE(logs[0].restarted()) << "job 0 went to the failing replica first";
  EXPECT_EQ(logs[0].deltas.front().text, "lost");
  EXPECT_TRUE(service->stats().engines[0].failed);
}

// Holds every request until the test opens it; from then on it finishes what it holds and what comes after at
// once. Tells the test how many requests it took.
class GateService final : public InferenceService {
 public:
  int64_t submit(Request, RequestCallback callback) override {
    std::unique_lock lock(mutex_);
    const int64_t id = ++submitted_;
    cv_.notify_all();
    if (!open_) {
      held_.push_back(std::move(callback));
      return id;
    }
    lock.unlock();
    finish(callback);
    return id;
  }
  void cancel(int64_t) override {}
  void drain() override {}
  EngineStats stats() const override { return {}; }
  std::string model_name() const override { return "gate"; }
  std::string token_text(int32_t) const override { return ""; }

  void wait_until_holding(size_t n) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return held_.size() >= n; });
  }
  int64_t submitted() {
    std::lock_guard lock(mutex_);
    return submitted_;
  }
  void open() {  // on the test's thread, as an engine thread would
    std::vector<RequestCallback> held;
    {
      std::lock_guard lock(mutex_);
      open_ = true;
      held.swap(held_);
    }
    for (auto& callback : held) finish(callback);
  }

 private:
  static void finish(const RequestCallback& callback) {
    RequestEvent ev;
    ev.finished = true;
    ev.finish_reason = "stop";
    callback(ev);
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
  int64_t submitted_ = 0;
  std::vector<RequestCallback> held_;
};

TEST(JobStream, CancelFinishesTheJobsNotYetStartedAndLetsTheOthersEnd) {
  auto service = std::make_shared<GateService>();
  const size_t count = 6;
  std::vector<StreamJob> jobs;
  for (size_t i = 0; i < count; ++i) jobs.push_back(job(i, 1));
  JobStreamOptions options;
  options.concurrency = 2;
  JobStream stream(service, std::move(jobs), options);
  Consumer consumer(stream);
  service->wait_until_holding(2);  // jobs 0 and 1 are in the engine; the pump waits for one to finish
  stream.cancel();
  service->open();
  const std::vector<JobLog> logs = by_job(consumer.items(), count);
  EXPECT_EQ(service->submitted(), 2) << "nothing reached the engine after the cancel";
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(logs[i].finals.size(), 1u) << "job " << i;
    const RequestEvent& final = logs[i].finals[0].final;
    if (i < 2) {
      EXPECT_EQ(final.finish_reason, "stop") << "job " << i << " was in flight: it runs to its end";
      EXPECT_EQ(final.error, "");
    } else {
      EXPECT_EQ(final.finish_reason, "error") << "job " << i;
      EXPECT_EQ(final.error, "cancelled") << "job " << i;
    }
  }
}

TEST(JobStream, AJobWithAnErrorOfItsOwnFailsAlone) {
  auto service = std::make_shared<FakeService>();
  std::vector<StreamJob> jobs;
  for (size_t i = 0; i < 4; ++i) jobs.push_back(job(i, 2));
  jobs[2].error = "cannot read image file missing.png";
  jobs[2].error_kind = ErrorKind::InvalidImage;
  JobStream stream(service, std::move(jobs), JobStreamOptions{});
  Consumer consumer(stream);
  const std::vector<JobLog> logs = by_job(consumer.items(), 4);
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(logs[i].finals.size(), 1u) << "job " << i;
    const RequestEvent& final = logs[i].finals[0].final;
    if (i == 2) {
      EXPECT_EQ(final.error, "cannot read image file missing.png");
      EXPECT_EQ(final.error_kind, ErrorKind::InvalidImage);
    } else {
      EXPECT_EQ(final.error, "") << "job " << i;
      EXPECT_EQ(logs[i].finals[0].text, fake_text(2)) << "job " << i;
    }
  }
  std::lock_guard lock(service->mutex);
  EXPECT_EQ(service->requests.size(), 3u) << "the failed job never reached the engine";
  for (const Request& r : service->requests) EXPECT_NE(r.prompt, "q2");
}

TEST(JobStream, ImageUrlsAreFetchedAheadAndOneThatFailsFailsOnlyItsJob) {
  const std::string image = "png bytes of a served image";
  http::ServerOptions server_options;
  server_options.port = 0;
  http::Server server(server_options, [&](http::Exchange& ex) {
    if (ex.request().path == "/img.png") ex.respond(200, "image/png", image);
    else ex.respond(404, "text/plain", "no");
  });
  server.start();
  const std::string good = "http://127.0.0.1:" + std::to_string(server.port()) + "/img.png";
  const std::string refused = "http://127.0.0.1:1/a.png";  // port 1: nobody listens, the connection is refused
  const std::string missing = "http://127.0.0.1:" + std::to_string(server.port()) + "/missing.png";
  const std::vector<std::vector<std::string>> urls = {
      {good}, {refused}, {"", good}, {good, missing}, {good, good}};  // per job, per image slot
  std::vector<StreamJob> jobs;
  for (size_t i = 0; i < urls.size(); ++i) {
    StreamJob j = job(i, 1);
    for (const std::string& url : urls[i]) {
      j.request.images.push_back({url.empty() ? "local bytes" : "", url.empty() ? "local.png" : url});
      j.urls.push_back(url);
    }
    jobs.push_back(std::move(j));
  }
  auto service = std::make_shared<FakeService>();
  JobStreamOptions options;
  options.fetch_retries = 0;
  options.prefetch = 2;
  JobStream stream(service, std::move(jobs), options);
  Consumer consumer(stream);
  const std::vector<JobLog> logs = by_job(consumer.items(), urls.size());
  server.stop();
  for (size_t i = 0; i < urls.size(); ++i) {
    ASSERT_EQ(logs[i].finals.size(), 1u) << "job " << i;
    const RequestEvent& final = logs[i].finals[0].final;
    if (i == 1 || i == 3) {
      EXPECT_EQ(final.error_kind, ErrorKind::InvalidImage) << "job " << i;
      EXPECT_NE(final.error.find(i == 1 ? "127.0.0.1:1/a.png" : "/missing.png"), std::string::npos) << final.error;
    } else {
      EXPECT_EQ(final.error, "") << "job " << i;
    }
  }
  std::lock_guard lock(service->mutex);
  std::map<std::string, std::vector<std::string>> images;  // prompt -> image bytes the engine got
  for (const Request& r : service->requests)
    for (const ImageInput& in : r.images) images[r.prompt].push_back(in.bytes);
  EXPECT_EQ(images.size(), 3u) << "jobs 1 and 3 never reached the engine";
  EXPECT_EQ(images["q0"], (std::vector<std::string>{image}));
  EXPECT_EQ(images["q2"], (std::vector<std::string>{"local bytes", image}));
  EXPECT_EQ(images["q4"], (std::vector<std::string>{image, image}));
}

}  // namespace
}  // namespace fovea

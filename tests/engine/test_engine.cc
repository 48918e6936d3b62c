// The Engine's threads, queue, cancellation, shutdown and error isolation, over the recording fake runner with
// the demo model's tokenizer, chat template and real image preprocessing.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "fovea/engine.h"
#include "engine/request_prep.h"
#include "engine_test_util.h"
#include "fake_runner.h"
#include "model/model_desc.h"
#include "tokenizer/tokenizer.h"

using namespace fovea;
using namespace fovea::test;

namespace {

// Blocks the fake runner's step() while closed, so tests can hold the scheduler thread at a known point.
class Gate {
 public:
  void pass() {
    std::unique_lock<std::mutex> lock(mutex_);
    ++blocked_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    --blocked_;
  }
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = false;
  }
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }
  bool wait_blocked() {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return blocked_ > 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = true;
  int blocked_ = 0;
};

class EngineFake : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = new DemoModelDir(); }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  std::unique_ptr<Engine> make_engine(EngineConfig config = {}, FakeRunnerConfig rc = {},
                                      std::shared_ptr<ThreadPool> prep_pool = nullptr) {
    rc.desc = load_model_desc(dir_->path());
    rc.poison_token = -1;
    rc.before_step = [this] { gate_.pass(); };
    config.model_dir = dir_->path();
    config.preprocess_threads = 2;
    auto runner = std::make_unique<FakeRunner>(rc);
    runner_ = runner.get();
    return std::make_unique<Engine>(config, std::move(runner), std::move(prep_pool));
  }

  static Request image_request(uint32_t seed, const std::string& question, int max_tokens = 1) {
    Request r;
    r.images.push_back(ImageInput{make_bmp(96, 48, seed), "seed " + std::to_string(seed)});
    r.prompt = question;
    r.max_tiles = 2;
    r.params.max_tokens = max_tokens;
    return r;
  }

  static DemoModelDir* dir_;
  Gate gate_;
  FakeRunner* runner_ = nullptr;
  Collector collector_;
};
DemoModelDir* EngineFake::dir_ = nullptr;

}  // namespace

TEST_F(EngineFake, ConcurrentSubmittersAllFinishAndBlocksReturnToZero) {
  auto engine = make_engine();
  constexpr int kThreads = 4, kPerThread = 5;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int n = t * kPerThread + i;
        engine->submit(image_request(uint32_t(n % 3), "Is there a bed?", 1 + n % 3),
                       collector_.callback_for(std::to_string(n)));
      }
    });
  for (auto& t : threads) t.join();
  engine->drain();
  for (int n = 0; n < kThreads * kPerThread; ++n) {
    const Collected c = collector_.get(std::to_string(n));
    EXPECT_EQ(c.finals, 1) << n;
    EXPECT_TRUE(c.last.error.empty()) << c.last.error;
    EXPECT_EQ(int(c.tokens.size()), 1 + n % 3);
    // n % 3 picks the image and the length: equal requests give equal outputs, whatever the batching and
    // caching did.
    EXPECT_EQ(c.tokens, collector_.get(std::to_string(n % 3)).tokens) << n;
  }
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.requests_submitted, kThreads * kPerThread);
  EXPECT_EQ(s.requests_finished, kThreads * kPerThread);
  EXPECT_EQ(s.requests_failed, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.queue_depth, 0);
  EXPECT_GT(s.prefix_cache_hit_tokens, 0);
  EXPECT_GT(s.prompt_tokens, 0);
}

TEST_F(EngineFake, CorruptImageFailsOnlyItsOwnRequest) {
  auto engine = make_engine();
  Request bad = image_request(1, "What is this?");
  bad.images[0].bytes = "this is not an image";
  bad.images[0].label = "broken.jpg";
  engine->submit(image_request(1, "What is this?"), collector_.callback_for("good1"));
  engine->submit(bad, collector_.callback_for("bad"));
  engine->submit(image_request(2, "What is this?"), collector_.callback_for("good2"));
  engine->drain();
  EXPECT_EQ(collector_.get("bad").last.finish_reason, "error");
  EXPECT_NE(collector_.get("bad").last.error.find("broken.jpg"), std::string::npos) << collector_.get("bad").last.error;
  EXPECT_EQ(collector_.get("good1").last.finish_reason, "length");
  EXPECT_EQ(collector_.get("good2").last.finish_reason, "length");
  EXPECT_EQ(engine->stats().requests_failed, 1);
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
}

TEST_F(EngineFake, AFailedDeviceFailsEverythingHeldAndRefusesMore) {
  auto engine = make_engine();
  engine->fail_after_steps(2);
  // The gate holds the first step until all four are submitted: otherwise the failure can come first and a late
  // submit is refused (as it should be), which is not what this test is about.
  gate_.close();
  for (int i = 0; i < 4; ++i)
    engine->submit(image_request(10 + i, "tell me a story", 30), collector_.callback_for("r" + std::to_string(i)));
  gate_.open();
  ASSERT_TRUE(collector_.wait_finals(4));
  for (int i = 0; i < 4; ++i) {
    const RequestEvent last = collector_.get("r" + std::to_string(i)).last;
    EXPECT_EQ(last.finish_reason, "error");
    EXPECT_NE(last.error.find("injected device failure"), std::string::npos) << last.error;
    EXPECT_EQ(last.error_kind, ErrorKind::EngineFailed);
  }
  try {
    engine->submit(image_request(1, "more"), collector_.callback_for("refused"));
    FAIL() << "a failed engine must refuse new requests";
  } catch (const EngineFailedError& e) {
    EXPECT_NE(std::string(e.what()).find("injected device failure"), std::string::npos) << e.what();
  }
  const EngineStats s = engine->stats();
  EXPECT_TRUE(s.failed);
  EXPECT_EQ(s.requests_failed, 4);
  engine->drain();
}

// Data-parallel engines share one preprocessing pool: while its one thread is busy neither engine prepares
// anything, once free both finish, and an engine destroyed while the pool works on for the other one leaves it
// intact (ASan would see a task touching the destroyed engine).
TEST_F(EngineFake, EnginesShareOnePreprocessingPool) {
  auto pool = std::make_shared<ThreadPool>(1);
  EngineConfig config;
  config.preprocess_threads = 1;
  auto a = make_engine(config, {}, pool);
  auto b = make_engine(config, {}, pool);
  Gate pool_gate;
  struct OpenOnExit {
    Gate& gate;
    ~OpenOnExit() { gate.open(); }  // a failed assertion must not leave the pool's thread (and the test) stuck
  } open_on_exit{pool_gate};
  pool_gate.close();
  pool->submit([&] { pool_gate.pass(); });
  ASSERT_TRUE(pool_gate.wait_blocked());
  for (int i = 0; i < 3; ++i) {
    a->submit(image_request(20 + i, "what is this?", 2), collector_.callback_for("a" + std::to_string(i)));
    b->submit(image_request(30 + i, "what is this?", 2), collector_.callback_for("b" + std::to_string(i)));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(a->stats().requests_finished + b->stats().requests_finished, 0) << "prepared without the pool's thread";
  pool_gate.open();
  ASSERT_TRUE(collector_.wait_finals(6));
  EXPECT_EQ(a->stats().requests_finished, 3);
  EXPECT_EQ(b->stats().requests_finished, 3);
  // Engine a goes away with requests still on the shared pool (cancelled at shutdown); b goes on with the pool.
  pool_gate.close();
  pool->submit([&] { pool_gate.pass(); });
  ASSERT_TRUE(pool_gate.wait_blocked());
  auto c = make_engine(config, {}, pool);
  c->submit(image_request(40, "what is this?", 2), collector_.callback_for("c0"));
  b->submit(image_request(41, "what is this?", 2), collector_.callback_for("b3"));
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    pool_gate.open();
  });
  c.reset();  // waits for its task on the pool, which runs once the gate opens
  release.join();
  EXPECT_EQ(collector_.get("c0").last.finish_reason, "cancelled");
  b->drain();
  EXPECT_EQ(collector_.get("b3").last.finish_reason, "length");
  EXPECT_EQ(b->stats().kv_blocks_used, 0);
}

// Every failure says whose fault it is (ErrorKind), which the server turns into 400 or 500 and an OpenAI code.
TEST_F(EngineFake, FailuresCarryTheirKind) {
  auto engine = make_engine();
  Request bad_image = image_request(1, "What is this?");
  bad_image.images[0].bytes = "this is not an image";
  Request bad_top_p = image_request(2, "What is this?");
  bad_top_p.params.top_p = 2.0f;
  Request too_long = image_request(3, "");
  for (int i = 0; i < 20000; ++i) too_long.prompt += "word ";
  Request too_many_answers = image_request(4, "What is this?");
  too_many_answers.params.answers.assign(1000, "yes");
  engine->submit(bad_image, collector_.callback_for("image"));
  engine->submit(bad_top_p, collector_.callback_for("top_p"));
  engine->submit(too_long, collector_.callback_for("long"));
  engine->submit(too_many_answers, collector_.callback_for("answers"));
  engine->submit(image_request(5, "What is this?"), collector_.callback_for("good"));
  engine->drain();
  const auto kind = [&](const std::string& name) { return collector_.get(name).last.error_kind; };
  EXPECT_EQ(kind("image"), ErrorKind::InvalidImage) << collector_.get("image").last.error;
  EXPECT_EQ(kind("top_p"), ErrorKind::InvalidRequest) << collector_.get("top_p").last.error;
  EXPECT_EQ(kind("long"), ErrorKind::ContextLength) << collector_.get("long").last.error;
  EXPECT_EQ(kind("answers"), ErrorKind::InvalidRequest) << collector_.get("answers").last.error;
  EXPECT_EQ(kind("good"), ErrorKind::None);
  EXPECT_EQ(collector_.get("good").last.finish_reason, "length");
  // What clients are told carries no source locations (FOVEA_CHECK's "file.cc:83: " is for logs).
  for (const char* name : {"image", "top_p", "long", "answers"}) {
    const std::string& error = collector_.get(name).last.error;
    EXPECT_EQ(error.find(".cc:"), std::string::npos) << name << ": " << error;
    EXPECT_EQ(error.find(".h:"), std::string::npos) << name << ": " << error;
  }
}

// A megabyte choice fails its request with a message of bounded size that still says what is wrong.
TEST_F(EngineFake, AnOverLongChoiceIsNotEchoedInFull) {
  auto engine = make_engine();
  Request request = image_request(1, "What is this?");
  request.params.choices = {"yes", std::string(1 << 20, 'x')};
  engine->submit(request, collector_.callback_for("long"));
  engine->drain();
  const RequestEvent& last = collector_.get("long").last;
  EXPECT_EQ(last.error_kind, ErrorKind::InvalidRequest) << last.error;
  EXPECT_LT(last.error.size(), 400u) << last.error.substr(0, 400);
  EXPECT_NE(last.error.find("tokens; at most"), std::string::npos) << last.error.substr(0, 400);
}

TEST_F(EngineFake, RepeatedImageIsAVisionCacheHit) {
  EngineConfig config;
  config.prefix_cache = false;
  auto engine = make_engine(config);
  engine->submit(image_request(5, "first question"), collector_.callback_for("a"));
  ASSERT_TRUE(collector_.wait_finals(1));
  engine->submit(image_request(5, "another question entirely"), collector_.callback_for("b"));
  engine->drain();
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.vision_cache_misses, 1);
  EXPECT_EQ(s.vision_cache_hits, 1);
  EXPECT_EQ(runner_->encodes.size(), 1u);
  EXPECT_EQ(s.prefix_cache_hit_tokens, 0);
}

TEST_F(EngineFake, CancelWhileRunningAndQueueLimit) {
  EngineConfig config;
  config.max_queue = 2;
  auto engine = make_engine(config);
  gate_.close();
  const int64_t long_id = engine->submit(image_request(3, "tell me a story", 50), collector_.callback_for("long"));
  ASSERT_TRUE(gate_.wait_blocked());
  // Inside its first step, the stats already show what the request holds (/metrics reads them).
  EXPECT_EQ(engine->stats().running, 1);
  EXPECT_GT(engine->stats().kv_blocks_used, 0);
  engine->submit(image_request(4, "short"), collector_.callback_for("short"));
  try {
    engine->submit(image_request(4, "one too many"), collector_.callback_for("refused"));
    FAIL() << "submit beyond max_queue should throw";
  } catch (const QueueFullError& e) {
    EXPECT_NE(std::string(e.what()).find("max_queue"), std::string::npos) << e.what();
  }
  engine->cancel(long_id);
  gate_.open();
  engine->drain();
  EXPECT_EQ(collector_.get("long").last.finish_reason, "cancelled");
  EXPECT_LT(collector_.get("long").tokens.size(), 50u);
  EXPECT_EQ(collector_.get("short").last.finish_reason, "length");
  EXPECT_EQ(collector_.get("refused").events, 0);
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  EXPECT_THROW(engine->submit(image_request(4, "after drain"), collector_.callback_for("late")), Error);
}

TEST_F(EngineFake, DestructionGivesEveryRequestOneFinalEvent) {
  constexpr int kRequests = 40;
  {
    auto engine = make_engine();
    for (int i = 0; i < kRequests; ++i)
      engine->submit(image_request(uint32_t(i), "q", 3), collector_.callback_for(std::to_string(i)));
  }
  for (int i = 0; i < kRequests; ++i) {
    const Collected c = collector_.get(std::to_string(i));
    EXPECT_EQ(c.finals, 1) << i;
    EXPECT_TRUE(c.last.finish_reason == "cancelled" || c.last.finish_reason == "length") << c.last.finish_reason;
  }
}

TEST_F(EngineFake, AnswersTextAndPromptLimit) {
  EngineConfig config;
  FakeRunnerConfig rc;
  rc.num_kv_blocks = 128;  // 512 positions of 4
  auto engine = make_engine(config, rc);
  Request r = image_request(7, "是或否？");
  r.params.answers = {"是", "否"};
  engine->submit(r, collector_.callback_for("answers"));
  Request text_only;
  text_only.prompt = "Write something.";
  text_only.params.max_tokens = 5;
  engine->submit(text_only, collector_.callback_for("text"));
  Request huge;
  for (int i = 0; i < 600; ++i) huge.prompt += "word ";
  engine->submit(huge, collector_.callback_for("huge"));
  engine->drain();
  const Collected answers = collector_.get("answers");
  ASSERT_EQ(answers.last.answer_logprobs.size(), 2u);
  EXPECT_TRUE(answers.last.answer_logprobs.count("是"));
  EXPECT_LT(answers.last.answer_logprobs.at("否"), 0.0f);
  EXPECT_GT(answers.last.prompt_tokens, 2 * 4);
  const Collected text = collector_.get("text");
  EXPECT_EQ(text.last.completion_tokens, int(text.tokens.size()));
  EXPECT_FALSE(text.text.empty());
  EXPECT_NE(collector_.get("huge").last.error.find("the pool holds 512"), std::string::npos)
      << collector_.get("huge").last.error;
}

// A prompt over the model's context fails with the context in its message before any image is decoded (the
// images here are not images at all) and, far over it, before the text is tokenized.
TEST_F(EngineFake, OverLongPromptFailsBeforeItsImagesAreDecoded) {
  ModelDesc desc = load_model_desc(dir_->path());
  desc.llm.max_position = 600;
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(dir_->path());
  PrepContext context;
  context.desc = &desc;
  context.tokenizer = tokenizer.get();
  context.max_token_bytes = longest_token_bytes(*tokenizer);
  ASSERT_GT(context.max_token_bytes, 0);
  auto error_of = [&](const Request& r) {
    try {
      prepare_request(1, r, context);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("prepared");
  };
  Request images;  // 3 images take at least 3 x 256 tokens
  for (int i = 0; i < 3; ++i) images.images.push_back(ImageInput{"not an image", "broken.png"});
  images.prompt = "What is this?";
  const std::string e1 = error_of(images);
  EXPECT_NE(e1.find("context length of 600"), std::string::npos) << e1;
  EXPECT_EQ(e1.find("broken"), std::string::npos) << e1;
  Request text;  // far over: refused on its bytes
  text.prompt.assign(size_t(2 * (context.max_token_bytes + 4)) * 700, 'a');
  const std::string e2 = error_of(text);
  EXPECT_NE(e2.find("at least"), std::string::npos) << e2;
  EXPECT_NE(e2.find("context length of 600"), std::string::npos) << e2;
}

TEST_F(EngineFake, ImageLimitFailsWithTheLimitInTheMessage) {
  EngineConfig config;
  config.max_image_pixels = 1000;
  auto engine = make_engine(config);
  engine->submit(image_request(1, "too big"), collector_.callback_for("big"));  // 96 x 48 = 4608 pixels
  engine->drain();
  const std::string error = collector_.get("big").last.error;
  EXPECT_NE(error.find("image #1"), std::string::npos) << error;
  EXPECT_NE(error.find("1000"), std::string::npos) << error;
}

TEST(ImageKey, SameBytesAndOptionsOnly) {
  PreprocessOptions official;
  PreprocessOptions compact = official;
  compact.compact = true;
  PreprocessOptions fewer_tiles = official;
  fewer_tiles.max_tiles = 6;
  const std::string a = make_bmp(20, 10, 1), b = make_bmp(20, 10, 2);
  EXPECT_EQ(image_key(a, official), image_key(std::string(a), official));
  EXPECT_NE(image_key(a, official), image_key(b, official));  // same size, other pixels
  EXPECT_NE(image_key(a, official), image_key(a, compact));
  EXPECT_NE(image_key(a, official), image_key(a, fewer_tiles));
  // Where the tiles get normalised does not change them: caches keyed by it stay valid across the switch.
  PreprocessOptions bytes_only = official;
  bytes_only.with_pixel_values = false;
  EXPECT_EQ(image_key(a, official), image_key(a, bytes_only));
}

namespace {
// A fake that takes tiles as bytes, as InternVLRunner does: records what it was given, then encodes a float
// stand-in (first byte as the signature) with the plain fake.
class ByteTileRunner final : public FakeRunner {
 public:
  using FakeRunner::FakeRunner;
  bool accepts_u8_tiles() const override { return true; }
  std::vector<int64_t> encode_images(const std::vector<Tensor>& pixel_values) override {
    std::vector<Tensor> stand_ins;
    for (const Tensor& t : pixel_values) {
      received.push_back(t);
      if (t.dtype != DType::U8) {
        stand_ins.push_back(t);
        continue;
      }
      Tensor f = Tensor::host(DType::F32, {t.dim(0), 3, t.dim(1), t.dim(2)});
      f.ptr<float>()[0] = float(t.ptr<uint8_t>()[0]);
      stand_ins.push_back(f);
    }
    return FakeRunner::encode_images(stand_ins);
  }
  std::vector<Tensor> received;
};
}  // namespace

TEST_F(EngineFake, RunnerThatTakesBytesGetsByteTilesUnlessCpuNormalizeIsAsked) {
  for (bool gpu_normalize : {true, false}) {
    FakeRunnerConfig rc;
    rc.desc = load_model_desc(dir_->path());
    rc.poison_token = -1;
    auto owned = std::make_unique<ByteTileRunner>(rc);
    ByteTileRunner* runner = owned.get();
    EngineConfig config;
    config.model_dir = dir_->path();
    config.gpu_normalize = gpu_normalize;
    Engine engine(config, std::move(owned));
    Collector collector;
    engine.submit(image_request(7, "Is there a bed?"), collector.callback_for("r"));
    engine.drain();
    ASSERT_TRUE(collector.get("r").last.error.empty()) << collector.get("r").last.error;
    ASSERT_EQ(runner->received.size(), 1u);
    const Tensor& tiles = runner->received[0];
    const int64_t S = runner->desc().vision.image_size;
    ASSERT_EQ(tiles.rank(), 4);
    if (gpu_normalize) {
      EXPECT_EQ(tiles.dtype, DType::U8);
      EXPECT_EQ(tiles.shape, (Shape{tiles.dim(0), S, S, 3}));
    } else {
      EXPECT_EQ(tiles.dtype, DType::F32);
      EXPECT_EQ(tiles.shape, (Shape{tiles.dim(0), 3, S, S}));
    }
  }
}

TEST_F(EngineFake, StopStringCutsTheTextAndEndsTheRequest) {
  auto engine = make_engine();
  Request free_run;
  free_run.prompt = "Say something long.";
  free_run.params.max_tokens = 12;
  engine->submit(free_run, collector_.callback_for("free"));
  ASSERT_TRUE(collector_.wait_finals(1));
  const std::string full = collector_.get("free").text;
  ASSERT_GE(full.size(), 6u) << "the fake's tokens decode to too little text to test with";
  // A stop string taken from the middle of the text: the output must end right before its first occurrence.
  const std::string stop = full.substr(full.size() / 2, 2);
  const std::string expected = full.substr(0, full.find(stop));
  Request stopped = free_run;
  stopped.params.stop = {stop};
  engine->submit(stopped, collector_.callback_for("stopped"));
  engine->drain();
  const Collected c = collector_.get("stopped");
  EXPECT_EQ(c.text, expected);
  EXPECT_EQ(c.last.finish_reason, "stop");
  EXPECT_LE(c.tokens.size(), collector_.get("free").tokens.size());
}

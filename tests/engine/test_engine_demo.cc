// The engine end to end on the REAL demo model (CPU backend): prefix caching must never change an answer, in
// particular for two different images of the same size behind the same prompt; a repeated image reuses KV.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "engine/engine.h"
#include "engine_test_util.h"

using namespace fovea;
using namespace fovea::test;

namespace {

struct Answer {
  std::vector<int32_t> tokens;
  std::map<std::string, float> answer_logprobs;
  std::string error;
};

Request make_request(const std::string& image_bytes) {
  Request r;
  r.images.push_back(ImageInput{image_bytes, "test image"});
  r.prompt = "图中有床吗？请回答是或否。";
  r.max_tiles = 2;  // a 2:1 image -> 2 tiles + thumbnail = 768 image tokens
  r.params.max_tokens = 4;
  r.params.answers = {"是", "否"};
  return r;
}

// Runs the requests one after another (so that each can reuse what the previous ones cached).
std::vector<Answer> run_in_order(Engine& engine, const std::vector<Request>& requests) {
  std::vector<Answer> answers;
  for (size_t i = 0; i < requests.size(); ++i) {
    Collector collector;
    engine.submit(requests[i], collector.callback_for("r"));
    EXPECT_TRUE(collector.wait_finals(1));
    const Collected c = collector.get("r");
    answers.push_back(Answer{c.tokens, c.last.answer_logprobs, c.last.error});
  }
  return answers;
}

EngineConfig demo_config(const std::string& dir, bool prefix_cache) {
  EngineConfig config;
  config.model_dir = dir;
  config.backend = "cpu";
  config.kv_blocks = 256;
  config.max_step_tokens = 1024;  // the 768-row image is cut across chunks in some steps
  config.preprocess_threads = 2;
  config.prefix_cache = prefix_cache;
  return config;
}

}  // namespace

TEST(EngineDemo, PrefixCacheNeverChangesAnswersForDifferentImagesOfTheSameSize) {
  DemoModelDir dir;
  const std::string image_a = make_bmp(96, 48, 1);
  const std::string image_b = make_bmp(96, 48, 2);  // same size, other pixels
  const std::vector<Request> requests{make_request(image_a), make_request(image_b), make_request(image_a)};

  Engine reference(demo_config(dir.path(), false));
  const std::vector<Answer> expected = run_in_order(reference, requests);
  Engine cached(demo_config(dir.path(), true));
  const std::vector<Answer> got = run_in_order(cached, requests);

  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(expected[i].error.empty()) << expected[i].error;
    ASSERT_TRUE(got[i].error.empty()) << got[i].error;
    EXPECT_EQ(got[i].tokens, expected[i].tokens) << "request " << i;
    ASSERT_EQ(got[i].answer_logprobs.size(), 2u);
    // The CPU reference gives bit-equal results here; a block of the wrong image shifts these by ~1e-2.
    for (const auto& [answer, logprob] : expected[i].answer_logprobs)
      EXPECT_NEAR(got[i].answer_logprobs.at(answer), logprob, 1e-5) << "request " << i << " answer " << answer;
  }
  // The images matter to the model: A and B do not answer alike (else this test could not catch a mix-up).
  EXPECT_GT(std::fabs(expected[0].answer_logprobs.at("是") - expected[1].answer_logprobs.at("是")), 1e-4);

  const EngineStats s = cached.stats();
  // The repeat of image A reused its image rows; B could only reuse the text before its image.
  EXPECT_GT(s.prefix_cache_hit_tokens, 768);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(reference.stats().prefix_cache_hit_tokens, 0);
  EXPECT_EQ(reference.stats().kv_blocks_used, 0);
}

TEST(EngineDemo, CorruptImageFailsAloneAndBlocksAreReturned) {
  DemoModelDir dir;
  Engine engine(demo_config(dir.path(), true));
  Collector collector;
  Request bad = make_request("GIF89a truncated");
  engine.submit(make_request(make_bmp(96, 48, 3)), collector.callback_for("good"));
  engine.submit(bad, collector.callback_for("bad"));
  Request text_only;
  text_only.prompt = "hello";
  text_only.params.max_tokens = 3;
  engine.submit(text_only, collector.callback_for("text"));
  engine.drain();
  EXPECT_EQ(collector.get("bad").last.finish_reason, "error");
  EXPECT_TRUE(collector.get("good").last.error.empty()) << collector.get("good").last.error;
  EXPECT_EQ(collector.get("good").tokens.size(), 4u);
  EXPECT_TRUE(collector.get("text").last.error.empty()) << collector.get("text").last.error;
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
  EXPECT_EQ(engine.stats().requests_failed, 1);
}

TEST(EngineDemo, FirstLogitsArgmaxIsTheFirstTokenAndAbsentUnlessAsked) {
  DemoModelDir dir;
  Engine engine(demo_config(dir.path(), true));
  Collector collector;
  Request asked = make_request(make_bmp(96, 48, 4));
  asked.params.answers.clear();
  asked.params.return_first_logits = true;
  Request plain = asked;
  plain.params.return_first_logits = false;
  engine.submit(asked, collector.callback_for("asked"));
  engine.submit(plain, collector.callback_for("plain"));
  engine.drain();
  const Collected a = collector.get("asked");
  const Collected p = collector.get("plain");
  ASSERT_TRUE(a.last.error.empty()) << a.last.error;
  ASSERT_TRUE(p.last.error.empty()) << p.last.error;
  EXPECT_TRUE(p.last.first_logits.empty());
  ASSERT_FALSE(a.tokens.empty());
  const std::vector<float>& logits = a.last.first_logits;
  ASSERT_GT(logits.size(), size_t(a.tokens[0]));
  const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
  EXPECT_EQ(best, a.tokens[0]);
  EXPECT_EQ(a.tokens, p.tokens);
}

// Tiles sent as bytes and normalised by the runner (the default) answer exactly as tiles normalised on the host:
// same tokens, bit-equal first logits and answer log-probs, for two images in one request.
TEST(EngineDemo, DeviceNormalisationGivesTheSameAnswersAsHostNormalisation) {
  DemoModelDir dir;
  Request request = make_request(make_bmp(96, 48, 5));
  request.images.push_back(ImageInput{make_bmp(40, 60, 6), "second"});
  request.prompt = "两张图一样吗？";
  request.params.return_first_logits = true;
  std::vector<Collected> results;
  for (bool gpu_normalize : {false, true}) {
    EngineConfig config = demo_config(dir.path(), true);
    config.gpu_normalize = gpu_normalize;
    Engine engine(config);
    Collector collector;
    engine.submit(request, collector.callback_for("r"));
    engine.drain();
    results.push_back(collector.get("r"));
    ASSERT_TRUE(results.back().last.error.empty()) << results.back().last.error;
  }
  const Collected& host = results[0];
  const Collected& device = results[1];
  EXPECT_EQ(device.tokens, host.tokens);
  ASSERT_FALSE(host.last.first_logits.empty());
  ASSERT_EQ(device.last.first_logits.size(), host.last.first_logits.size());
  EXPECT_EQ(std::memcmp(device.last.first_logits.data(), host.last.first_logits.data(),
                        host.last.first_logits.size() * sizeof(float)),
            0);
  EXPECT_EQ(device.last.answer_logprobs, host.last.answer_logprobs);
}

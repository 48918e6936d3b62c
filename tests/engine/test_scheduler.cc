// Scheduler + block manager + caches against the recording fake runner (no model, no GPU).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>

#include "scheduler_harness.h"

using namespace fovea;
using namespace fovea::test;


TEST(Scheduler, BatchedShortRequestsMatchRunsAloneAndFreeEveryBlock) {
  Harness h;
  std::vector<PromptSpec> specs;
  for (int i = 0; i < 6; ++i) specs.push_back({text(5 + i, 10 + i), {{float(i + 1), 1 + i % 3}}, text(7, 50)});
  for (int i = 0; i < 6; ++i) h.scheduler.add(make_request(i, specs[size_t(i)]));
  h.run();
  ASSERT_EQ(h.finals.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(h.finals[i].finish_reason, "length");
    EXPECT_EQ(h.finals[i].completion_tokens, 1);
    EXPECT_EQ(h.tokens[i], alone(specs[size_t(i)], 1)) << "request " << i;
  }
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  // max_tokens = 1: the whole batch went through in one prefill step, no decode step.
  EXPECT_EQ(h.runner.steps.size(), 1u);
  EXPECT_EQ(h.runner.encodes.size(), 1u);  // all six images in one batched ViT call
  EXPECT_EQ(h.runner.encodes[0].images, 6);
}

TEST(Scheduler, ChunkedPrefillRespectsTheBudgetIncludingVitTiles) {
  SchedulerConfig sc;
  sc.max_step_tokens = 24;
  sc.vit_tile_cost = 3;
  Harness h({}, sc);
  PromptSpec spec{text(9), {{5.0f, 3}, {6.0f, 2}}, text(30)};
  h.scheduler.add(make_request(1, spec, 1));
  h.scheduler.add(make_request(2, PromptSpec{text(40, 20), {}, {}}, 1));
  h.run();
  ASSERT_GT(h.runner.steps.size(), 3u);
  size_t encode_index = 0;
  for (const auto& step : h.runner.steps) {
    int vit_cost = 0;
    // The fake records encodes in order; a step's images are those referenced first in that step.
    std::set<int64_t> new_handles;
    for (const auto& c : step.chunks)
      for (const auto& v : c.vision)
        if (v.row_begin == 0) new_handles.insert(v.handle);
    for (size_t k = 0; k < new_handles.size() && encode_index < h.runner.encodes.size(); ++k)
      vit_cost += h.runner.encodes[encode_index++].tiles * 3;
    EXPECT_LE(step.total_tokens() + vit_cost, 24);
  }
  EXPECT_EQ(h.tokens[1], alone(spec, 1));
  EXPECT_EQ(h.tokens[2], alone(PromptSpec{text(40, 20), {}, {}}, 1));
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  EXPECT_EQ(h.runner.live_images(), 0 + h.scheduler.vision_cache().entries());
}

TEST(Scheduler, LongOutputDecodesEveryStepWhilePrefillsRun) {
  SchedulerConfig sc;
  sc.max_step_tokens = 16;
  Harness h({}, sc);
  PromptSpec long_spec{text(6), {}, {}};
  h.scheduler.add(make_request(100, long_spec, 12));
  for (int i = 0; i < 5; ++i) h.scheduler.add(make_request(i, PromptSpec{text(20, 30 + i), {}, {}}, 1));
  h.run();
  EXPECT_EQ(h.finals[100].completion_tokens, 12);
  EXPECT_EQ(h.finals[100].finish_reason, "length");
  EXPECT_EQ(h.tokens[100], alone(long_spec, 12));
  // From its first output on, request 100 got one decode token in every step until it finished.
  int decode_steps = 0;
  bool mixed = false;
  for (const auto& step : h.runner.steps) {
    bool has_decode = false, has_prefill = false;
    for (const auto& c : step.chunks) {
      if (c.tokens.size() == 1 && c.start_pos >= 6) has_decode = true;
      if (c.start_pos < 20 && c.tokens.size() > 1) has_prefill = true;
    }
    decode_steps += has_decode;
    mixed = mixed || (has_decode && has_prefill);
  }
  EXPECT_EQ(decode_steps, 11);
  EXPECT_TRUE(mixed) << "decode should share steps with prefill chunks";
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(Scheduler, OneTokenRequestsNeverGetDecodeSteps) {
  Harness h;
  h.scheduler.add(make_request(1, PromptSpec{text(10), {}, {}}, 1));
  h.run();
  ASSERT_EQ(h.runner.steps.size(), 1u);
  EXPECT_TRUE(h.runner.steps[0].chunks[0].sample);
  EXPECT_FALSE(h.runner.steps[0].chunks[0].want_logits);
  EXPECT_EQ(h.finals[1].prompt_tokens, 10);
}

TEST(Scheduler, PrefixCacheNeverSharesBlocksOfADifferentImage) {
  // Same prompt, two different images of the same size, then the first image again.
  const PromptSpec a{text(8), {{1.5f, 2}}, text(9, 70)};
  const PromptSpec b{text(8), {{2.5f, 2}}, text(9, 70)};
  Harness h;
  h.scheduler.add(make_request(1, a));
  h.run();
  h.scheduler.add(make_request(2, b));
  h.run();
  const int64_t hits_before_repeat = h.scheduler.counters().prefix_cache_hit_tokens;
  EXPECT_EQ(hits_before_repeat, 8);  // the two text-only blocks before the image, nothing of the image
  h.scheduler.add(make_request(3, a));
  h.run();
  EXPECT_EQ(h.tokens[1], alone(a, 1));
  EXPECT_EQ(h.tokens[2], alone(b, 1));
  EXPECT_EQ(h.tokens[3], h.tokens[1]);
  EXPECT_NE(h.tokens[1], h.tokens[2]);
  // Request 3 reused every full block but the last: 25 prompt tokens -> 6 blocks of 4 cached.
  EXPECT_EQ(h.scheduler.counters().prefix_cache_hit_tokens - hits_before_repeat, 24);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(Scheduler, RepeatedImageHitsTheVisionCache) {
  SchedulerConfig sc;
  sc.prefix_cache = false;
  Harness h({}, sc);
  const PromptSpec first{text(3), {{7.0f, 3}}, text(4)};
  const PromptSpec second{text(5, 40), {{7.0f, 3}}, text(2, 90)};  // same image, other text
  h.scheduler.add(make_request(1, first));
  h.run();
  h.scheduler.add(make_request(2, second));
  h.run();
  EXPECT_EQ(h.runner.encodes.size(), 1u);
  EXPECT_EQ(h.scheduler.counters().vision_cache_hits, 1);
  EXPECT_EQ(h.scheduler.counters().vision_cache_misses, 1);
  EXPECT_EQ(h.tokens[2], alone(second, 1));
}

TEST(Scheduler, SameImageTwiceInOneStepIsEncodedOnce) {
  Harness h;
  h.scheduler.add(make_request(1, PromptSpec{text(3), {{4.0f, 2}}, text(2)}));
  h.scheduler.add(make_request(2, PromptSpec{text(5, 60), {{4.0f, 2}}, text(3)}));
  h.run();
  ASSERT_EQ(h.runner.encodes.size(), 1u);
  EXPECT_EQ(h.runner.encodes[0].images, 1);
  EXPECT_EQ(h.scheduler.counters().vision_cache_hits, 1);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(Scheduler, CancelMidPrefillFreesEverything) {
  SchedulerConfig sc;
  sc.max_step_tokens = 8;
  Harness h({}, sc);
  h.scheduler.add(make_request(1, PromptSpec{text(4), {{3.0f, 4}}, text(10)}, 5));
  h.scheduler.add(make_request(2, PromptSpec{text(6), {}, {}}, 3));
  h.scheduler.step();
  h.scheduler.step();
  EXPECT_GT(h.scheduler.blocks().used_blocks(), 0);
  EXPECT_TRUE(h.scheduler.cancel(1));
  EXPECT_FALSE(h.scheduler.cancel(1));
  h.run();
  EXPECT_EQ(h.finals[1].finish_reason, "cancelled");
  EXPECT_EQ(h.finals[2].finish_reason, "length");
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  EXPECT_EQ(h.scheduler.vision_cache().held_tiles() - h.scheduler.vision_cache().unpinned_tiles(), 0);
}

TEST(Scheduler, FailedStepFailsItsRequestsOnlyAndTheEngineGoesOn) {
  Harness h;
  h.scheduler.add(make_request(1, PromptSpec{{10, FakeRunner::kPoisonToken, 11}, {}, {}}));
  h.run();
  EXPECT_EQ(h.finals[1].finish_reason, "error");
  EXPECT_NE(h.finals[1].error.find("poisoned token"), std::string::npos);
  h.scheduler.add(make_request(2, PromptSpec{text(5), {{FakeRunner::kPoisonPixel, 1}}, text(2)}));
  h.scheduler.add(make_request(3, PromptSpec{text(5), {}, {}}));
  h.run();
  EXPECT_EQ(h.finals[2].finish_reason, "error");
  EXPECT_NE(h.finals[2].error.find("image encoding failed"), std::string::npos);
  EXPECT_EQ(h.finals[3].finish_reason, "length");
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  EXPECT_EQ(h.runner.live_images(), h.scheduler.vision_cache().entries());
}

TEST(Scheduler, ADeviceErrorIsNotOneStepsFailureButTheEngines) {
  Harness h;
  h.scheduler.add(make_request(1, PromptSpec{text(5), {{FakeRunner::kDeviceLostPixel, 1}}, text(2)}));
  EXPECT_THROW(h.scheduler.step(), DeviceError);  // the engine (engine.cc) fails everything it holds
  h.scheduler.fail_all("engine failed: fake", ErrorKind::EngineFailed);
  EXPECT_EQ(h.finals[1].finish_reason, "error");
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(Scheduler, LimitsFailWithTheLimitInTheMessage) {
  FakeRunnerConfig rc;
  rc.num_kv_blocks = 8;  // 32 positions
  rc.max_step_tiles = 3;
  Harness h(rc);
  h.scheduler.add(make_request(1, PromptSpec{text(33), {}, {}}));
  h.scheduler.add(make_request(2, PromptSpec{text(10), {}, {}}, 24));  // 33 positions with its outputs
  h.scheduler.add(make_request(3, PromptSpec{text(1), {{1.0f, 4}}, {}}));
  PreparedRequest bad_top_p = make_request(4, PromptSpec{text(3), {}, {}});
  bad_top_p.params.top_p = 0.0f;
  h.scheduler.add(std::move(bad_top_p));
  h.scheduler.add(make_request(5, PromptSpec{text(10), {}, {}}, 23));  // exactly 32 positions: fits
  h.run();
  EXPECT_NE(h.finals[1].error.find("the pool holds 32"), std::string::npos) << h.finals[1].error;
  EXPECT_NE(h.finals[2].error.find("the pool holds 32"), std::string::npos);
  EXPECT_NE(h.finals[3].error.find("at most 3"), std::string::npos) << h.finals[3].error;
  EXPECT_NE(h.finals[4].error.find("top_p"), std::string::npos);
  EXPECT_EQ(h.finals[5].finish_reason, "length");
  EXPECT_EQ(h.finals[5].completion_tokens, 23);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(Scheduler, MaxPositionClampsTheOutput) {
  FakeRunnerConfig rc;
  rc.max_position = 12;
  Harness h(rc);
  h.scheduler.add(make_request(1, PromptSpec{text(10), {}, {}}, 50));
  h.scheduler.add(make_request(2, PromptSpec{text(13), {}, {}}, 1));
  h.run();
  EXPECT_EQ(h.finals[1].completion_tokens, 3);  // positions 10, 11 fed back; the 3rd token is never stored
  EXPECT_NE(h.finals[2].error.find("context length of 12"), std::string::npos);
}

TEST(Scheduler, KvPoolPressureQueuesInsteadOfFailing) {
  FakeRunnerConfig rc;
  rc.num_kv_blocks = 6;
  Harness h(rc);
  std::vector<PromptSpec> specs;
  for (int i = 0; i < 8; ++i) specs.push_back(PromptSpec{text(10, 15 + i), {}, {}});
  for (int i = 0; i < 8; ++i) h.scheduler.add(make_request(i, specs[size_t(i)], 4));
  h.run();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(h.finals[i].finish_reason, "length");
    EXPECT_EQ(h.tokens[i], alone(specs[size_t(i)], 4));
  }
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(Scheduler, StopTokensSeededSamplingAndAnswerLogprobs) {
  const PromptSpec spec{text(7), {}, {}};
  const std::vector<int32_t> greedy = alone(spec, 6);
  Harness h;
  PreparedRequest stop = make_request(1, spec, 6);
  stop.params.stop_token_ids = {greedy[2]};
  h.scheduler.add(std::move(stop));
  auto sampled = [&](int64_t id, uint64_t seed) {
    PreparedRequest r = make_request(id, spec, 8);
    r.params.temperature = 0.9f;
    r.params.top_p = 0.95f;
    r.params.seed = seed;
    r.params.top_logprobs = 2;
    return r;
  };
  h.scheduler.add(sampled(2, 11));
  h.scheduler.add(sampled(3, 11));
  h.scheduler.add(sampled(4, 12));
  PreparedRequest answers = make_request(5, spec, 1);
  answers.params.answers = {"yes", "no"};
  answers.answer_ids = {20, 23};
  h.scheduler.add(std::move(answers));
  h.run();
  EXPECT_EQ(h.finals[1].finish_reason, "stop");
  EXPECT_EQ(h.tokens[1], std::vector<int32_t>(greedy.begin(), greedy.begin() + 3));
  EXPECT_EQ(h.tokens[2], h.tokens[3]);
  EXPECT_NE(h.tokens[2], h.tokens[4]);
  EXPECT_EQ(h.tokens[2].size(), 8u);
  ASSERT_EQ(h.logprobs[2].size(), 8u);  // top_logprobs = 2: one entry per token, each with its 2 best
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(h.logprobs[2][i].token, h.tokens[2][i]);
    ASSERT_EQ(h.logprobs[2][i].top.size(), 2u);
    EXPECT_LE(h.logprobs[2][i].logprob, h.logprobs[2][i].top[0].second);
    EXPECT_LE(h.logprobs[2][i].top[1].second, h.logprobs[2][i].top[0].second);
  }
  EXPECT_TRUE(h.logprobs[1].empty());
  ASSERT_EQ(h.finals[5].answer_logprobs.size(), 2u);
  EXPECT_FLOAT_EQ(h.finals[5].answer_logprobs["yes"], -0.5f - 20 % 7);
  EXPECT_FLOAT_EQ(h.finals[5].answer_logprobs["no"], -0.5f - 23 % 7);
}

// Penalties are applied to the logits before the choice, greedy included: each token is the argmax of the raw
// log-probs (every one returned through top_logprobs) minus vLLM's frequency and presence penalties for what
// was generated before it; repetition scales the first token's raw logits for the prompt's tokens. Requests
// without a seed get a fresh one each.
TEST(Scheduler, PenaltiesSteerGreedyChoicesAndUnseededRequestsDiffer) {
  FakeRunnerConfig rc;
  rc.vocab = 400;
  const PromptSpec spec{text(7), {}, {}};
  Harness h(rc);
  PreparedRequest repeat = make_request(1, spec, 12);
  repeat.params.ignore_eos = true;
  repeat.params.frequency_penalty = -1.5f;  // negative: rewards repeating, so the penalty visibly steers
  repeat.params.presence_penalty = -0.5f;
  repeat.params.top_logprobs = rc.vocab;
  h.scheduler.add(std::move(repeat));
  PreparedRequest prompt_words = make_request(2, spec, 1);
  prompt_words.params.repetition_penalty = 0.5f;  // < 1: rewards the prompt's tokens (the fake's logits are > 0)
  prompt_words.params.return_first_logits = true;
  h.scheduler.add(std::move(prompt_words));
  for (int64_t id : {3, 4}) {
    PreparedRequest unseeded = make_request(id, spec, 8);
    unseeded.params.temperature = 1.0f;
    h.scheduler.add(std::move(unseeded));
  }
  h.run();

  ASSERT_EQ(h.logprobs[1].size(), 12u);
  std::map<int32_t, int> counts;
  int steered = 0;
  for (const TokenLogprob& step : h.logprobs[1]) {
    ASSERT_EQ(step.top.size(), size_t(rc.vocab));
    int32_t best = -1, raw_best = step.top[0].first;
    double best_value = -1e30;
    for (const auto& [id, logprob] : step.top) {
      const auto seen = counts.find(id);
      const double value = logprob + (seen == counts.end() ? 0.0 : 1.5 * seen->second + 0.5);
      if (value > best_value || (value == best_value && id < best)) best = id, best_value = value;
    }
    EXPECT_EQ(step.token, best);
    steered += step.token != raw_best;
    counts[step.token]++;
  }
  EXPECT_GT(steered, 0) << "the penalty never changed a choice: the test would not see it missing";

  const std::vector<float>& logits = h.finals[2].first_logits;
  ASSERT_EQ(logits.size(), size_t(rc.vocab));
  const std::set<int32_t> prompt(spec.head.begin(), spec.head.end());
  int32_t expected = 0;
  for (int32_t id = 0; id < rc.vocab; ++id) {
    const auto adjusted = [&](int32_t t) { return logits[size_t(t)] * (prompt.count(t) ? 2.0f : 1.0f); };
    if (adjusted(id) > adjusted(expected)) expected = id;
  }
  EXPECT_TRUE(prompt.count(expected));
  EXPECT_EQ(h.tokens[2], std::vector<int32_t>{expected});
  EXPECT_NE(h.tokens[3], h.tokens[4]);  // 8 draws from ~400 tokens: equal by chance with probability < 1e-18
}

TEST(Scheduler, ManyImagesUnderATightVisionPool) {
  FakeRunnerConfig rc;
  rc.vision_pool_tiles = 5;
  rc.max_step_tiles = 4;
  SchedulerConfig sc;
  sc.max_step_tokens = 20;
  Harness h(rc, sc);
  std::vector<PromptSpec> specs;
  for (int i = 0; i < 6; ++i)
    specs.push_back(PromptSpec{text(2 + i), {{10.0f + i, 1 + i % 4}, {20.0f + i, 2}}, text(3)});
  for (int i = 0; i < 6; ++i) h.scheduler.add(make_request(i, specs[size_t(i)], 2));
  h.run();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(h.tokens[i], alone(specs[size_t(i)], 2)) << i << " " << h.finals[i].error;
  for (const auto& e : h.runner.encodes) EXPECT_LE(e.tiles, 4);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(Scheduler, PrefixMatchEndingInsideAnImageFeedsTheRestOfItsRows) {
  SchedulerConfig sc;
  sc.vision_cache_tiles = 1;  // the 2-tile image is released as soon as it is unpinned: it must be re-encoded
  Harness h({}, sc);
  // Image rows at [3, 11); block 2 = [8, 12) holds image rows 5..7 and the first tail token, which differs.
  const PromptSpec first{text(3), {{8.0f, 2}}, {100, 101, 102, 103, 104}};
  const PromptSpec second{text(3), {{8.0f, 2}}, {200, 201, 202, 203, 204}};
  h.scheduler.add(make_request(1, first));
  h.run();
  h.scheduler.add(make_request(2, second));
  h.run();
  EXPECT_EQ(h.scheduler.counters().prefix_cache_hit_tokens, 8);
  ASSERT_EQ(h.runner.encodes.size(), 2u);
  const SeqChunk& resumed = h.runner.steps.back().chunks.at(0);
  EXPECT_EQ(resumed.start_pos, 8);
  ASSERT_EQ(resumed.vision.size(), 1u);
  EXPECT_EQ(resumed.vision[0].row_begin, 5);
  EXPECT_EQ(resumed.vision[0].rows, 3);
  EXPECT_EQ(h.tokens[2], alone(second, 1));
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(Scheduler, FirstLogitsOnlyWhenAskedAndOnlyForTheFirstToken) {
  const PromptSpec spec{text(9), {}, {}};
  Harness h;
  PreparedRequest asked = make_request(1, spec, 4);
  asked.params.return_first_logits = true;
  h.scheduler.add(std::move(asked));
  h.scheduler.add(make_request(2, spec, 4));
  h.run();
  // The runner was asked for logits exactly once: request 1's first sampled position (prompt end, start_pos 0).
  int logits_chunks = 0;
  for (const auto& step : h.runner.steps)
    for (const auto& c : step.chunks)
      if (c.want_logits) {
        ++logits_chunks;
        EXPECT_EQ(c.start_pos + int(c.tokens.size()), 9) << "logits asked past the first token";
      }
  EXPECT_EQ(logits_chunks, 1);
  ASSERT_EQ(h.finals[1].first_logits.size(), 1000u);  // the fake's vocab
  EXPECT_TRUE(h.finals[2].first_logits.empty());
  EXPECT_EQ(h.tokens[1], h.tokens[2]) << "asking for logits must not change greedy output";
  // The fake's logits are a hash of the last KV row: the same prompt gives the same row, any other does not.
  Harness other;
  PreparedRequest again = make_request(3, spec, 1);
  again.params.return_first_logits = true;
  other.scheduler.add(std::move(again));
  PreparedRequest different = make_request(4, PromptSpec{text(9, 50), {}, {}}, 1);
  different.params.return_first_logits = true;
  other.scheduler.add(std::move(different));
  other.run();
  EXPECT_EQ(other.finals[3].first_logits, h.finals[1].first_logits);
  EXPECT_NE(other.finals[4].first_logits, h.finals[1].first_logits);
}

TEST(Scheduler, IgnoreEosGeneratesMaxTokens) {
  // A model whose EOS is the third greedy token: a plain request stops there, an ignore_eos one (benchmarks'
  // fixed-length outputs) runs to max_tokens; stop_token_ids still stop it.
  const PromptSpec spec{text(7), {}, {}};
  const std::vector<int32_t> greedy = alone(spec, 6);
  FakeRunnerConfig rc;
  ModelDesc desc = FakeRunner().desc();
  desc.eos_ids = {greedy[2]};
  rc.desc = desc;
  Harness h(rc);
  h.scheduler.add(make_request(1, spec, 6));
  PreparedRequest ignoring = make_request(2, spec, 6);
  ignoring.params.ignore_eos = true;
  h.scheduler.add(std::move(ignoring));
  PreparedRequest stopping = make_request(3, spec, 6);
  stopping.params.ignore_eos = true;
  stopping.params.stop_token_ids = {greedy[3]};
  h.scheduler.add(std::move(stopping));
  h.run();
  EXPECT_EQ(h.finals[1].finish_reason, "stop");
  EXPECT_EQ(h.tokens[1], std::vector<int32_t>(greedy.begin(), greedy.begin() + 3));
  EXPECT_EQ(h.finals[2].finish_reason, "length");
  EXPECT_EQ(h.tokens[2], greedy);
  EXPECT_EQ(h.finals[3].finish_reason, "stop");
  EXPECT_EQ(h.tokens[3], std::vector<int32_t>(greedy.begin(), greedy.begin() + 4));
}

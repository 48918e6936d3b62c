// In-flight prefix sharing and prefix-aware admission, against the recording fake runner: questions about one
// image compute its prefix once whatever the arrival order, an owner that fails or is cancelled mid-prefill
// strands nobody, and no KV block, pending mark or image pin outlives its requests.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "scheduler_harness.h"

using namespace fovea;
using namespace fovea::test;

namespace {

constexpr int kBlock = 4;  // the fake's default block size

// Question k about image `signature`: 8 text tokens + 3 tiles (12 rows) = 20 shared tokens = 5 full blocks,
// then 5 question tokens of its own.
PromptSpec question(float signature, int k) { return PromptSpec{text(8), {{signature, 3}}, text(5, 100 + 13 * k)}; }
constexpr int kShared = 20;
constexpr int kPrompt = 25;

void expect_nothing_held(const Harness& h) {
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  EXPECT_EQ(h.scheduler.blocks().pending_blocks(), 0);
  EXPECT_EQ(h.scheduler.vision_cache().held_tiles() - h.scheduler.vision_cache().unpinned_tiles(), 0);
  EXPECT_EQ(h.runner.live_images(), h.scheduler.vision_cache().entries());
}

// K questions on one image, all queued at once, through steps of `step_tokens` (chunked prefill when small).
// When the owner's chunks use every step's whole budget the others are not even looked at before its prefix
// is published (all_wait false): they then match it as a cached prefix, and nothing is computed twice either way.
void k_questions_compute_the_prefix_once(int k, int step_tokens, int max_tokens, bool all_wait) {
  SchedulerConfig sc;
  sc.max_step_tokens = step_tokens;
  Harness h({}, sc);
  for (int q = 0; q < k; ++q) h.scheduler.add(make_request(q, question(5.0f, q), max_tokens));
  h.run();
  const SchedulerCounters& c = h.scheduler.counters();
  // The first question computes the whole prompt, every other one only its own 5 tokens.
  EXPECT_EQ(c.prefill_tokens, kPrompt + (k - 1) * (kPrompt - kShared));
  EXPECT_EQ(c.prefix_cache_hit_tokens, (k - 1) * kShared);
  if (all_wait) EXPECT_EQ(c.inflight_prefix_waits, k - 1);
  EXPECT_EQ(c.inflight_prefix_hit_tokens, c.inflight_prefix_waits * kShared);
  EXPECT_EQ(c.vision_cache_misses, 1);
  ASSERT_EQ(int(h.finals.size()), k);
  for (int q = 0; q < k; ++q) {
    EXPECT_EQ(h.finals[q].finish_reason, "length") << h.finals[q].error;
    EXPECT_EQ(h.tokens[q], alone(question(5.0f, q), max_tokens)) << "question " << q;
  }
  expect_nothing_held(h);
}

}  // namespace

TEST(PrefixSharing, ConcurrentQuestionsOnOneImageComputeItsPrefixOnceInOneStep) {
  k_questions_compute_the_prefix_once(6, 1 << 16, 1, true);
  k_questions_compute_the_prefix_once(6, 1 << 16, 4, true);
}

TEST(PrefixSharing, WaitersFollowAnOwnerThroughChunkedPrefill) {
  k_questions_compute_the_prefix_once(5, 7, 3, false);  // the owner's prefix takes several steps
  k_questions_compute_the_prefix_once(16, 9, 1, false);
  k_questions_compute_the_prefix_once(8, 30, 2, true);  // its last prefix chunk leaves room: the others wait
}

TEST(PrefixSharing, WithThePrefixCacheOffNothingWaitsAndOutputsAgree) {
  SchedulerConfig sc;
  sc.prefix_cache = false;
  Harness h({}, sc);
  for (int q = 0; q < 4; ++q) h.scheduler.add(make_request(q, question(5.0f, q), 2));
  h.run();
  EXPECT_EQ(h.scheduler.counters().prefill_tokens, 4 * kPrompt);
  EXPECT_EQ(h.scheduler.counters().inflight_prefix_waits, 0);
  for (int q = 0; q < 4; ++q) EXPECT_EQ(h.tokens[q], alone(question(5.0f, q), 2));
  expect_nothing_held(h);
}

TEST(PrefixSharing, OwnerCancelledMidPrefillLeavesItsWaitersToComputeTheRest) {
  SchedulerConfig sc;
  sc.max_step_tokens = 8;
  Harness h({}, sc);
  for (int q = 0; q < 4; ++q) h.scheduler.add(make_request(q, question(6.0f, q), 3));
  h.scheduler.step();
  h.scheduler.step();
  ASSERT_GT(h.scheduler.blocks().pending_blocks(), 0);  // the owner is mid-prefix, the others wait
  EXPECT_EQ(h.scheduler.running(), 1);
  const int64_t computed_by_owner = h.scheduler.counters().prefill_tokens;
  EXPECT_LT(computed_by_owner, kShared);
  EXPECT_TRUE(h.scheduler.cancel(0));
  h.run(200);
  EXPECT_EQ(h.finals[0].finish_reason, "cancelled");
  for (int q = 1; q < 4; ++q) {
    EXPECT_EQ(h.finals[q].finish_reason, "length") << h.finals[q].error;
    EXPECT_EQ(h.tokens[q], alone(question(6.0f, q), 3)) << "question " << q;
  }
  // The owner's published blocks are reused; the next question computed the rest of the prefix once.
  const int published_by_owner = int(computed_by_owner / kBlock) * kBlock;
  EXPECT_EQ(h.scheduler.counters().prefill_tokens,
            computed_by_owner + (kPrompt - published_by_owner) + 2 * (kPrompt - kShared));
  expect_nothing_held(h);
}

TEST(PrefixSharing, OwnerFailedMidPrefillLeavesItsWaitersToComputeTheRest) {
  FakeRunnerConfig rc;
  int steps = 0;
  rc.before_step = [&steps] {
    if (++steps == 2) throw std::runtime_error("device fault");  // the owner is alone in step 2
  };
  SchedulerConfig sc;
  sc.max_step_tokens = 8;
  Harness h(rc, sc);
  for (int q = 0; q < 3; ++q) h.scheduler.add(make_request(q, question(7.0f, q), 2));
  h.run(200);
  EXPECT_EQ(h.finals[0].finish_reason, "error");
  EXPECT_NE(h.finals[0].error.find("device fault"), std::string::npos);
  for (int q = 1; q < 3; ++q) {
    EXPECT_EQ(h.finals[q].finish_reason, "length") << h.finals[q].error;
    EXPECT_EQ(h.tokens[q], alone(question(7.0f, q), 2)) << "question " << q;
  }
  expect_nothing_held(h);
}

TEST(PrefixSharing, ScatteredQuestionsAreGroupedByImage) {
  // Question-major input (all first questions, then all second ones, ...) over three images, small steps.
  SchedulerConfig sc;
  sc.max_step_tokens = 16;
  Harness h({}, sc);
  const float images[3] = {11.0f, 12.0f, 13.0f};
  int64_t id = 0;
  for (int q = 0; q < 4; ++q)
    for (const float image : images) h.scheduler.add(make_request(id++, question(image, q), 1));
  h.run();
  // Each image's prefix once (the 8 text tokens before the image once for all), each question's own text.
  EXPECT_EQ(h.scheduler.counters().prefill_tokens, kShared + 2 * (kShared - 8) + 12 * (kPrompt - kShared));
  EXPECT_EQ(h.scheduler.counters().vision_cache_misses, 3);
  for (int64_t r = 0; r < id; ++r) EXPECT_EQ(h.tokens[r], alone(question(images[r % 3], int(r / 3)), 1));
  expect_nothing_held(h);
}

TEST(PrefixSharing, CachedQuestionsGoFirstButAgingKeepsTheRestMoving) {
  SchedulerConfig sc;
  sc.max_batch_seqs = 1;  // one request at a time: the admission order is the order of the steps
  sc.aging_steps = 3;
  Harness h({}, sc);
  h.scheduler.add(make_request(0, question(21.0f, 0), 1));
  h.run();  // image 21's prefix is now cached
  h.scheduler.add(make_request(1, question(22.0f, 0), 1));  // nothing cached, arrived first
  for (int q = 1; q <= 8; ++q) h.scheduler.add(make_request(1 + q, question(21.0f, q), 1));
  const size_t before = h.runner.steps.size();
  h.run();
  // The step in which each request ran (max_tokens 1: one step each).
  std::map<int64_t, size_t> step_of;
  for (size_t s = before; s < h.runner.steps.size(); ++s) {
    ASSERT_EQ(h.runner.steps[s].chunks.size(), 1u);
    const SeqChunk& c = h.runner.steps[s].chunks[0];
    for (int64_t r = 1; r <= 9; ++r) {
      const PreparedRequest p = make_request(r, r == 1 ? question(22.0f, 0) : question(21.0f, int(r - 1)));
      if (c.tokens.back() == p.prompt.back() && c.start_pos + int(c.tokens.size()) == int(p.prompt.size()))
        step_of[r] = s - before;
    }
  }
  ASSERT_EQ(step_of.size(), 9u);
  EXPECT_EQ(step_of[2], 0u);  // a cached question overtook the uncached one...
  EXPECT_GT(step_of[1], 0u);
  EXPECT_LE(step_of[1], 4u);  // ...but only until it had waited aging_steps
  for (int64_t r = 1; r <= 9; ++r) EXPECT_EQ(h.finals[r].finish_reason, "length");
  expect_nothing_held(h);
}

TEST(PrefixSharing, NoBlockLeaksAfterAnyMixOfSuccessFailureAndCancellation) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    std::mt19937 rng(seed);
    SchedulerConfig sc;
    sc.max_step_tokens = 6 + int(rng() % 20);
    FakeRunnerConfig rc;
    rc.num_kv_blocks = 40;
    int steps = 0;
    const int failing_step = 2 + int(rng() % 6);
    rc.before_step = [&steps, failing_step] {
      if (++steps == failing_step) throw std::runtime_error("device fault");
    };
    Harness h(rc, sc);
    const int n = 12 + int(rng() % 10);
    std::vector<PromptSpec> specs;
    for (int r = 0; r < n; ++r) {
      PromptSpec spec = question(30.0f + float(rng() % 3), r);
      if (rng() % 8 == 0) spec.tail.back() = FakeRunner::kPoisonToken;  // fails its own step
      specs.push_back(spec);
      h.scheduler.add(make_request(r, spec, 1 + int(rng() % 4)));
    }
    for (int s = 0; s < 500 && h.scheduler.has_work(); ++s) {
      if (rng() % 3 == 0) h.scheduler.cancel(int64_t(rng() % uint32_t(n)));
      h.scheduler.step();
    }
    ASSERT_FALSE(h.scheduler.has_work()) << "seed " << seed;
    ASSERT_EQ(int(h.finals.size()), n) << "seed " << seed;
    for (int r = 0; r < n; ++r) {
      if (h.finals[r].finish_reason == "length")
        EXPECT_EQ(h.tokens[r], alone(specs[size_t(r)], h.finals[r].completion_tokens)) << "seed " << seed;
    }
    expect_nothing_held(h);
  }
}

// Choices against the recording fake runner (its answer log-prob of token id t is -0.5 - t % 7 whatever the
// context): one scoring sequence per distinct context, the prompt's KV computed once, totals summed over every
// token of a choice, and a failing or cancelled scoring sequence ending the request once with nothing held.
#include <gtest/gtest.h>

#include "scheduler_harness.h"

using namespace fovea;
using namespace fovea::test;

namespace {

float fake_logprob(int32_t id) { return -0.5f - float(id % 7); }

PreparedRequest choice_request(int64_t id, std::vector<std::vector<int32_t>> choices) {
  PreparedRequest r = make_request(id, PromptSpec{text(8), {{3.0f, 3}}, text(5, 200)}, 5);  // 25 tokens
  for (size_t c = 0; c < choices.size(); ++c) r.params.choices.push_back("choice " + std::to_string(c));
  r.choice_ids = std::move(choices);
  return r;
}

}  // namespace

TEST(Choices, EveryTokenOfEveryChoiceIsScoredAndThePromptComputedOnce) {
  Harness h;
  // Contexts: the prompt (next: 100, 101), prompt + 101 (next: 102), prompt + 100 (next: 103).
  h.scheduler.add(choice_request(1, {{100}, {101, 102}, {100, 103}}));
  h.run();
  const RequestEvent& e = h.finals[1];
  ASSERT_EQ(e.finish_reason, "stop") << e.error;
  const std::vector<float> expected{fake_logprob(100), fake_logprob(101) + fake_logprob(102),
                                    fake_logprob(100) + fake_logprob(103)};
  ASSERT_EQ(e.choice_logprobs.size(), 3u);
  for (size_t c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(e.choice_logprobs[c], expected[c]);
  EXPECT_EQ(h.text_out[1], "choice 0");  // the choice's own text, not a detokenisation
  EXPECT_EQ(h.tokens[1], (std::vector<int32_t>{100}));
  EXPECT_EQ(e.completion_tokens, 1);
  EXPECT_EQ(e.prompt_tokens, 25);
  // Three scoring chunks, each asking for its context's next tokens.
  std::multiset<std::vector<int32_t>> asked;
  for (const RecordedStep& step : h.runner.steps)
    for (const SeqChunk& c : step.chunks)
      if (c.sample) asked.insert(c.answer_ids);
  EXPECT_EQ(asked, (std::multiset<std::vector<int32_t>>{{100, 101}, {102}, {103}}));
  // The prompt once (25), then the two one-token contexts recompute only past the 6 shared blocks.
  EXPECT_EQ(h.scheduler.counters().prefill_tokens, 25 + 2 * 2);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(Choices, TheBestChoiceIsTheAnswer) {
  Harness h;
  // Totals: 104: -6.5; 105 then 98: -0.5 - 0.5 = -1; 107: -2.5. The two-token choice wins.
  h.scheduler.add(choice_request(1, {{104}, {105, 98}, {107}}));
  h.run();
  ASSERT_EQ(h.finals[1].finish_reason, "stop") << h.finals[1].error;
  EXPECT_EQ(h.tokens[1], (std::vector<int32_t>{105, 98}));
  EXPECT_EQ(h.text_out[1], "choice 1");
  EXPECT_EQ(h.finals[1].completion_tokens, 2);
}

TEST(Choices, AFailingScoringSequenceFailsTheRequestOnceAndFreesEverything) {
  Harness h;
  h.scheduler.add(choice_request(1, {{100}, {101, FakeRunner::kPoisonToken, 9}, {102, 103, 104}}));
  h.scheduler.add(make_request(2, PromptSpec{text(6), {}, {}}, 2));
  h.run();
  EXPECT_EQ(h.finals[1].finish_reason, "error");
  EXPECT_NE(h.finals[1].error.find("poisoned token"), std::string::npos);
  EXPECT_TRUE(h.finals[1].choice_logprobs.empty());
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  EXPECT_EQ(h.scheduler.blocks().pending_blocks(), 0);
}

TEST(Choices, CancelledMidScoringEndsOnceWithNothingHeld) {
  SchedulerConfig sc;
  sc.max_step_tokens = 8;
  Harness h({}, sc);
  h.scheduler.add(choice_request(1, {{100, 101, 102}, {103, 104}}));
  h.scheduler.step();
  h.scheduler.step();
  EXPECT_TRUE(h.scheduler.cancel(1));
  EXPECT_FALSE(h.scheduler.cancel(1));
  h.run();
  EXPECT_EQ(h.finals[1].finish_reason, "cancelled");
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  EXPECT_EQ(h.scheduler.vision_cache().held_tiles() - h.scheduler.vision_cache().unpinned_tiles(), 0);
}

TEST(Choices, ChoicesThatCannotFitFailWithTheLimit) {
  FakeRunnerConfig rc;
  rc.max_position = 27;
  Harness h(rc);
  h.scheduler.add(choice_request(1, {{100}, {101, 102, 103, 104}}));  // 25 + 3 context tokens > 27
  h.run();
  EXPECT_EQ(h.finals[1].finish_reason, "error");
  EXPECT_NE(h.finals[1].error.find("max_position"), std::string::npos) << h.finals[1].error;
}

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "engine/sampler.h"

using namespace fovea;

TEST(Sampler, GreedyTakesLowestIndexOfMax) {
  Rng rng(1);
  EXPECT_EQ(sample_token({0.f, 3.f, 1.f, 3.f}, {}, rng), 1);
}

TEST(Sampler, SameSeedSameTokensAndSeedsDiffer) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(std::sin(double(i)));
  auto run = [&](uint64_t seed) {
    Rng rng(seed);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(sample_token(logits, {1.0f, 1.0f}, rng));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, TopPKeepsOnlyTheNucleus) {
  // probs ~ [0.6, 0.3, 0.1 spread]: top_p 0.8 keeps ids 0 and 1 only.
  std::vector<float> logits = {std::log(0.6f), std::log(0.3f), std::log(0.05f), std::log(0.05f)};
  Rng rng(7);
  std::map<int32_t, int> counts;
  for (int i = 0; i < 2000; ++i) counts[sample_token(logits, {1.0f, 0.8f}, rng)]++;
  EXPECT_EQ(counts.count(2) + counts.count(3), 0u);
  EXPECT_NEAR(counts[0] / 2000.0, 2.0 / 3.0, 0.05);
}

TEST(Sampler, TemperatureFollowsTheDistribution) {
  std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = [0.25, 0.75]
  Rng rng(3);
  int ones = 0;
  for (int i = 0; i < 4000; ++i) ones += sample_token(logits, {1.0f, 1.0f}, rng);
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

TEST(Sampler, Logprobs) {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(token_logprob(logits, 0), 1.0 - lse, 1e-6);
  auto top = top_logprobs(logits, 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].first, 2);
  EXPECT_EQ(top[1].first, 1);
  EXPECT_NEAR(top[1].second, 2.0 - lse, 1e-6);
}

TEST(StopMatcher, HoldsBackPartialMatchesAndCutsAtTheStop) {
  StopMatcher m({"END", "xyz"});
  EXPECT_EQ(m.push("hello E"), "hello ");
  EXPECT_EQ(m.push("N"), "");
  EXPECT_EQ(m.push("Dafter"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("EN"), "");
  EXPECT_EQ(m.push("x"), "ENx");
  EXPECT_EQ(m.push("E"), "");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.flush(), "E");
}

TEST(StopMatcher, EarliestStopWins) {
  StopMatcher m({"bc", "ab"});
  EXPECT_EQ(m.push("zabc"), "z");
  EXPECT_TRUE(m.stopped());
}

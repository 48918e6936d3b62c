// Sampled tokens follow the requested distribution: many draws from fixed logits are compared, by a chi-square
// test, with the distribution computed here from vLLM's definitions (softmax at the temperature, min_p relative
// to the best token, top_k, then top_p as vLLM masks it: ascending cumulative mass <= 1 - top_p is dropped).
// Seeds are fixed, so a verdict never changes between runs; a correct sampler fails a case with probability
// below 1e-6 for a random seed, and a wrong filter order or off-by-one drops or adds a token, which the exact
// support check catches at once. The cases are chosen so that every wrong order of the filters gives another
// support (checked below too).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/sampler.h"

using namespace fovea;

namespace {

// P(X >= x) for a chi-square variable with `df` degrees of freedom: the regularised upper incomplete gamma
// Q(df/2, x/2), by its series (lower part) for x < a + 1 and its continued fraction otherwise (Numerical
// Recipes' split; both converge fast there).
double chi_square_p_value(double x, int df) {
  const double a = df / 2.0, z = x / 2.0;
  if (z <= 0.0) return 1.0;
  const double log_prefactor = a * std::log(z) - z - std::lgamma(a);
  if (z < a + 1.0) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 1000 && term > sum * 1e-16; ++n) sum += term *= z / (a + n);
    return 1.0 - sum * std::exp(log_prefactor);
  }
  double b = z + 1.0 - a, c = 1e300, d = 1.0 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    d = std::fabs(d) < 1e-300 ? 1e-300 : d;
    c = b + an / c;
    c = std::fabs(c) < 1e-300 ? 1e-300 : c;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(log_prefactor) * h;
}

// The distribution vLLM samples from, computed in long double from the definitions, step by step on a
// probability vector (zero = removed) rather than on index lists as the sampler does.
std::vector<long double> reference(const std::vector<float>& logits, const SamplingParams& p) {
  const size_t n = logits.size();
  std::vector<long double> probs(n);
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  for (size_t i = 0; i < n; ++i) probs[i] = std::exp((long double)(logits[i] - max_logit) / p.temperature);
  const auto normalise = [&] {
    const long double total = std::accumulate(probs.begin(), probs.end(), 0.0L);
    for (auto& q : probs) q /= total;
  };
  normalise();
  const long double best = *std::max_element(probs.begin(), probs.end());
  for (auto& q : probs)
    if (q < p.min_p * best) q = 0;
  normalise();
  if (p.top_k > 0) {  // the k-th largest probability is the threshold (the cases have no ties)
    std::vector<long double> sorted = probs;
    std::sort(sorted.rbegin(), sorted.rend());
    if (size_t(p.top_k) < n)
      for (auto& q : probs)
        if (q < sorted[size_t(p.top_k) - 1]) q = 0;
    normalise();
  }
  // vLLM: sort ascending, drop every token whose cumulative mass (itself included) is <= 1 - top_p.
  std::vector<size_t> ascending(n);
  std::iota(ascending.begin(), ascending.end(), 0);
  std::sort(ascending.begin(), ascending.end(), [&](size_t a, size_t b) { return probs[a] < probs[b]; });
  long double cumulative = 0;
  std::vector<bool> drop(n, false);
  for (size_t i : ascending) {
    cumulative += probs[i];
    drop[i] = cumulative <= 1.0L - p.top_p;
  }
  drop[ascending.back()] = false;  // vLLM always keeps the most likely token
  for (size_t i = 0; i < n; ++i)
    if (drop[i]) probs[i] = 0;
  normalise();
  return probs;
}

std::vector<int> support(const std::vector<long double>& probs) {
  std::vector<int> ids;
  for (size_t i = 0; i < probs.size(); ++i)
    if (probs[i] > 0) ids.push_back(int(i));
  return ids;
}

// Twelve tokens, no two logits equal, probabilities from ~0.3 down to ~0.003 at temperature 1.
const std::vector<float> kLogits = {1.9f, -0.4f, 3.1f, 0.7f, 2.6f, -1.8f, 1.2f, 0.1f, 2.2f, -0.9f, 1.5f, -2.3f};

struct Case {
  const char* name;
  SamplingParams params;
  uint64_t seed;
};

const Case kCases[] = {
    {"temperature only", {1.0f, 1.0f, 0, 0.0f}, 101},
    {"hot", {1.7f, 1.0f, 0, 0.0f}, 102},
    {"top_k", {0.8f, 1.0f, 4, 0.0f}, 103},
    {"top_p", {1.2f, 0.7f, 0, 0.0f}, 104},
    {"min_p after the temperature", {0.6f, 1.0f, 0, 0.12f}, 105},
    {"min_p, top_k, top_p together", {1.5f, 0.8f, 6, 0.08f}, 106},
    {"top_p of what top_k kept", {1.0f, 0.75f, 3, 0.0f}, 107},
};

}  // namespace

TEST(SamplingDistribution, ChiSquareAgainstTheDefinition) {
  constexpr int kDraws = 200000;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const std::vector<long double> expected = reference(kLogits, c.params);
    std::vector<int> counts(kLogits.size(), 0);
    Rng rng(c.seed);
    for (int i = 0; i < kDraws; ++i) counts[size_t(sample_token(kLogits, c.params, rng))]++;
    double chi2 = 0.0;
    int cells = 0;
    for (size_t t = 0; t < kLogits.size(); ++t) {
      if (expected[t] == 0) {
        EXPECT_EQ(counts[t], 0) << "token " << t << " is outside the distribution";
        continue;
      }
      const double e = double(expected[t]) * kDraws;
      ASSERT_GE(e, 50.0) << "too few expected draws for the chi-square approximation";
      chi2 += (counts[t] - e) * (counts[t] - e) / e;
      ++cells;
    }
    const double p = chi_square_p_value(chi2, cells - 1);
    EXPECT_GT(p, 1e-6) << "chi2 " << chi2 << " over " << cells << " tokens";
  }
}

// The cases distinguish the orders: applying min_p before the temperature, top_p before top_k, or top_p to the
// whole distribution instead of what top_k kept, gives another support for at least one of them.
TEST(SamplingDistribution, TheCasesTellTheFilterOrdersApart) {
  const SamplingParams min_p_case = kCases[4].params;
  SamplingParams at_temperature_one = min_p_case;
  at_temperature_one.temperature = 1.0f;  // min_p measured before scaling keeps more tokens
  EXPECT_NE(support(reference(kLogits, min_p_case)), support(reference(kLogits, at_temperature_one)));
  const SamplingParams both = kCases[6].params;  // top_k 3, then top_p 0.75 of those three
  SamplingParams top_p_alone = both;
  top_p_alone.top_k = 0;
  EXPECT_EQ(support(reference(kLogits, both)).size(), 2u);
  EXPECT_GT(support(reference(kLogits, top_p_alone)).size(), 3u);
}

TEST(SamplingDistribution, PValueMatchesKnownQuantiles) {
  // scipy.stats.chi2.sf: sf(3.841459, 1) = 0.05, sf(20.090235, 8) = 0.01, sf(40.289, 10) = 1.46e-5.
  EXPECT_NEAR(chi_square_p_value(3.841459, 1), 0.05, 1e-6);
  EXPECT_NEAR(chi_square_p_value(20.090235, 8), 0.01, 1e-6);
  EXPECT_NEAR(chi_square_p_value(2.0, 4), 0.7357588823, 1e-8);  // e^-1 (1 + 1)
}

TEST(SamplingDistribution, GreedyIgnoresTheFilters) {
  Rng rng(5);
  EXPECT_EQ(sample_token(kLogits, {0.0f, 0.1f, 1, 0.9f}, rng), 2);
}

TEST(Penalties, FollowVllmsDefinitions) {
  // Prompt holds 0 and 1; the output so far 1, 2, 2. Repetition 2 divides positive logits, multiplies negative
  // ones, for tokens in the prompt or the output; frequency 0.5 per output occurrence; presence 0.25 once.
  PenaltyState state({2.0f, 0.25f, 0.5f}, {0, 1, 1, 0});
  for (int32_t t : {1, 2, 2}) state.add_output(t);
  std::vector<float> logits = {4.0f, -1.0f, 3.0f, 5.0f, -2.0f};
  state.apply(logits);
  EXPECT_FLOAT_EQ(logits[0], 2.0f);                       // prompt only: 4 / 2
  EXPECT_FLOAT_EQ(logits[1], -2.0f - 0.5f - 0.25f);       // prompt and output once: -1 * 2, then penalties
  EXPECT_FLOAT_EQ(logits[2], 1.5f - 2 * 0.5f - 0.25f);    // output twice: 3 / 2, then penalties
  EXPECT_FLOAT_EQ(logits[3], 5.0f);                       // never seen
  EXPECT_FLOAT_EQ(logits[4], -2.0f);
  PenaltyState off({}, {0, 1});
  off.add_output(3);
  std::vector<float> same = {1.0f, 2.0f, 3.0f, 4.0f};
  off.apply(same);
  EXPECT_EQ(same, (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}));
  EXPECT_FALSE(off.active());
}

TEST(Penalties, CheckSamplingRefusesOutOfRangeValues) {
  GenerationParams p;
  EXPECT_EQ(check_sampling(p), "");
  p.top_k = -1;
  EXPECT_EQ(check_sampling(p), "");
  const auto refused = [](auto set) {
    GenerationParams q;
    set(q);
    return !check_sampling(q).empty();
  };
  EXPECT_TRUE(refused([](GenerationParams& q) { q.top_k = -2; }));
  EXPECT_TRUE(refused([](GenerationParams& q) { q.min_p = 1.5f; }));
  EXPECT_TRUE(refused([](GenerationParams& q) { q.min_p = std::nanf(""); }));
  EXPECT_TRUE(refused([](GenerationParams& q) { q.repetition_penalty = 0.0f; }));
  EXPECT_TRUE(refused([](GenerationParams& q) { q.presence_penalty = 2.5f; }));
  EXPECT_TRUE(refused([](GenerationParams& q) { q.frequency_penalty = -3.0f; }));
  EXPECT_TRUE(refused([](GenerationParams& q) { q.temperature = -1.0f; }));
  EXPECT_TRUE(refused([](GenerationParams& q) { q.top_p = 0.0f; }));
}

TEST(Sampler, RandomSeedsDiffer) {
  std::vector<uint64_t> seeds;
  for (int i = 0; i < 100; ++i) seeds.push_back(random_seed());
  std::sort(seeds.begin(), seeds.end());
  EXPECT_EQ(std::unique(seeds.begin(), seeds.end()), seeds.end());
}

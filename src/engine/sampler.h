// Host-side token choice for long outputs: greedy, temperature and top-p with a seeded generator (same seed,
// same logits -> same tokens on every platform), log-prob helpers, and stop-string matching over decoded text.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fovea {

// xoshiro256** seeded through splitmix64: small, fast, and defined bit for bit (std:: distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1) with 53 random bits

 private:
  uint64_t s_[4];
};

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy
  float top_p = 1.0f;
};

// Picks a token from raw logits [vocab]. Greedy takes the lowest index among the maxima (as Backend::argmax).
int32_t sample_token(const std::vector<float>& logits, const SamplingParams& params, Rng& rng);

// log_softmax(logits)[id] for one id, and the `k` most likely ids with their log-probs (ties: lower id first).
float token_logprob(const std::vector<float>& logits, int32_t id);
std::vector<std::pair<int32_t, float>> top_logprobs(const std::vector<float>& logits, int k);

// Watches generated text for stop strings. Text that might be the start of a stop string is held back until
// it is known not to be; the stop string itself is never emitted.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Adds newly decoded text; returns the text now safe to emit.
  std::string push(const std::string& text);
  bool stopped() const { return stopped_; }
  std::string flush();  // at the end without a stop: whatever is held back

 private:
  std::vector<std::string> stops_;
  std::string held_;  // text not yet emitted
  bool stopped_ = false;
};

}  // namespace fovea

// Host-side token choice: greedy, or temperature with min-p, top-k and top-p through a seeded generator (same
// seed, same logits -> same tokens on every platform); repetition / presence / frequency penalties; log-prob
// helpers, and stop-string matching over decoded text.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fovea/request.h"

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

// How a token is drawn from logits that penalties (PenaltyState) have already adjusted, as vLLM does it:
// temperature, then min_p, then top_k, then top_p, each filter renormalising what the one before kept.
struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy
  float top_p = 1.0f;        // keep the most likely tokens until their mass reaches top_p of what is left
  int top_k = 0;             // <= 0: every token; else the k most likely (ties: lower id first)
  float min_p = 0.0f;        // drop tokens less likely than min_p x the most likely one's probability
};

// Picks a token from logits [vocab]. Greedy takes the lowest index among the maxima (as Backend::argmax).
int32_t sample_token(const std::vector<float>& logits, const SamplingParams& params, Rng& rng);

// vLLM's penalties for one sequence: repetition divides positive logits (multiplies negative ones) of every token
// seen in the prompt or the output; frequency subtracts frequency x its count in the output; presence
// subtracts presence once for each token present in the output. They change greedy choices too.
struct Penalties {
  float repetition = 1.0f;  // > 0; 1: off
  float presence = 0.0f;
  float frequency = 0.0f;
  bool active() const { return repetition != 1.0f || presence != 0.0f || frequency != 0.0f; }
};

class PenaltyState {
 public:
  PenaltyState() = default;
  PenaltyState(const Penalties& penalties, const std::vector<int32_t>& prompt);
  bool active() const { return penalties_.active(); }
  void add_output(int32_t token);
  void apply(std::vector<float>& logits) const;

 private:
  Penalties penalties_;
  std::vector<int32_t> prompt_ids_;           // sorted, unique
  std::unordered_map<int32_t, int> output_counts_;
};

// The request's sampling and penalty parameters, or why they are out of range ("" when fine).
SamplingParams sampling_of(const GenerationParams& params);
Penalties penalties_of(const GenerationParams& params);
std::string check_sampling(const GenerationParams& params);

// A seed for a request that gave none: different for every call in a process and between processes.
uint64_t random_seed();

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

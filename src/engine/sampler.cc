#include "engine/sampler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "core/error.h"

namespace fovea {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

int32_t argmax_lowest(const std::vector<float>& logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[size_t(best)]) best = int32_t(i);
  return best;
}

double log_sum_exp(const std::vector<float>& logits) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(double(l) - double(max_logit));
  return double(max_logit) + std::log(sum);
}

}  // namespace

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

int32_t sample_token(const std::vector<float>& logits, const SamplingParams& params, Rng& rng) {
  FOVEA_CHECK(!logits.empty(), "sampling from empty logits");
  if (params.temperature <= 0.0f) return argmax_lowest(logits);
  FOVEA_CHECK(params.top_p > 0.0f && params.top_p <= 1.0f, "top_p must be in (0, 1], got ", params.top_p);
  FOVEA_CHECK(params.min_p >= 0.0f && params.min_p <= 1.0f, "min_p must be in [0, 1], got ", params.min_p);

  // Probabilities at this temperature relative to the most likely token's (which is 1), in double so that tiny
  // tails still sum sensibly. Normalising is left to the end: every filter below compares or sums relative ones.
  const double inv_t = 1.0 / double(params.temperature);
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  std::vector<double> probs(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) probs[i] = std::exp((double(logits[i]) - max_logit) * inv_t);

  // min_p keeps tokens at least min_p times as likely as the best one (the best always stays). `kept` is in id
  // order until a filter needs it sorted by probability (ties: lower id first, so the order is defined).
  std::vector<int32_t> kept;
  kept.reserve(logits.size());
  for (size_t i = 0; i < probs.size(); ++i)
    if (probs[i] >= double(params.min_p)) kept.push_back(int32_t(i));
  const auto more_likely = [&](int32_t a, int32_t b) {
    return probs[size_t(a)] != probs[size_t(b)] ? probs[size_t(a)] > probs[size_t(b)] : a < b;
  };
  bool sorted = false;
  if (params.top_k > 0 && size_t(params.top_k) < kept.size()) {
    const auto kth = kept.begin() + (params.top_k - 1);
    std::nth_element(kept.begin(), kth, kept.end(), more_likely);
    kept.resize(size_t(params.top_k));
    std::sort(kept.begin(), kept.end(), more_likely);
    sorted = true;
  }
  // Nucleus over what is left: the most likely tokens until their mass reaches top_p of the kept mass.
  if (params.top_p < 1.0f) {
    if (!sorted) std::sort(kept.begin(), kept.end(), more_likely);
    double total = 0.0;
    for (const int32_t id : kept) total += probs[size_t(id)];
    double mass = 0.0;
    size_t keep = 0;
    while (keep < kept.size() && mass < double(params.top_p) * total) mass += probs[size_t(kept[keep++])];
    kept.resize(keep);
  }
  double kept_mass = 0.0;
  for (const int32_t id : kept) kept_mass += probs[size_t(id)];
  double target = rng.uniform() * kept_mass;
  for (const int32_t id : kept) {
    target -= probs[size_t(id)];
    if (target < 0.0) return id;
  }
  return kept.back();  // rounding left a sliver of mass: the last kept token takes it
}

PenaltyState::PenaltyState(const Penalties& penalties, const std::vector<int32_t>& prompt) : penalties_(penalties) {
  if (penalties.repetition == 1.0f) return;  // only the repetition penalty looks at the prompt
  prompt_ids_ = prompt;
  std::sort(prompt_ids_.begin(), prompt_ids_.end());
  prompt_ids_.erase(std::unique(prompt_ids_.begin(), prompt_ids_.end()), prompt_ids_.end());
}

void PenaltyState::add_output(int32_t token) {
  if (active()) ++output_counts_[token];
}

void PenaltyState::apply(std::vector<float>& logits) const {
  const float repetition = penalties_.repetition;
  const auto repeat = [&](int32_t id) {
    if (id < 0 || size_t(id) >= logits.size()) return;
    float& l = logits[size_t(id)];
    l = l > 0.0f ? l / repetition : l * repetition;
  };
  if (repetition != 1.0f) {
    for (const int32_t id : prompt_ids_) repeat(id);
    for (const auto& [id, count] : output_counts_)
      if (!std::binary_search(prompt_ids_.begin(), prompt_ids_.end(), id)) repeat(id);
  }
  for (const auto& [id, count] : output_counts_) {
    if (id < 0 || size_t(id) >= logits.size()) continue;
    logits[size_t(id)] -= penalties_.frequency * float(count);
    logits[size_t(id)] -= penalties_.presence;
  }
}

SamplingParams sampling_of(const GenerationParams& p) { return {p.temperature, p.top_p, p.top_k, p.min_p}; }

Penalties penalties_of(const GenerationParams& p) {
  return {p.repetition_penalty, p.presence_penalty, p.frequency_penalty};
}

std::string check_sampling(const GenerationParams& p) {
  // Written so that NaN fails every check.
  if (!(p.temperature >= 0.0f && std::isfinite(p.temperature)))
    return str("temperature must be >= 0, got ", p.temperature);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return str("top_p must be in (0, 1], got ", p.top_p);
  if (p.top_k < -1) return str("top_k must be -1, 0 (every token) or positive, got ", p.top_k);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return str("min_p must be in [0, 1], got ", p.min_p);
  if (!(p.repetition_penalty > 0.0f && std::isfinite(p.repetition_penalty)))
    return str("repetition_penalty must be > 0, got ", p.repetition_penalty);
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
    return str("presence_penalty must be in [-2, 2], got ", p.presence_penalty);
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
    return str("frequency_penalty must be in [-2, 2], got ", p.frequency_penalty);
  return "";
}

uint64_t random_seed() {
  static std::atomic<uint64_t> state{(uint64_t(std::random_device{}()) << 32) ^ uint64_t(std::random_device{}()) ^
                                     uint64_t(std::chrono::system_clock::now().time_since_epoch().count())};
  uint64_t s = state.fetch_add(0x9e3779b97f4a7c15ull);
  return splitmix64(s);
}

float token_logprob(const std::vector<float>& logits, int32_t id) {
  FOVEA_CHECK(id >= 0 && size_t(id) < logits.size(), "token id ", id, " outside vocab ", logits.size());
  return float(double(logits[size_t(id)]) - log_sum_exp(logits));
}

std::vector<std::pair<int32_t, float>> top_logprobs(const std::vector<float>& logits, int k) {
  k = std::min<int>(k, int(logits.size()));
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] > logits[size_t(b)] : a < b;
  });
  const double lse = log_sum_exp(logits);
  std::vector<std::pair<int32_t, float>> out;
  for (int i = 0; i < k; ++i) out.emplace_back(order[size_t(i)], float(double(logits[size_t(order[size_t(i)])]) - lse));
  return out;
}

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::push(const std::string& text) {
  if (stopped_) return "";
  held_ += text;
  // The earliest complete stop string ends the output right before it.
  size_t stop_at = std::string::npos;
  for (const auto& s : stops_) stop_at = std::min(stop_at, held_.find(s));
  if (stop_at != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, stop_at);
    held_.clear();
    return out;
  }
  // Hold back the longest tail of held_ that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_)
    for (size_t len = std::min(s.size() - 1, held_.size()); len > hold; --len)
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!stopped_) out.swap(held_);
  return out;
}

}  // namespace fovea

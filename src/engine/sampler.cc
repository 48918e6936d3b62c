#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

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

  // Probabilities at this temperature, in double so that tiny tails still sum sensibly.
  const double inv_t = 1.0 / double(params.temperature);
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  std::vector<double> probs(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) total += probs[i] = std::exp((double(logits[i]) - max_logit) * inv_t);

  // Nucleus: the most likely tokens whose mass reaches top_p (sorted by probability, then by id for determinism).
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  size_t keep = order.size();
  double kept_mass = total;
  if (params.top_p < 1.0f) {
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return probs[size_t(a)] != probs[size_t(b)] ? probs[size_t(a)] > probs[size_t(b)] : a < b;
    });
    kept_mass = 0.0;
    keep = 0;
    while (keep < order.size() && kept_mass < double(params.top_p) * total) kept_mass += probs[size_t(order[keep++])];
  }
  double target = rng.uniform() * kept_mass;
  for (size_t i = 0; i < keep; ++i) {
    target -= probs[size_t(order[i])];
    if (target < 0.0) return order[i];
  }
  return order[keep - 1];  // rounding left a sliver of mass: the last kept token takes it
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

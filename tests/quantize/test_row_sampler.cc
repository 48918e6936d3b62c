// The calibration row sample: bounded, drawn from every sample (the last one included), and the same rows
// whatever order the engine delivers them in.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "quantize/row_sampler.h"

namespace fovea {
namespace {

constexpr int64_t kWidth = 6;

// `samples` calibration samples of `rows_each` rows: element 0 is the sample's index, 1 the row's, the rest noise
// (all exact in bf16, so a kept row can be traced back to its sample).
std::vector<std::vector<float>> make_samples(int samples, int rows_each) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> noise(-100, 100);
  std::vector<std::vector<float>> out(static_cast<size_t>(samples));
  for (int s = 0; s < samples; ++s)
    for (int r = 0; r < rows_each; ++r) {
      out[size_t(s)].insert(out[size_t(s)].end(), {float(s), float(r)});
      for (int64_t i = 2; i < kWidth; ++i) out[size_t(s)].push_back(float(noise(rng)) / 8);
    }
  return out;
}

std::vector<float> sample_in_order(const std::vector<std::vector<float>>& samples, const std::vector<size_t>& order,
                                   int64_t capacity, int64_t* seen = nullptr) {
  RowSampler sampler(capacity, kWidth);
  for (size_t s : order) sampler.add(samples[s].data(), int64_t(samples[s].size()) / kWidth);
  if (seen != nullptr) *seen = sampler.seen();
  EXPECT_EQ(sampler.bytes(), size_t(std::min<int64_t>(capacity, sampler.seen()) * kWidth * 2));
  return sampler.rows_f32();
}

std::vector<size_t> in_order(size_t n) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  return order;
}

TEST(RowSampler, KeepsRowsFromEverySampleTheLastIncluded) {
  const int kSamples = 32, kRowsEach = 400, kCapacity = 1600;  // keeps 1 row in 8: ~50 per sample
  const auto samples = make_samples(kSamples, kRowsEach);
  int64_t seen = 0;
  const std::vector<float> kept = sample_in_order(samples, in_order(samples.size()), kCapacity, &seen);
  EXPECT_EQ(seen, kSamples * kRowsEach);
  ASSERT_EQ(int64_t(kept.size()), kCapacity * kWidth);
  std::map<int, int> per_sample;
  for (size_t r = 0; r < kept.size(); r += kWidth) per_sample[int(kept[r])]++;
  ASSERT_EQ(int(per_sample.size()), kSamples) << "some sample has no row in the calibration set";
  // The first-rows rule this replaces kept samples 0..3 only. An even draw gives each ~50 (binomial sd ~6.6).
  for (const auto& [sample, count] : per_sample) {
    EXPECT_GT(count, 20) << "sample " << sample;
    EXPECT_LT(count, 85) << "sample " << sample;
  }
  EXPECT_GT(per_sample[kSamples - 1], 20);
  // Rows come from all over each sample too, not only its first rows.
  int late_rows = 0;
  for (size_t r = 0; r < kept.size(); r += kWidth) late_rows += kept[r + 1] >= kRowsEach / 2;
  EXPECT_GT(late_rows, kCapacity / 3);
}

TEST(RowSampler, TheSameRowsWhateverTheArrivalOrder) {
  const auto samples = make_samples(20, 150);
  const std::vector<float> forward = sample_in_order(samples, in_order(samples.size()), 500);
  std::vector<size_t> shuffled = in_order(samples.size());
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(3));
  EXPECT_EQ(sample_in_order(samples, shuffled, 500), forward);
  std::reverse(shuffled.begin(), shuffled.end());
  EXPECT_EQ(sample_in_order(samples, shuffled, 500), forward);
  // Rows in smaller batches than the samples (the engine's chunks) change nothing either.
  RowSampler chunked(500, kWidth);
  for (const auto& s : samples)
    for (size_t at = 0; at < s.size(); at += 7 * kWidth)
      chunked.add(s.data() + at, int64_t(std::min<size_t>(7 * kWidth, s.size() - at)) / kWidth);
  EXPECT_EQ(chunked.rows_f32(), forward);
}

TEST(RowSampler, FewerRowsThanCapacityKeepsThemAllAsBf16) {
  const auto samples = make_samples(3, 10);
  std::vector<float> all;
  for (const auto& s : samples) all.insert(all.end(), s.begin(), s.end());
  all[2] = 0.1f;  // not exact in bf16
  RowSampler sampler(100, kWidth);
  sampler.add(all.data(), int64_t(all.size()) / kWidth);
  EXPECT_EQ(sampler.kept(), 30);
  std::vector<float> kept = sampler.rows_f32();
  ASSERT_EQ(kept.size(), all.size());
  for (float& v : all) v = round_to_bf16(v);
  // The same multiset of rows (the sample orders them by hash).
  auto as_rows = [](const std::vector<float>& v) {
    std::vector<std::vector<float>> rows;
    for (size_t r = 0; r < v.size(); r += kWidth) rows.emplace_back(v.begin() + long(r), v.begin() + long(r + kWidth));
    std::sort(rows.begin(), rows.end());
    return rows;
  };
  EXPECT_EQ(as_rows(kept), as_rows(all));
}

TEST(RowSampler, ADifferentSeedDrawsADifferentSample) {
  const auto samples = make_samples(10, 100);
  RowSampler a(100, kWidth), b(100, kWidth, 12345);
  for (const auto& s : samples) {
    a.add(s.data(), int64_t(s.size()) / kWidth);
    b.add(s.data(), int64_t(s.size()) / kWidth);
  }
  EXPECT_NE(a.rows_f32(), b.rows_f32());
}

}  // namespace
}  // namespace fovea

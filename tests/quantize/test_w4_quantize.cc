// GPTQ, AWQ and round-to-nearest on a random linear whose inputs are correlated and have a few loud channels
// (as LLM activations do). The oracle is the arithmetic itself: the layer's output error on the rows, and the
// packed files read back by the loader's own dequantization.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model/w4_dequant.h"
#include "quantize/w4_quantize.h"

namespace fovea {
namespace {

struct Layer {
  int64_t out = 64, in = 256, rows = 512;
  std::vector<float> w, x, held_out;
};

std::vector<float> correlated_rows(std::mt19937& rng, int64_t rows, int64_t in, const std::vector<float>& mix,
                                   const std::vector<float>& loud) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> z(static_cast<size_t>(rows * in)), x(static_cast<size_t>(rows * in), 0.0f);
  for (float& v : z) v = normal(rng);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < in; ++k) {
      double s = 0;
      for (int64_t j = 0; j < in; ++j) s += z[size_t(r * in + j)] * mix[size_t(j * in + k)];
      x[size_t(r * in + k)] = float(s) * loud[size_t(k)];
    }
  return x;
}

Layer make_layer(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Layer l;
  l.w.resize(size_t(l.out * l.in));
  for (float& v : l.w) v = 0.02f * normal(rng);
  // x = z M with M = I + low-rank mixing: strongly correlated channels; every 16th channel 8x louder.
  std::vector<float> mix(static_cast<size_t>(l.in * l.in), 0.0f), loud(static_cast<size_t>(l.in), 1.0f);
  for (int64_t k = 0; k < l.in; ++k) mix[size_t(k * l.in + k)] = 0.3f;
  for (int r = 0; r < 8; ++r) {
    std::vector<float> a(static_cast<size_t>(l.in)), b(static_cast<size_t>(l.in));
    for (float& v : a) v = normal(rng) / 4;
    for (float& v : b) v = normal(rng) / 4;
    for (int64_t i = 0; i < l.in; ++i)
      for (int64_t j = 0; j < l.in; ++j) mix[size_t(i * l.in + j)] += a[size_t(i)] * b[size_t(j)];
  }
  for (int64_t k = 0; k < l.in; k += 16) loud[size_t(k)] = 8.0f;
  l.x = correlated_rows(rng, l.rows, l.in, mix, loud);
  l.held_out = correlated_rows(rng, l.rows, l.in, mix, loud);
  return l;
}

std::vector<double> hessian(const Layer& l) {
  std::vector<double> xtx(static_cast<size_t>(l.in * l.in), 0.0);
  accumulate_xtx(l.x.data(), l.rows, l.in, &xtx);
  return xtx;
}

// AWQ's effective weight: Q(W diag(s)) diag(s)^-1.
std::vector<float> awq_effective(const Layer& l, int64_t group) {
  const std::vector<float> s = awq_search_scales(l.w.data(), l.out, l.in, l.x.data(), l.rows, group);
  std::vector<float> scaled = l.w;
  for (int64_t n = 0; n < l.out; ++n)
    for (int64_t k = 0; k < l.in; ++k) scaled[size_t(n * l.in + k)] *= s[size_t(k)];
  std::vector<float> dq = dequantize_codes(rtn_w4(scaled.data(), l.out, l.in, group, false));
  for (int64_t n = 0; n < l.out; ++n)
    for (int64_t k = 0; k < l.in; ++k) dq[size_t(n * l.in + k)] /= s[size_t(k)];
  return dq;
}

double error(const Layer& l, const std::vector<float>& approx, const std::vector<float>& rows) {
  return output_error(l.w.data(), approx.data(), l.out, l.in, rows.data(), l.rows);
}

class CalibratedBeatsRtn : public ::testing::TestWithParam<int64_t> {};

TEST_P(CalibratedBeatsRtn, OnCalibrationAndHeldOutRows) {
  const int64_t group = GetParam();
  const Layer l = make_layer(7);
  const std::vector<float> rtn_sym = dequantize_codes(rtn_w4(l.w.data(), l.out, l.in, group, true));
  const std::vector<float> rtn_asym = dequantize_codes(rtn_w4(l.w.data(), l.out, l.in, group, false));
  const std::vector<double> xtx = hessian(l);
  for (bool act_order : {false, true}) {
    const std::vector<float> gptq = dequantize_codes(gptq_w4(l.w.data(), l.out, l.in, xtx, group, act_order, true));
    EXPECT_LT(error(l, gptq, l.x), 0.8 * error(l, rtn_sym, l.x)) << "act_order " << act_order;
    EXPECT_LT(error(l, gptq, l.held_out), error(l, rtn_sym, l.held_out)) << "act_order " << act_order;
  }
  const std::vector<float> awq = awq_effective(l, group);
  EXPECT_LT(error(l, awq, l.x), 0.95 * error(l, rtn_asym, l.x));
  EXPECT_LT(error(l, awq, l.held_out), error(l, rtn_asym, l.held_out));
}

INSTANTIATE_TEST_SUITE_P(Groups, CalibratedBeatsRtn, ::testing::Values(32, 128));

// Symmetric groups put +-absmax on the grid's ends: every value is within half a step. Asymmetric ones (AutoAWQ)
// round the zero point, which shifts the grid by up to half a step, so the group's extremes may be a step away.
// (1% slack: the scale is stored as float16, rounded by up to 2^-11, over 7.5 steps.)
TEST(W4Quantize, RtnIsWithinItsStep) {
  const Layer l = make_layer(3);
  for (bool sym : {false, true}) {
    const W4Codes c = rtn_w4(l.w.data(), l.out, l.in, 32, sym);
    const std::vector<float> dq = dequantize_codes(c);
    for (int64_t n = 0; n < l.out; ++n)
      for (int64_t k = 0; k < l.in; ++k) {
        const float step = c.scales[size_t((k / 32) * l.out + n)];
        ASSERT_LE(std::fabs(dq[size_t(n * l.in + k)] - l.w[size_t(n * l.in + k)]), (sym ? 0.5f : 1.0f) * step * 1.01f);
      }
  }
}

TEST(W4Quantize, GptqStaysNearTheWeights) {
  // Error feedback moves later columns, so a GPTQ code may sit more than half a step away; it stays within a few.
  const Layer l = make_layer(5);
  const W4Codes c = gptq_w4(l.w.data(), l.out, l.in, hessian(l), 128, true, true);
  const std::vector<float> dq = dequantize_codes(c);
  double mean_steps = 0;
  for (int64_t n = 0; n < l.out; ++n)
    for (int64_t k = 0; k < l.in; ++k) {
      const float step = c.scales[size_t(c.g_idx[size_t(k)] * l.out + n)];
      const double d = std::fabs(dq[size_t(n * l.in + k)] - l.w[size_t(n * l.in + k)]) / step;
      mean_steps += d;
      ASSERT_LE(d, 4.0);
    }
  EXPECT_LE(mean_steps / double(l.out * l.in), 1.0);
}

TEST(W4Quantize, GptqWithWhiteInputsIsRoundToNearest) {
  // H = c I: no column's error correlates with another's, so GPTQ has nothing to push and equals RTN.
  const Layer l = make_layer(9);
  std::vector<double> xtx(static_cast<size_t>(l.in * l.in), 0.0);
  for (int64_t k = 0; k < l.in; ++k) xtx[size_t(k * l.in + k)] = 3.0;
  const W4Codes g = gptq_w4(l.w.data(), l.out, l.in, xtx, 64, false, true);
  const W4Codes r = rtn_w4(l.w.data(), l.out, l.in, 64, true);
  EXPECT_EQ(g.q, r.q);
  EXPECT_EQ(g.scales, r.scales);
}

TEST(W4Quantize, PackedCodesReadBackThroughTheLoader) {
  const Layer l = make_layer(11);
  const W4Codes gptq = gptq_w4(l.w.data(), l.out, l.in, hessian(l), 32, true, true);
  const W4Codes rtn = rtn_w4(l.w.data(), l.out, l.in, 32, false);
  CheckpointQuantization q;
  q.bits = 4;
  q.group_size = 32;
  q.method = WeightQuantMethod::Gptq;
  q.desc_act = true;
  q.zeros_minus_one = true;
  const Tensor g = dequantize_w4(pack_gptq_codes(gptq, true), q, DType::F32, "gptq");
  q.method = WeightQuantMethod::Awq;
  q.desc_act = q.zeros_minus_one = false;
  const Tensor a = dequantize_w4(pack_awq_codes(rtn), q, DType::F32, "awq");
  const std::vector<float> g_ref = dequantize_codes(gptq), a_ref = dequantize_codes(rtn);
  for (int64_t i = 0; i < l.out * l.in; ++i) {
    ASSERT_EQ(g.ptr<float>()[i], g_ref[size_t(i)]) << i;
    ASSERT_EQ(a.ptr<float>()[i], a_ref[size_t(i)]) << i;
  }
}

}  // namespace
}  // namespace fovea

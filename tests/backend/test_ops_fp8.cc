// FP8 W8A8 linears (Backend::linear_fp8_scaled) under each scaling recipe of backend/fp8_recipe.h: the CUDA
// backend (cuBLASLt's scale modes) against the CPU reference where there is a GPU; everywhere, the CPU reference
// against its definition computed here in double, and the per-token recipes' batch invariance (a row's result
// does not depend on the other rows: bit-identical alone and in a batch).
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/fp8_recipe.h"
#include "core/dtype.h"
#include "ops_harness.h"

namespace fovea::test {
namespace {

// FP8 W8A8: both backends quantize x to E4M3 with one dynamic scale and multiply E4M3 codes in float32, so the
// CUDA result (cuBLASLt FP8, bf16 out) must match the CPU reference to bf16 precision. Weights quantized here the
// way the loader does (per-tensor scale max|w| / 448); M from a decode row to a prefill chunk, with and without
// bias, activations with an outlier (the per-tensor scale follows it).
TEST_F(OpsTest, LinearFp8) {
  struct Case {
    int m, k, n;
  };
  for (Case c : {Case{1, 64, 96}, Case{7, 128, 200}, Case{64, 1024, 256}, Case{300, 256, 1024}, Case{33, 4096, 64}}) {
    Tensor w_host = random_host({c.n, c.k}, -0.1f, 0.1f);
    Tensor codes = Tensor::host(DType::F8E4M3, {c.n, c.k}), scale = Tensor::host(DType::F32, {1});
    scale.ptr<float>()[0] = quantize_e4m3(w_host.ptr<float>(), w_host.numel(), codes.ptr<uint8_t>());
    Twin w8 = twin(codes, '8'), ws = twin(scale, 'f'), bias = twin(random_host({c.n}), 'w');
    Tensor x_host = random_host({c.m, c.k}, -2.f, 2.f);
    x_host.ptr<float>()[c.k / 2] = 24.f;  // an outlier sets the activation scale
    Twin x = twin(x_host);
    for (int variant = 0; variant < 4; ++variant) {  // the ViT's fc1 is bias + GELU
      const bool with_bias = variant & 1;
      const Activation act = variant & 2 ? Activation::Gelu : Activation::None;
      Twin y = output({c.m, c.n});
      cpu_->linear_fp8(x.cpu, w8.cpu, ws.cpu, with_bias ? bias.cpu : Tensor{}, y.cpu, act);
      gpu_->linear_fp8(x.gpu, w8.gpu, ws.gpu, with_bias ? bias.gpu : Tensor{}, y.gpu, act);
      expect_close(y, kBf16Tol,
                   "linear_fp8 M=" + std::to_string(c.m) + " K=" + std::to_string(c.k) + " N=" + std::to_string(c.n) +
                       (with_bias ? " bias" : "") + (act == Activation::Gelu ? " gelu" : ""));
    }
  }
}

// Per channel x per token and 128-blocks: both backends quantize each token (or each 1x128 block of it) with its
// own dynamic scale, and the weights were quantized per channel (or per 128x128 block) here the way the loader
// does. Rows of very different magnitudes (one with an outlier) make every scale count. Shapes include K and N
// that are not multiples of 128 (partial blocks: SmolLM2's hidden 576) and decode-sized M.
TEST_F(OpsTest, LinearFp8Recipes) {
  struct Case {
    int m, k, n;
  };
  for (Fp8Scaling scaling : {Fp8Scaling::Channel, Fp8Scaling::Block, Fp8Scaling::ChannelAct128}) {
    for (Case c : {Case{1, 128, 96}, Case{7, 256, 200}, Case{64, 1024, 256}, Case{300, 256, 1024}, Case{33, 4096, 64},
                   Case{5, 576, 960}, Case{17, 1536, 576}, Case{40, 64, 136}}) {
      const Fp8HostWeight q = quantize_fp8_weight(random_host({c.n, c.k}, -0.1f, 0.1f), scaling);
      Twin w8 = twin(q.codes, '8'), ws = twin(q.scale, 'f'), bias = twin(random_host({c.n}), 'w');
      Tensor x_host = random_host({c.m, c.k}, -2.f, 2.f);
      for (int r = 0; r < c.m; ++r)
        for (int i = 0; i < c.k; ++i) x_host.ptr<float>()[r * c.k + i] *= float(1 << (r % 6));
      x_host.ptr<float>()[c.k / 2] = 96.f;
      Twin x = twin(x_host);
      for (int variant = 0; variant < 4; ++variant) {
        const bool with_bias = variant & 1;
        const Activation act = variant & 2 ? Activation::Gelu : Activation::None;
        Twin y = output({c.m, c.n});
        const std::string what = std::string("linear_fp8 ") + fp8_scaling_name(scaling) + " M=" +
                                 std::to_string(c.m) + " K=" + std::to_string(c.k) + " N=" + std::to_string(c.n) +
                                 (with_bias ? " bias" : "") + (act == Activation::Gelu ? " gelu" : "");
        cpu_->linear_fp8_scaled(x.cpu, w8.cpu, ws.cpu, scaling, with_bias ? bias.cpu : Tensor{}, y.cpu, act);
        try {  // a shape cuBLASLt refuses fails its case alone: one device run reports every case
          gpu_->linear_fp8_scaled(x.gpu, w8.gpu, ws.gpu, scaling, with_bias ? bias.gpu : Tensor{}, y.gpu, act);
        } catch (const Error& e) {
          ADD_FAILURE() << what << ": " << e.what();
          continue;
        }
        expect_close(y, kBf16Tol, what);
      }
    }
  }
}

// ---- CPU-only (runs everywhere) ----

// The CPU reference of linear_fp8 against the definition computed here in double: activations scaled by
// max|x| / 448 and rounded to E4M3, weights already E4M3 codes, products summed, both scales and the bias applied.
TEST(CpuFp8, LinearFp8MatchesItsDefinition) {
  auto cpu = make_cpu_backend();
  const int m = 5, k = 48, n = 24;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-3.f, 3.f);
  Tensor x = Tensor::host(DType::F32, {m, k}), codes = Tensor::host(DType::F8E4M3, {n, k});
  Tensor scale = Tensor::host(DType::F32, {1}), bias = Tensor::host(DType::F32, {n}), y = Tensor::host(DType::F32, {m, n});
  float absmax = 0.f;
  for (int64_t i = 0; i < x.numel(); ++i) {
    x.ptr<float>()[i] = dist(rng);
    absmax = std::max(absmax, std::fabs(x.ptr<float>()[i]));
  }
  for (int64_t i = 0; i < codes.numel(); ++i) codes.ptr<uint8_t>()[i] = f32_to_e4m3(dist(rng) * 100.f);
  for (int64_t i = 0; i < n; ++i) bias.ptr<float>()[i] = dist(rng);
  scale.ptr<float>()[0] = 0.003f;
  cpu->linear_fp8(x, codes, scale, bias, y);
  const float sx = absmax / 448.f;
  double worst = 0;
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < n; ++c) {
      double acc = 0;
      for (int i = 0; i < k; ++i)
        acc += double(e4m3_to_f32(f32_to_e4m3(x.ptr<float>()[r * k + i] / sx))) *
               double(e4m3_to_f32(codes.ptr<uint8_t>()[c * k + i]));
      const double expected = acc * double(sx) * 0.003 + double(bias.ptr<float>()[c]);
      worst = std::max(worst, std::fabs(expected - double(y.ptr<float>()[r * n + c])) / (std::fabs(expected) + 1e-3));
    }
  EXPECT_LT(worst, 1e-5);
  // GELU (erf) after the bias, as in linear.
  Tensor y_gelu = Tensor::host(DType::F32, {m, n});
  cpu->linear_fp8(x, codes, scale, bias, y_gelu, Activation::Gelu);
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double v = y.ptr<float>()[i];
    EXPECT_NEAR(y_gelu.ptr<float>()[i], 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))), 1e-5 * (1 + std::fabs(v)));
  }
  // Shapes cuBLASLt's FP8 kernels cannot take are refused on every backend.
  Tensor odd = Tensor::host(DType::F8E4M3, {n, 40}), x40 = Tensor::host(DType::F32, {m, 40});
  EXPECT_THROW(cpu->linear_fp8(x40, odd, scale, Tensor{}, y), Error);
}

// Scales and codes of one group, computed here independently of core's helpers: absmax / 448 (1 for zeros).
float group_scale(const float* v, int64_t stride, int64_t rows, int64_t cols) {
  float absmax = 0.f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) absmax = std::max(absmax, std::fabs(v[r * stride + c]));
  return absmax > 0.f ? absmax / 448.f : 1.f;
}

Tensor random_matrix(std::mt19937& rng, int64_t rows, int64_t cols, float range) {
  std::uniform_real_distribution<float> dist(-range, range);
  Tensor t = Tensor::host(DType::F32, {rows, cols});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t.ptr<float>()[r * cols + c] = dist(rng) * float(1 + r % 7);
  return t;
}

// The weight quantization of each recipe against its definition: each group's scale is absmax / 448 and each
// code f32_to_e4m3(w / scale); block scales sit at [n / 128][k / 128] with rows padded to 4 (the padding 1).
TEST(CpuFp8, WeightQuantizationFollowsItsRecipe) {
  std::mt19937 rng(5);
  const int64_t n = 136, k = 320;  // partial blocks in both directions
  const Tensor w = random_matrix(rng, n, k, 0.2f);
  const float* v = w.ptr<float>();
  const Fp8HostWeight channel = quantize_fp8_weight(w, Fp8Scaling::Channel);
  ASSERT_EQ(channel.scale.shape, (Shape{n}));
  for (int64_t r = 0; r < n; ++r) {
    const float s = group_scale(v + r * k, k, 1, k);
    ASSERT_EQ(channel.scale.ptr<float>()[r], s) << r;
    for (int64_t c = 0; c < k; ++c) ASSERT_EQ(channel.codes.ptr<uint8_t>()[r * k + c], f32_to_e4m3(v[r * k + c] / s));
  }
  const Fp8HostWeight block = quantize_fp8_weight(w, Fp8Scaling::Block);
  ASSERT_EQ(block.scale.shape, (Shape{2, 4}));  // ceil(136/128) x ceil(320/128) = 3 padded to 4
  for (int64_t nb = 0; nb < 2; ++nb) {
    for (int64_t kb = 0; kb < 3; ++kb) {
      const int64_t r0 = nb * 128, c0 = kb * 128;
      const int64_t rows = std::min<int64_t>(128, n - r0), cols = std::min<int64_t>(128, k - c0);
      const float s = group_scale(v + r0 * k + c0, k, rows, cols);
      ASSERT_EQ(block.scale.ptr<float>()[nb * 4 + kb], s);
      for (int64_t r = r0; r < r0 + rows; ++r)
        for (int64_t c = c0; c < c0 + cols; ++c)
          ASSERT_EQ(block.codes.ptr<uint8_t>()[r * k + c], f32_to_e4m3(v[r * k + c] / s));
    }
    EXPECT_EQ(block.scale.ptr<float>()[nb * 4 + 3], 1.f);
  }
  const Fp8HostWeight tensor = quantize_fp8_weight(w, Fp8Scaling::Tensor);
  EXPECT_EQ(tensor.scale.ptr<float>()[0], group_scale(v, k, n, k));
}

// The CPU reference of the per-token recipes against their definitions in double: per channel, the float32 sum
// of E4M3 products times the token's and the channel's scales; per block, each 128-block's partial sum times
// its two block scales.
TEST(CpuFp8, ChannelAndBlockMatchTheirDefinitions) {
  auto cpu = make_cpu_backend();
  std::mt19937 rng(17);
  const int64_t m = 6, k = 320, n = 136;
  const Tensor x = random_matrix(rng, m, k, 3.f), w = random_matrix(rng, n, k, 0.2f);
  Tensor bias = random_matrix(rng, 1, n, 1.f).view({n});
  for (Fp8Scaling scaling : {Fp8Scaling::Channel, Fp8Scaling::Block, Fp8Scaling::ChannelAct128}) {
    const Fp8HostWeight q = quantize_fp8_weight(w, scaling);
    Tensor y = Tensor::host(DType::F32, {m, n});
    cpu->linear_fp8_scaled(x, q.codes, q.scale, scaling, bias, y);
    const int64_t group = scaling == Fp8Scaling::Channel ? k : 128;  // the activation's groups
    double worst = 0;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double expected = bias.ptr<float>()[c], magnitude = std::fabs(expected);  // float32 error scales with it
        for (int64_t g0 = 0; g0 < k; g0 += group) {
          const int64_t cols = std::min(group, k - g0);
          const float sx = group_scale(x.ptr<float>() + r * k + g0, k, 1, cols);
          const float sw = scaling == Fp8Scaling::Block ? q.scale.ptr<float>()[(c / 128) * 4 + g0 / 128]
                                                        : q.scale.ptr<float>()[c];
          double acc = 0;
          for (int64_t i = g0; i < g0 + cols; ++i)
            acc += double(e4m3_to_f32(f32_to_e4m3(x.ptr<float>()[r * k + i] / sx))) *
                   double(e4m3_to_f32(q.codes.ptr<uint8_t>()[c * k + i]));
          expected += acc * double(sx) * double(sw);
          magnitude += std::fabs(acc * double(sx) * double(sw));
        }
        worst = std::max(worst, std::fabs(expected - double(y.ptr<float>()[r * n + c])) / magnitude);
      }
    EXPECT_LT(worst, 1e-5) << fp8_scaling_name(scaling);
  }
}

// Batch invariance: with per-token scales a row's output is bit-identical whether it runs alone or among other
// rows of any magnitude; with the per-tensor scale a loud batch-mate changes it (the reason for the recipes).
TEST(CpuFp8, PerTokenRecipesAreBatchInvariant) {
  auto cpu = make_cpu_backend();
  std::mt19937 rng(23);
  const int64_t m = 29, k = 384, n = 64;
  Tensor x = random_matrix(rng, m, k, 1.f);
  x.ptr<float>()[7 * k + 5] = 300.f;  // a loud batch-mate
  const Tensor w = random_matrix(rng, n, k, 0.2f);
  for (Fp8Scaling scaling :
       {Fp8Scaling::Tensor, Fp8Scaling::Channel, Fp8Scaling::Block, Fp8Scaling::ChannelAct128}) {
    const Fp8HostWeight q = quantize_fp8_weight(w, scaling);
    Tensor batch = Tensor::host(DType::F32, {m, n});
    cpu->linear_fp8_scaled(x, q.codes, q.scale, scaling, Tensor{}, batch);
    int differing = 0;
    for (int64_t r : {0, 3, 12, 28}) {
      Tensor alone = Tensor::host(DType::F32, {1, n});
      cpu->linear_fp8_scaled(x.rows(r, r + 1), q.codes, q.scale, scaling, Tensor{}, alone);
      differing += std::memcmp(alone.data, batch.ptr<float>() + r * n, size_t(n) * sizeof(float)) != 0;
    }
    if (scaling == Fp8Scaling::Tensor) EXPECT_EQ(differing, 4) << "the per-tensor scale follows the loud row";
    else EXPECT_EQ(differing, 0) << fp8_scaling_name(scaling);
  }
}

}  // namespace
}  // namespace fovea::test

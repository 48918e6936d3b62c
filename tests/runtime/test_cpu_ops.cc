// Each CpuBackend op against values computed by hand or by a naive loop written straight from backend.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"

namespace fovea {
namespace {

class CpuOps : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();

  Tensor make(const Shape& shape, const std::vector<float>& values) {
    Tensor t = be->alloc(DType::F32, shape);
    EXPECT_EQ(int64_t(values.size()), t.numel());
    std::copy(values.begin(), values.end(), t.ptr<float>());
    return t;
  }
  Tensor make_ids(const Shape& shape, const std::vector<int32_t>& values) {
    Tensor t = be->alloc(DType::I32, shape);
    std::copy(values.begin(), values.end(), t.ptr<int32_t>());
    return t;
  }
  Tensor random(const Shape& shape, uint32_t seed, float scale = 1.0f) {
    Tensor t = be->alloc(DType::F32, shape);
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = dist(rng);
    return t;
  }
  static std::vector<float> values(const Tensor& t) {
    return std::vector<float>(t.ptr<float>(), t.ptr<float>() + t.numel());
  }
};

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * (1.0 + std::abs(want[i]))) << i;
}

TEST_F(CpuOps, MemoryAccountingAndConversions) {
  const size_t before = be->memory_in_use();
  {
    Tensor t = be->alloc(DType::BF16, {3, 5});
    EXPECT_EQ(be->memory_in_use(), before + 30);
    Tensor host = Tensor::host(DType::F32, {3, 5});
    for (int i = 0; i < 15; ++i) host.ptr<float>()[i] = 1.0f + i / 256.0f;
    be->upload(t, host);
    Tensor back = be->download(t);
    EXPECT_EQ(back.dtype, DType::F32);
    for (int i = 0; i < 15; ++i) EXPECT_EQ(back.ptr<float>()[i], round_to_bf16(1.0f + i / 256.0f));
  }
  EXPECT_EQ(be->memory_in_use(), before);
  Tensor ids = make_ids({2}, {7, -3});
  Tensor ids_back = be->download(ids);
  EXPECT_EQ(ids_back.dtype, DType::I32);
  EXPECT_EQ(ids_back.ptr<int32_t>()[1], -3);
  Tensor wrong = be->alloc(DType::F32, {4});
  EXPECT_THROW(be->upload(wrong, Tensor::host(DType::F32, {5})), Error);
}

TEST_F(CpuOps, LinearHandComputed) {
  Tensor x = make({2, 3}, {1, 2, 3, -1, 0, 2});
  Tensor w = make({2, 3}, {1, 0, -1, 0.5f, 0.5f, 0.5f});
  Tensor b = make({2}, {10, 0});
  Tensor y = be->alloc(DType::F32, {2, 2});
  be->linear(x, w, b, y, Activation::None);
  expect_near_all(values(y), {10 + 1 - 3, 3, 10 - 1 - 2, 0.5}, 1e-6);
  be->linear(x, w, Tensor{}, y, Activation::Gelu);
  auto gelu = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
  expect_near_all(values(y), {gelu(-2), gelu(3), gelu(-3), gelu(0.5)}, 1e-6);
  Tensor bad = be->alloc(DType::F32, {2, 3});
  EXPECT_THROW(be->linear(x, w, b, bad, Activation::None), Error);
}

TEST_F(CpuOps, LinearMatchesNaiveOnOddShapes) {
  for (auto [M, N, K] : std::vector<std::array<int, 3>>{{1, 1, 1}, {7, 33, 300}, {75, 130, 17}, {5, 257, 513}}) {
    Tensor x = random({M, K}, 1), w = random({N, K}, 2), b = random({N}, 3);
    Tensor y = be->alloc(DType::F32, {M, N});
    be->linear(x, w, b, y, Activation::None);
    std::vector<double> want;
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double acc = b.ptr<float>()[n];
        for (int k = 0; k < K; ++k) acc += double(x.ptr<float>()[m * K + k]) * w.ptr<float>()[n * K + k];
        want.push_back(acc);
      }
    expect_near_all(values(y), want, 1e-4);
  }
}

TEST_F(CpuOps, LinearResidualAddsIntoY) {
  // y [2,2] += x [2,3] · w [2,3]^T + bias
  Tensor x = make({2, 3}, {1, 2, 3, -1, 0, 2}), w = make({2, 3}, {1, 0, 1, 0.5f, -1, 0});
  Tensor y = make({2, 2}, {10, 20, 30, 40});
  be->linear_residual(x, w, make({2}, {0.25f, -0.5f}), y);
  expect_near_all(values(y), {10 + 4 + 0.25, 20 - 1.5 - 0.5, 30 + 1 + 0.25, 40 - 0.5 - 0.5}, 1e-7);
  be->linear_residual(x, w, Tensor{}, y);
  expect_near_all(values(y), {18.25, 16.5, 32.25, 38.5}, 1e-7);
  EXPECT_THROW(be->linear_residual(x, w, Tensor{}, x), Error);
}

TEST_F(CpuOps, ScaleRowsScalesEachRowOrElement) {
  Tensor w = make({2, 3}, {1, 2, 3, 4, 5, 6});
  be->scale_rows(w, make({2}, {2, -0.5f}));
  expect_near_all(values(w), {2, 4, 6, -2, -2.5, -3}, 0);
  Tensor b = make({3}, {1, 2, 3});
  be->scale_rows(b, make({3}, {3, 0, -1}));
  expect_near_all(values(b), {3, 0, -3}, 0);
  EXPECT_THROW(be->scale_rows(w, make({3}, {1, 1, 1})), Error);
}

TEST_F(CpuOps, Norms) {
  Tensor x = make({2, 4}, {1, 2, 3, 4, -2, 0, 2, 4});
  Tensor g = make({4}, {1, 2, 1, 0.5f});
  Tensor b = make({4}, {0, 1, 0, -1});
  Tensor y = be->alloc(DType::F32, {2, 4});
  be->layer_norm(x, g, b, 1e-5f, y);
  // Row 0: mean 2.5, var 1.25. Row 1: mean 1, var 5.
  const double s0 = 1 / std::sqrt(1.25 + 1e-5), s1 = 1 / std::sqrt(5 + 1e-5);
  expect_near_all(
      values(y),
      {-1.5 * s0, -0.5 * s0 * 2 + 1, 0.5 * s0, 1.5 * s0 * 0.5 - 1, -3 * s1, -1 * s1 * 2 + 1, 1 * s1, 3 * s1 * 0.5 - 1},
      1e-6);
  be->rms_norm(x, g, 1e-6f, y);
  const double r0 = 1 / std::sqrt(30.0 / 4 + 1e-6), r1 = 1 / std::sqrt(24.0 / 4 + 1e-6);
  expect_near_all(values(y), {r0, 4 * r0, 3 * r0, 2 * r0, -2 * r1, 0, 2 * r1, 2 * r1}, 1e-6);
  Tensor residual = make({2, 4}, {0, 0, 0, 0, -1, -1, -1, -1});
  Tensor add = make({2, 4}, {1, 2, 3, 4, -1, 1, 3, 5});
  be->add_rms_norm(residual, add, g, 1e-6f, add);  // y aliasing x is allowed
  expect_near_all(values(residual), {1, 2, 3, 4, -2, 0, 2, 4}, 0);
  expect_near_all(values(add), {r0, 4 * r0, 3 * r0, 2 * r0, -2 * r1, 0, 2 * r1, 2 * r1}, 1e-6);
}

TEST_F(CpuOps, ScaleAddSiluMul) {
  Tensor x = make({2, 2}, {1, 2, 3, 4});
  be->scale_add(x, make({2, 2}, {1, 1, 2, 2}), make({2}, {0.5f, -1}));
  expect_near_all(values(x), {1.5, 1, 4, 2}, 0);
  be->scale_add(x, make({2, 2}, {1, 1, 1, 1}), Tensor{});
  expect_near_all(values(x), {2.5, 2, 5, 3}, 0);
  Tensor gu = make({1, 4}, {0, 2, 3, -1});
  Tensor y = be->alloc(DType::F32, {1, 2});
  be->silu_mul(gu, y);
  expect_near_all(values(y), {0.0, 2 / (1 + std::exp(-2.0)) * -1}, 1e-6);
}

// Index of the first element whose float32 bits differ, -1 when all agree (+0 vs -0 and NaN payloads count).
int64_t first_bit_difference(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.numel(), b.numel());
  for (int64_t i = 0; i < std::min(a.numel(), b.numel()); ++i)
    if (std::memcmp(a.ptr<float>() + i, b.ptr<float>() + i, sizeof(float)) != 0) return i;
  return a.numel() == b.numel() ? -1 : 0;
}

// scale_add_norm is specified as scale_add followed by the norm: the same bits in x and y, not merely close
// values, so that fusing it into the vision encoder leaves the encoder's output unchanged.
TEST_F(CpuOps, ScaleAddNormIsScaleAddThenNormBitForBit) {
  uint32_t seed = 100;
  const int64_t rows = 5;
  for (int64_t width : {13, 1024, 3200}) {  // odd, InternViT-300M, InternViT-6B
    for (NormKind kind : {NormKind::Layer, NormKind::Rms}) {
      for (bool scaled : {true, false}) {
        const std::string what = std::string(kind == NormKind::Layer ? "layer" : "rms") + " N=" +
                                 std::to_string(width) + (scaled ? " scaled" : " unscaled");
        // A residual an order larger than its branch and small layer scales, as in a ViT's residual stream.
        Tensor x = random({rows, width}, ++seed, 8.0f), branch = random({rows, width}, ++seed);
        Tensor scale = scaled ? random({width}, ++seed, 0.1f) : Tensor{}, gamma = random({width}, ++seed);
        Tensor beta = kind == NormKind::Layer ? random({width}, ++seed) : Tensor{};
        Tensor want_x = make({rows, width}, values(x)), want_y = be->alloc(DType::F32, {rows, width});
        be->scale_add(want_x, branch, scale);
        if (kind == NormKind::Layer) be->layer_norm(want_x, gamma, beta, 1e-6f, want_y);
        else be->rms_norm(want_x, gamma, 1e-6f, want_y);

        Tensor y = be->alloc(DType::F32, {rows, width});
        be->scale_add_norm(x, branch, scale, kind, gamma, beta, 1e-6f, y);
        EXPECT_EQ(first_bit_difference(x, want_x), -1) << what << ": residual";
        EXPECT_EQ(first_bit_difference(y, want_y), -1) << what << ": output";

        // A second update of both residuals, now with y in branch's place.
        Tensor x2 = make({rows, width}, values(x)), branch2 = make({rows, width}, values(branch));
        be->scale_add(want_x, branch, scale);
        be->scale_add_norm(x2, branch2, scale, kind, gamma, beta, 1e-6f, branch2);
        EXPECT_EQ(first_bit_difference(x2, want_x), -1) << what << ": residual, y aliasing branch";
        if (kind == NormKind::Layer) be->layer_norm(want_x, gamma, beta, 1e-6f, want_y);
        else be->rms_norm(want_x, gamma, 1e-6f, want_y);
        EXPECT_EQ(first_bit_difference(branch2, want_y), -1) << what << ": output, y aliasing branch";
      }
    }
  }
}

TEST_F(CpuOps, ScaleAddNormRefusesBadArguments) {
  Tensor x = random({2, 4}, 1), branch = random({2, 4}, 2), gamma = random({4}, 3), beta = random({4}, 4);
  Tensor y = be->alloc(DType::F32, {2, 4});
  EXPECT_THROW(be->scale_add_norm(x, branch, Tensor{}, NormKind::Layer, gamma, beta, 1e-6f, x), Error);
  EXPECT_THROW(be->scale_add_norm(x, branch, Tensor{}, NormKind::Rms, gamma, beta, 1e-6f, y), Error);
  EXPECT_THROW(be->scale_add_norm(x, branch, Tensor{}, NormKind::Layer, gamma, Tensor{}, 1e-6f, y), Error);
  EXPECT_THROW(be->scale_add_norm(x, random({3, 4}, 5), Tensor{}, NormKind::Rms, gamma, Tensor{}, 1e-6f, y), Error);
  EXPECT_THROW(be->scale_add_norm(x, branch, random({3}, 6), NormKind::Rms, gamma, Tensor{}, 1e-6f, y), Error);
}

TEST_F(CpuOps, EmbeddingScatterGather) {
  Tensor table = make({3, 2}, {0, 1, 10, 11, 20, 21});
  Tensor y = be->alloc(DType::F32, {3, 2});
  be->embedding(make_ids({3}, {2, 0, 2}), table, y);
  expect_near_all(values(y), {20, 21, 0, 1, 20, 21}, 0);
  EXPECT_THROW(be->embedding(make_ids({3}, {2, 3, 0}), table, y), Error);
  be->scatter_rows(make({2, 2}, {-1, -2, -3, -4}), make_ids({2}, {2, 0}), y);
  expect_near_all(values(y), {-3, -4, 0, 1, -1, -2}, 0);
  EXPECT_THROW(be->scatter_rows(make({1, 2}, {0, 0}), make_ids({1}, {3}), y), Error);
  Tensor g = be->alloc(DType::F32, {2, 2});
  be->gather_rows(y, make_ids({2}, {1, 1}), g);
  expect_near_all(values(g), {0, 1, 0, 1}, 0);
  EXPECT_THROW(be->gather_rows(y, make_ids({2}, {1, -1}), g), Error);
}

TEST_F(CpuOps, PatchifyAndVitEmbed) {
  // One 3×4×4 image, patch 2: value = c*100 + y*10 + x.
  std::vector<float> px;
  for (int c = 0; c < 3; ++c)
    for (int yy = 0; yy < 4; ++yy)
      for (int xx = 0; xx < 4; ++xx) px.push_back(float(c * 100 + yy * 10 + xx));
  Tensor patches = be->alloc(DType::F32, {4, 12});
  be->patchify(make({1, 3, 4, 4}, px), 2, patches);
  // Patch 1 is (py 0, px 1): channel-major, then ky, then kx.
  expect_near_all(std::vector<float>(patches.ptr<float>() + 12, patches.ptr<float>() + 24),
                  {2, 3, 12, 13, 102, 103, 112, 113, 202, 203, 212, 213}, 0);
  Tensor emb = make({4, 1}, {1, 2, 3, 4});  // batch 2, P = 2
  Tensor out = be->alloc(DType::F32, {6, 1});
  be->vit_embed(emb, make({1}, {100}), make({3, 1}, {10, 20, 30}), 2, out);
  expect_near_all(values(out), {110, 21, 32, 110, 23, 34}, 0);
}

// Literal transcription of InternVL's pixel_shuffle (view/permute/view/permute) on index arithmetic.
std::vector<float> reference_pixel_shuffle(const std::vector<float>& x, int grid, int C) {
  const int W = grid, H = grid;  // x viewed as [W, H, C] (n = 1)
  // view(W, H/2, 2C) -> permute(1,0,2): [H/2, W, 2C] -> view(H/2, W/2, 4C) -> permute(1,0,2): [W/2, H/2, 4C]
  std::vector<float> y(size_t(W / 2) * (H / 2) * 4 * C);
  for (int a = 0; a < W / 2; ++a)
    for (int b = 0; b < H / 2; ++b)
      for (int m = 0; m < 4 * C; ++m) {
        // y[a][b][m] = x3[b][a][m] = x2[b][2a + m/(2C)][m%(2C)] = x1[2a + m/(2C)][b][m%(2C)]
        const int w = 2 * a + m / (2 * C), k = m % (2 * C);
        const int h = 2 * b + k / C, c = k % C;
        y[(size_t(a) * (H / 2) + b) * 4 * C + m] = x[(size_t(w) * H + h) * C + c];
      }
  return y;
}

TEST_F(CpuOps, PixelShuffleMatchesReferenceOrder) {
  const int grid = 4, C = 3, batch = 2;
  Tensor x = random({batch * (1 + grid * grid), C}, 7);
  Tensor y = be->alloc(DType::F32, {batch * 4, 4 * C});
  be->pixel_shuffle(x, batch, grid, y);
  for (int b = 0; b < batch; ++b) {
    const float* img = x.ptr<float>() + (b * (1 + grid * grid) + 1) * C;  // CLS dropped
    auto want = reference_pixel_shuffle(std::vector<float>(img, img + grid * grid * C), grid, C);
    std::vector<float> got(y.ptr<float>() + b * 4 * 4 * C, y.ptr<float>() + (b + 1) * 4 * 4 * C);
    EXPECT_EQ(got, want);
  }
}

TEST_F(CpuOps, AttentionDenseHandComputed) {
  // 1 image, 2 tokens, 1 head, D = 1 (scale 1): q = [1, 0], k = [0, ln 3], v = [2, 6].
  Tensor qkv = make({2, 3}, {1, 0, 2, 0, std::log(3.0f), 6});
  Tensor out = be->alloc(DType::F32, {2, 1});
  be->attention_dense(qkv, 1, 2, 1, 1, out);
  // token 0: scores [0, ln3] -> weights [1/4, 3/4] -> 5; token 1: scores [0, 0] -> 4.
  expect_near_all(values(out), {5, 4}, 1e-6);
}

// Naive softmax(q·k * scale) v over keys [0, n) of one head; rows are (pointer, stride) pairs.
std::vector<double> naive_attention_row(const float* q, const std::vector<const float*>& keys,
                                        const std::vector<const float*>& values, int D) {
  std::vector<double> s;
  double max_s = -INFINITY;
  for (const float* k : keys) {
    double d = 0;
    for (int i = 0; i < D; ++i) d += double(q[i]) * k[i];
    s.push_back(d / std::sqrt(double(D)));
    max_s = std::max(max_s, s.back());
  }
  double sum = 0;
  for (double& e : s) sum += (e = std::exp(e - max_s));
  std::vector<double> out(size_t(D), 0.0);
  for (size_t j = 0; j < keys.size(); ++j)
    for (int i = 0; i < D; ++i) out[size_t(i)] += s[j] / sum * values[j][i];
  return out;
}

TEST_F(CpuOps, AttentionDenseMatchesNaiveOnOddShapes) {
  const int B = 2, T = 37, H = 3, D = 8, W = 3 * H * D;  // T crosses the 32-query blocks
  Tensor qkv = random({B * T, W}, 21, 2.0f);
  Tensor out = be->alloc(DType::F32, {B * T, H * D});
  be->attention_dense(qkv, B, T, H, D, out);
  std::vector<double> want;
  const float* r = qkv.ptr<float>();
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) {
        std::vector<const float*> keys, values;
        for (int j = 0; j < T; ++j) {
          keys.push_back(r + (b * T + j) * W + H * D + h * D);
          values.push_back(r + (b * T + j) * W + 2 * H * D + h * D);
        }
        for (double v : naive_attention_row(r + (b * T + t) * W + h * D, keys, values, D)) want.push_back(v);
      }
  expect_near_all(values(out), want, 1e-5);
}

// Two sequences in one step: a 21-token chunk continuing 5 cached positions (crossing the 16-token task blocks)
// and a decode token at position 9, GQA with 3 q heads per kv head, block size 4, scattered blocks.
TEST_F(CpuOps, PagedAttentionMixedBatchMatchesNaive) {
  const int H = 6, KV = 2, D = 4, bs = 4, blocks = 16, W = (H + 2 * KV) * D;
  KvCacheLayer cache{random({blocks, bs, KV, D}, 31), random({blocks, bs, KV, D}, 32)};
  const std::vector<int32_t> table0{3, 9, 0, 12, 5, 7, 1}, table1{14, 2, 11};
  Tensor qkv = random({22, W}, 33, 1.5f);
  // Write the new tokens' K/V like the runner does (positions 5..25 of seq 0, 9 of seq 1).
  std::vector<int32_t> slots;
  for (int p = 5; p < 26; ++p) slots.push_back(table0[size_t(p / bs)] * bs + p % bs);
  slots.push_back(table1[9 / bs] * bs + 9 % bs);
  be->kv_write(qkv, make_ids({22}, slots), H, KV, D, cache);
  std::vector<int32_t> flat(table0);
  flat.insert(flat.end(), table1.begin(), table1.end());
  flat.insert(flat.end(), 4, 0);  // pad seq 1's row to width 7
  PagedAttentionBatch batch{make_ids({3}, {0, 21, 22}), make_ids({2}, {26, 10}), make_ids({2, 7}, {}), 2, 21, 26};
  std::copy(table0.begin(), table0.end(), batch.block_table.ptr<int32_t>());
  std::copy(table1.begin(), table1.end(), batch.block_table.ptr<int32_t>() + 7);
  std::fill_n(batch.block_table.ptr<int32_t>() + 10, 4, 0);
  Tensor out = be->alloc(DType::F32, {22, H * D});
  be->paged_attention(qkv, batch, cache, H, KV, D, out);
  std::vector<double> want;
  for (int t = 0; t < 22; ++t) {
    const bool first = t < 21;
    const int pos = first ? 5 + t : 9;
    const auto& table = first ? table0 : table1;
    for (int h = 0; h < H; ++h) {
      std::vector<const float*> keys, values;
      for (int p = 0; p <= pos; ++p) {
        const int64_t row = (int64_t(table[size_t(p / bs)]) * bs + p % bs) * KV + h / (H / KV);
        keys.push_back(cache.k.ptr<float>() + row * D);
        values.push_back(cache.v.ptr<float>() + row * D);
      }
      for (double v : naive_attention_row(qkv.ptr<float>() + t * W + h * D, keys, values, D)) want.push_back(v);
    }
  }
  expect_near_all(values(out), want, 1e-5);
}

TEST_F(CpuOps, RopeRotatesHalves) {
  // heads 1, kv 1, D 4: q and k rotated, v untouched. theta 100: inv_freq = [1, 0.1].
  Tensor qkv = make({1, 12}, {1, 2, 3, 4, 1, 0, 0, 1, 9, 9, 9, 9});
  be->rope(qkv, make_ids({1}, {2}), 1, 1, 4, 100.0f);
  const double c0 = std::cos(2.0), s0 = std::sin(2.0), c1 = std::cos(0.2), s1 = std::sin(0.2);
  expect_near_all(values(qkv),
                  {1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1, c0, -s1, s0, c1, 9, 9, 9, 9},
                  1e-6);
}

// Builds a paged cache with block size 2 and checks decode/prefill attention against dense math.
TEST_F(CpuOps, KvWriteAndPagedAttentionGqa) {
  const int H = 4, KV = 2, D = 3, blocks = 5, bs = 2, T = 3;  // one sequence, 3 tokens, blocks {4, 1}
  KvCacheLayer cache{be->alloc(DType::F32, {blocks, bs, KV, D}), be->alloc(DType::F32, {blocks, bs, KV, D})};
  be->fill_zero(cache.k);
  be->fill_zero(cache.v);
  Tensor qkv = random({T, (H + 2 * KV) * D}, 11);
  be->kv_write(qkv, make_ids({T}, {8, 9, 2}), H, KV, D, cache);
  EXPECT_EQ(cache.k.ptr<float>()[(9 * KV + 1) * D + 2], qkv.ptr<float>()[1 * (H + 2 * KV) * D + H * D + D + 2]);
  EXPECT_THROW(be->kv_write(qkv, make_ids({T}, {8, 9, 10}), H, KV, D, cache), Error);
  PagedAttentionBatch batch{make_ids({2}, {0, T}), make_ids({1}, {T}), make_ids({1, 3}, {4, 1, 0}), 1, T, T};
  Tensor out = be->alloc(DType::F32, {T, H * D});
  be->paged_attention(qkv, batch, cache, H, KV, D, out);
  const int W = (H + 2 * KV) * D;
  const float* r = qkv.ptr<float>();
  std::vector<double> want;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const int kvh = h / (H / KV);
      std::vector<double> s;
      for (int p = 0; p <= t; ++p) {
        double dotv = 0;
        for (int d = 0; d < D; ++d) dotv += double(r[t * W + h * D + d]) * r[p * W + H * D + kvh * D + d];
        s.push_back(std::exp(dotv / std::sqrt(double(D))));
      }
      double sum = 0;
      for (double e : s) sum += e;
      for (int d = 0; d < D; ++d) {
        double o = 0;
        for (int p = 0; p <= t; ++p) o += s[p] / sum * r[p * W + H * D + KV * D + kvh * D + d];
        want.push_back(o);
      }
    }
  expect_near_all(values(out), want, 1e-5);
  // Decode of the last token alone (q_len 1, ctx 3) gives the same row.
  Tensor last = be->alloc(DType::F32, {1, W});
  std::copy_n(r + 2 * W, W, last.ptr<float>());
  PagedAttentionBatch decode{make_ids({2}, {0, 1}), make_ids({1}, {T}), make_ids({1, 2}, {4, 1}), 1, 1, T};
  Tensor out1 = be->alloc(DType::F32, {1, H * D});
  be->paged_attention(last, decode, cache, H, KV, D, out1);
  for (int i = 0; i < H * D; ++i) EXPECT_NEAR(out1.ptr<float>()[i], out.ptr<float>()[2 * H * D + i], 1e-6);
  PagedAttentionBatch bad{make_ids({2}, {0, 1}), make_ids({1}, {5}), make_ids({1, 2}, {4, 1}), 1, 1, 5};
  EXPECT_THROW(be->paged_attention(last, bad, cache, H, KV, D, out1), Error);
}

TEST_F(CpuOps, ArgmaxAndLogSoftmaxGather) {
  Tensor logits = make({2, 3}, {1, 3, 3, 0, 0, std::log(2.0f)});
  Tensor ids = be->alloc(DType::I32, {2});
  be->argmax(logits, ids);
  EXPECT_EQ(ids.ptr<int32_t>()[0], 1);  // lowest index on ties
  EXPECT_EQ(ids.ptr<int32_t>()[1], 2);
  Tensor out = be->alloc(DType::F32, {2, 2});
  be->log_softmax_gather(logits, make_ids({2, 2}, {0, 2, 2, 0}), out);
  const double z0 = std::log(std::exp(1.0) + 2 * std::exp(3.0));
  expect_near_all(values(out), {1 - z0, 3 - z0, std::log(0.5), std::log(0.25)}, 1e-6);
}

}  // namespace
}  // namespace fovea

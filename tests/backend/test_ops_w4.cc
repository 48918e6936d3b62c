// linear_w4 (W4A16), CPU reference vs CUDA, on random packed weights in the W4Weight layout: decode-sized M on
// the fused kernel (with and without K splits), prefill-sized M and shapes the fused kernel refuses on
// dequantize + cuBLASLt, groups 16-128, act-order permutations, bias, N not a multiple of 128. Two exactness
// checks besides the normalised error: unit-vector rows of x make y the dequantized weight itself (every kernel
// must produce the host's bf16 bits), and the large-M path equals linear() on that weight bit for bit.
#include <cstring>
#include <string>
#include <vector>

#include "backend/w4_layout.h"
#include "ops_harness.h"

namespace fovea::test {
namespace {

class OpsW4Test : public OpsTest {
 protected:
  struct W4Twin {
    Twin codes, params, perm, inverse_perm;
    W4Weight cpu, gpu;
    Tensor workspace_gpu;
  };

  // Random codes and zero points; F16 scales with all 11 significant bits used (so the kernel's s_hi + s_lo split
  // matters), every seventh group a BF16 scale instead.
  W4Twin random_w4(int64_t n, int64_t k, int64_t group, bool act_order) {
    W4Twin w;
    const int64_t words = w4::code_words(k), groups = k / group;
    std::uniform_int_distribution<uint32_t> bits;
    Tensor codes = Tensor::host(DType::I32, {n, words}), params = Tensor::host(DType::I32, {n, groups});
    for (int64_t i = 0; i < codes.numel(); ++i) codes.ptr<uint32_t>()[i] = bits(rng_);
    std::uniform_real_distribution<float> scale(2e-3f, 4e-2f);
    for (int64_t i = 0; i < params.numel(); ++i) {
      const bool bf16 = i % 7 == 3;
      const float s = scale(rng_);
      params.ptr<uint32_t>()[i] = w4::make_param(bf16 ? f32_to_bf16(s) : f32_to_f16(s), bf16, int(bits(rng_) % 16));
    }
    w.codes = twin(codes, 'i');
    w.params = twin(params, 'i');
    for (W4Weight* side : {&w.cpu, &w.gpu}) {
      side->k = k;
      side->group = group;
    }
    w.cpu.codes = w.codes.cpu;
    w.cpu.params = w.params.cpu;
    w.gpu.codes = w.codes.gpu;
    w.gpu.params = w.params.gpu;
    if (act_order) {
      const std::vector<int32_t> perm = permutation(int(k));
      std::vector<int32_t> inverse(perm.size());
      for (size_t c = 0; c < perm.size(); ++c) inverse[size_t(perm[c])] = int32_t(c);
      w.perm = twin(int_host(perm), 'i');
      w.inverse_perm = twin(int_host(inverse), 'i');
      w.cpu.perm = w.perm.cpu;
      w.cpu.inverse_perm = w.inverse_perm.cpu;
      w.gpu.perm = w.perm.gpu;
      w.gpu.inverse_perm = w.inverse_perm.gpu;
    }
    w.workspace_gpu = gpu_->alloc(DType::U8, {int64_t(gpu_->linear_w4_workspace_bytes(n, k, group, act_order))});
    return w;
  }

  void run_both(const Twin& x, W4Twin& w, const Tensor& bias_cpu, const Tensor& bias_gpu, Twin& y) {
    Tensor none;
    cpu_->linear_w4(x.cpu, w.cpu, bias_cpu, y.cpu, none);
    gpu_->linear_w4(x.gpu, w.gpu, bias_gpu, y.gpu, w.workspace_gpu);
  }

  void expect_bitwise(const Twin& y, const std::string& what) {
    const Tensor a = gpu_->download(y.gpu), b = cpu_->download(y.cpu);
    int64_t differ = 0;
    for (int64_t i = 0; i < a.numel(); ++i) differ += a.ptr<float>()[i] != b.ptr<float>()[i];
    EXPECT_EQ(differ, 0) << what << " (seed " << seed_ << "): " << differ << " of " << a.numel() << " differ";
  }
};

struct Shape3 {
  int64_t n, k, group;
};

TEST_F(OpsW4Test, LinearW4MatchesTheReference) {
  const Shape3 shapes[] = {
      {256, 256, 32},    // fused, several groups per stage
      {384, 512, 64},    // fused
      {200, 384, 128},   // fused, N past the last 128-row tile
      {256, 4096, 128},  // fused, few N tiles: K split over many blocks
      {512, 1024, 16},   // fused, a group per 16-column step
      {128, 96, 32},     // K not a multiple of 128: dequantize + cuBLASLt at every M
      {64, 176, 16},     // the demo's down projection (a short 16-column chunk)
      {1536, 576, 64},   // SmolLM2-135M's gate / up (K = 576 = 4.5 x 128)
      {576, 1536, 32},   // its down projection
      {192, 576, 64},    // its k / v projections
  };
  for (const Shape3& s : shapes) {
    for (bool act_order : {false, true}) {
      W4Twin w = random_w4(s.n, s.k, s.group, act_order);
      Twin bias = twin(random_host({s.n}), 'w');
      for (int64_t m : {1, 7, 16, 17, 33, 64, 65, 70, 203}) {
        const bool with_bias = m % 2 == 1;
        Twin x = twin(random_host({m, s.k}));
        Twin y = output({m, s.n});
        run_both(x, w, with_bias ? bias.cpu : Tensor{}, with_bias ? bias.gpu : Tensor{}, y);
        expect_close(y, kBf16Tol,
                     "linear_w4 M=" + std::to_string(m) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) +
                         " group " + std::to_string(s.group) + (act_order ? " act-order" : "") +
                         (with_bias ? " +bias" : ""));
      }
    }
  }
}

// x = rows of the identity (one 1 per row, the rest 0): y[m, :] is column j_m of the dequantized W, an exact f32
// sum whatever the order or split, so every path must give the host's bf16 values exactly: each fused tiling
// (M = 13, 20, 64: one, two and four 16-row x tiles; groups 16 to 128: 8, 4, 2, 1 groups per stage) and the
// dequantization at M = 130 (v2: one thread per 32-column chunk, whose two 16-column steps lie in two groups at
// group 16; the per-column kernel for act-order and for K = 176, not a multiple of 32).
TEST_F(OpsW4Test, LinearW4DequantizesExactly) {
  for (const Shape3& s : {Shape3{256, 4096, 128}, Shape3{384, 512, 32}, Shape3{128, 96, 32}, Shape3{256, 1024, 16},
                          Shape3{200, 768, 64}, Shape3{64, 176, 16}}) {
    for (bool act_order : {false, true}) {
      W4Twin w = random_w4(s.n, s.k, s.group, act_order);
      for (int64_t m : {13, 20, 64, 130}) {
        Tensor x_host = Tensor::host(DType::F32, {m, s.k});
        for (int64_t r = 0; r < m; ++r) x_host.ptr<float>()[r * s.k + (r * 37 + 5) % s.k] = 1.f;
        Twin x = twin(x_host), y = output({m, s.n});
        run_both(x, w, Tensor{}, Tensor{}, y);
        expect_bitwise(y, "unit rows M=" + std::to_string(m) + " N=" + std::to_string(s.n) +
                              " K=" + std::to_string(s.k) + (act_order ? " act-order" : ""));
      }
    }
  }
}

// Above the fused kernel's rows, linear_w4 is the dequantized weight through the same cuBLASLt call as linear():
// equal bits. The split-K sum has a fixed order: two runs give equal bits too.
TEST_F(OpsW4Test, LinearW4LargeMIsLinearAndDecodeIsDeterministic) {
  const Shape3 s{384, 1024, 64};
  W4Twin w = random_w4(s.n, s.k, s.group, true);
  // W itself, [N, K]: the CPU reference applied to the identity.
  Tensor eye = Tensor::host(DType::F32, {s.k, s.k});
  for (int64_t i = 0; i < s.k; ++i) eye.ptr<float>()[i * s.k + i] = 1.f;
  Tensor wt = cpu_->alloc(DType::F32, {s.k, s.n}), none;
  Tensor eye_cpu = cpu_->alloc(DType::F32, {s.k, s.k});
  cpu_->upload(eye_cpu, eye);
  cpu_->linear_w4(eye_cpu, w.cpu, Tensor{}, wt, none);  // wt[k, n] = W[n, k]
  Tensor dense = Tensor::host(DType::F32, {s.n, s.k});
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t k = 0; k < s.k; ++k) dense.ptr<float>()[n * s.k + k] = wt.ptr<float>()[k * s.n + n];
  Twin weight = twin(dense, 'w'), x = twin(random_host({300, s.k}));
  Twin y = output({300, s.n});
  gpu_->linear(x.gpu, weight.gpu, Tensor{}, y.gpu);
  const Tensor via_linear = gpu_->download(y.gpu);
  gpu_->linear_w4(x.gpu, w.gpu, Tensor{}, y.gpu, w.workspace_gpu);
  const Tensor via_w4 = gpu_->download(y.gpu);
  EXPECT_EQ(std::memcmp(via_linear.data, via_w4.data, via_w4.nbytes()), 0) << "M=300 (seed " << seed_ << ")";

  Twin small = twin(random_host({48, s.k})), out = output({48, s.n});
  gpu_->linear_w4(small.gpu, w.gpu, Tensor{}, out.gpu, w.workspace_gpu);
  const Tensor first = gpu_->download(out.gpu);
  gpu_->linear_w4(small.gpu, w.gpu, Tensor{}, out.gpu, w.workspace_gpu);
  const Tensor second = gpu_->download(out.gpu);
  EXPECT_EQ(std::memcmp(first.data, second.data, first.nbytes()), 0) << "a second decode-sized run differs";
}

TEST_F(OpsW4Test, LinearW4RefusesASmallWorkspace) {
  W4Twin w = random_w4(256, 512, 64, false);
  Twin x = twin(random_host({4, 512})), y = output({4, 256});
  Tensor tiny = gpu_->alloc(DType::U8, {16});
  EXPECT_THROW(gpu_->linear_w4(x.gpu, w.gpu, Tensor{}, y.gpu, tiny), Error);
}

}  // namespace
}  // namespace fovea::test

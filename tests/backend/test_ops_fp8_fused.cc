// The fused producers of a per-token FP8 activation (Backend::scale_add_norm_fp8 and its LLM form add_rms_norm_fp8,
// silu_mul_fp8) and the GEMM that takes it (linear_fp8_rows, with GELU for the ViT's fc1): on every backend they must
// give exactly what the separate ops give (the norm or SiLU·mul in the compute dtype, then linear_fp8_scaled's own
// Channel quantization), so switching the forward to them changes no answer. CPU cases run everywhere; the CUDA ones
// compare the fused kernels with the separate CUDA kernels bit for bit, and with the CPU reference to FP8 precision.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/fp8_recipe.h"
#include "core/dtype.h"
#include "ops_harness.h"

namespace fovea::test {
namespace {

Tensor random_matrix(std::mt19937& rng, int64_t rows, int64_t cols, float range) {
  std::uniform_real_distribution<float> dist(-range, range);
  Tensor t = Tensor::host(DType::F32, {rows, cols});
  for (int64_t r = 0; r < rows; ++r)  // rows of different loudness: every row scale counts
    for (int64_t c = 0; c < cols; ++c) t.ptr<float>()[r * cols + c] = dist(rng) * float(1 + r % 5);
  return t;
}

Tensor copy_of(const Tensor& t) {
  Tensor c = Tensor::host(t.dtype, t.shape);
  std::memcpy(c.data, t.data, t.nbytes());
  return c;
}

// E4M3 codes on the host, all NaN (0x7f): any code a kernel leaves unwritten shows.
Tensor nan_codes(const Shape& shape) {
  Tensor t = Tensor::host(DType::F8E4M3, shape);
  std::memset(t.data, 0x7f, t.nbytes());
  return t;
}

Fp8Rows host_rows(int64_t rows, int64_t cols) {
  return {Tensor::host(DType::F8E4M3, {rows, cols}), Tensor::host(DType::F32, {rows})};
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

// codes and scales against the per-row definition, computed here without core's quantizer: scale = max|v| / 448
// (1 for a zero row), code = f32_to_e4m3(v / scale).
void expect_row_quantization_of(const Tensor& v, const Fp8Rows& q, const std::string& what) {
  const int64_t rows = v.dim(0), cols = v.dim(1);
  for (int64_t r = 0; r < rows; ++r) {
    float absmax = 0.f;
    for (int64_t c = 0; c < cols; ++c) absmax = std::max(absmax, std::fabs(v.ptr<float>()[r * cols + c]));
    const float scale = absmax > 0.f ? absmax / 448.f : 1.f;
    ASSERT_EQ(q.scales.ptr<float>()[r], scale) << what << " row " << r;
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(q.codes.ptr<uint8_t>()[r * cols + c], f32_to_e4m3(v.ptr<float>()[r * cols + c] / scale))
          << what << " row " << r << " col " << c;
  }
}

// The CPU reference: norm (with and without the residual add) and SiLU·mul, each fused form against the separate
// ops; linear_fp8_rows against linear_fp8_scaled(Channel) on the activation it was quantized from, with a bias.
TEST(CpuFp8Fused, ProducersAndGemmEqualTheSeparateOps) {
  auto cpu = make_cpu_backend();
  std::mt19937 rng(31);
  const int64_t m = 7, h = 320, f = 192, n = 136;
  const Tensor residual = random_matrix(rng, m, h, 2.f), add = random_matrix(rng, m, h, 1.f);
  const Tensor gamma = random_matrix(rng, 1, h, 1.f).view({h}), bias = random_matrix(rng, 1, n, 1.f).view({n});
  const Fp8HostWeight wq = quantize_fp8_weight(random_matrix(rng, n, h, 0.2f), Fp8Scaling::Channel);
  for (const bool with_add : {true, false}) {
    const std::string what = with_add ? "add_rms_norm_fp8" : "rms_norm_fp8";
    Tensor res_a = copy_of(residual), res_b = copy_of(residual), normed = Tensor::host(DType::F32, {m, h});
    if (with_add) {
      cpu->add_rms_norm(res_a, add, gamma, 1e-6f, normed);
    } else {
      cpu->rms_norm(res_a, gamma, 1e-6f, normed);
    }
    Fp8Rows q = host_rows(m, h);
    cpu->add_rms_norm_fp8(res_b, with_add ? add : Tensor{}, gamma, 1e-6f, q);
    EXPECT_TRUE(same_bits(res_a, res_b)) << what << ": the residual update";
    if (!with_add) {
      EXPECT_TRUE(same_bits(res_b, residual)) << what << " changed the residual";
    }
    expect_row_quantization_of(normed, q, what);
    Tensor y_a = Tensor::host(DType::F32, {m, n}), y_b = Tensor::host(DType::F32, {m, n});
    cpu->linear_fp8_scaled(normed, wq.codes, wq.scale, Fp8Scaling::Channel, bias, y_a);
    cpu->linear_fp8_rows(q, wq.codes, wq.scale, bias, y_b);
    EXPECT_TRUE(same_bits(y_a, y_b)) << what << " then linear_fp8_rows";
  }
  const Tensor gate_up = random_matrix(rng, m, 2 * f, 3.f);
  Tensor act = Tensor::host(DType::F32, {m, f});
  cpu->silu_mul(gate_up, act);
  Fp8Rows q = host_rows(m, f);
  cpu->silu_mul_fp8(gate_up, q);
  expect_row_quantization_of(act, q, "silu_mul_fp8");
  // Wrong shapes are refused, not read past.
  Fp8Rows narrow = host_rows(m, f - 16);
  EXPECT_THROW(cpu->silu_mul_fp8(gate_up, narrow), Error);
  Fp8Rows short_scales{Tensor::host(DType::F8E4M3, {m, h}), Tensor::host(DType::F32, {m - 1})};
  Tensor res = copy_of(residual);
  EXPECT_THROW(cpu->add_rms_norm_fp8(res, add, gamma, 1e-6f, short_scales), Error);
  Tensor y = Tensor::host(DType::F32, {m, n});
  EXPECT_THROW(cpu->linear_fp8_rows(host_rows(m, h + 16), wq.codes, wq.scale, Tensor{}, y), Error);
}

// The ViT's forms on the CPU reference: LayerNorm and RMSNorm, with the layer-scaled residual add, a plain add and
// none (the first layer's norm), each against scale_add_norm / the plain norm followed by the row quantization;
// linear_fp8_rows with bias and GELU against linear_fp8_scaled(Channel, GELU).
TEST(CpuFp8Fused, VitNormProducersAndGeluGemmEqualTheSeparateOps) {
  auto cpu = make_cpu_backend();
  std::mt19937 rng(37);
  const int64_t m = 9, h = 256, n = 96;
  const Tensor x0 = random_matrix(rng, m, h, 2.f), branch = random_matrix(rng, m, h, 1.f);
  const Tensor scale = random_matrix(rng, 1, h, 0.5f).view({h}), gamma = random_matrix(rng, 1, h, 1.f).view({h});
  const Tensor beta = random_matrix(rng, 1, h, 0.3f).view({h}), bias = random_matrix(rng, 1, n, 1.f).view({n});
  const Fp8HostWeight wq = quantize_fp8_weight(random_matrix(rng, n, h, 0.2f), Fp8Scaling::Channel);
  for (const NormKind kind : {NormKind::Layer, NormKind::Rms}) {
    const Tensor b = kind == NormKind::Layer ? beta : Tensor{};
    for (const int form : {0, 1, 2}) {  // 0: no branch, 1: plain add, 2: layer-scaled add
      const std::string what = std::string(kind == NormKind::Layer ? "layer" : "rms") + " form " +
                               std::to_string(form);
      Tensor x_a = copy_of(x0), x_b = copy_of(x0), normed = Tensor::host(DType::F32, {m, h});
      const Tensor br = form == 0 ? Tensor{} : branch, sc = form == 2 ? scale : Tensor{};
      if (form != 0) cpu->scale_add_norm(x_a, br, sc, kind, gamma, b, 1e-6f, normed);
      else if (kind == NormKind::Layer) cpu->layer_norm(x_a, gamma, b, 1e-6f, normed);
      else cpu->rms_norm(x_a, gamma, 1e-6f, normed);
      Fp8Rows q = host_rows(m, h);
      cpu->scale_add_norm_fp8(x_b, br, sc, kind, gamma, b, 1e-6f, q);
      EXPECT_TRUE(same_bits(x_a, x_b)) << what << ": the residual update";
      expect_row_quantization_of(normed, q, what);
      Tensor y_a = Tensor::host(DType::F32, {m, n}), y_b = Tensor::host(DType::F32, {m, n});
      cpu->linear_fp8_scaled(normed, wq.codes, wq.scale, Fp8Scaling::Channel, bias, y_a, Activation::Gelu);
      cpu->linear_fp8_rows(q, wq.codes, wq.scale, bias, y_b, Activation::Gelu);
      EXPECT_TRUE(same_bits(y_a, y_b)) << what << " then linear_fp8_rows with GELU";
    }
  }
  Fp8Rows q = host_rows(m, h);
  Tensor x = copy_of(x0);
  EXPECT_THROW(cpu->scale_add_norm_fp8(x, branch, scale, NormKind::Rms, gamma, beta, 1e-6f, q), Error)
      << "RMSNorm takes no beta";
}

// CUDA: the fused kernels against the separate CUDA kernels (residual, then the GEMM output: bit-identical) and
// against the CPU reference (FP8 precision: the reference normalises in float32, CUDA rounds to bf16 first, so a
// few codes may differ by one step). Widths of the real models (InternLM2/Qwen 4096 / 14336, SmolLM2 576 /
// 1536, InternViT-6B-sized 3200) and decode- to prefill-sized M.
TEST_F(OpsTest, Fp8RowProducersMatchTheSeparateKernels) {
  struct Case {
    int m, h, f, n;
  };
  for (Case c : {Case{1, 576, 1536, 960}, Case{5, 4096, 14336, 512}, Case{64, 3200, 1024, 256},
                 Case{300, 1024, 2816, 1024}, Case{33, 576, 1536, 64}}) {
    const std::string shape = " M=" + std::to_string(c.m) + " H=" + std::to_string(c.h);
    const Fp8HostWeight wq = quantize_fp8_weight(random_host({c.n, c.h}, -0.1f, 0.1f), Fp8Scaling::Channel);
    const Fp8HostWeight wd = quantize_fp8_weight(random_host({c.n, c.f}, -0.1f, 0.1f), Fp8Scaling::Channel);
    Twin w8 = twin(wq.codes, '8'), ws = twin(wq.scale, 'f'), d8 = twin(wd.codes, '8'), ds = twin(wd.scale, 'f');
    Twin bias = twin(random_host({c.n}), 'w'), gamma = twin(random_host({c.h}, 0.5f, 1.5f), 'w');
    const Tensor residual_host = random_host({c.m, c.h}, -4.f, 4.f), add_host = random_host({c.m, c.h});
    Twin add = twin(add_host);
    for (const bool with_add : {true, false}) {
      const std::string what = std::string(with_add ? "add_rms_norm_fp8" : "rms_norm_fp8") + shape;
      Twin res_a = twin(residual_host), res_b = twin(residual_host), normed = output({c.m, c.h});
      Twin codes = twin(nan_codes({c.m, c.h}), '8'), scales = output({c.m}, 'f');
      Twin y_a = output({c.m, c.n}), y_b = output({c.m, c.n});
      if (with_add) {
        gpu_->add_rms_norm(res_a.gpu, add.gpu, gamma.gpu, 1e-6f, normed.gpu);
      } else {
        gpu_->rms_norm(res_a.gpu, gamma.gpu, 1e-6f, normed.gpu);
      }
      gpu_->linear_fp8_scaled(normed.gpu, w8.gpu, ws.gpu, Fp8Scaling::Channel, bias.gpu, y_a.gpu);
      Fp8Rows q_gpu{codes.gpu, scales.gpu}, q_cpu{codes.cpu, scales.cpu};
      gpu_->add_rms_norm_fp8(res_b.gpu, with_add ? add.gpu : Tensor{}, gamma.gpu, 1e-6f, q_gpu);
      gpu_->linear_fp8_rows(q_gpu, w8.gpu, ws.gpu, bias.gpu, y_b.gpu);
      EXPECT_TRUE(same_bits(gpu_->download(res_a.gpu), gpu_->download(res_b.gpu))) << what << ": residual";
      EXPECT_TRUE(same_bits(gpu_->download(y_a.gpu), gpu_->download(y_b.gpu))) << what << ": GEMM output";
      cpu_->add_rms_norm_fp8(res_b.cpu, with_add ? add.cpu : Tensor{}, gamma.cpu, 1e-6f, q_cpu);
      cpu_->linear_fp8_rows(q_cpu, w8.cpu, ws.cpu, bias.cpu, y_b.cpu);
      expect_close(y_b, 3e-2, what + " vs the CPU reference");
    }
    const std::string what = "silu_mul_fp8" + shape;
    Twin gate_up = twin(random_host({c.m, 2 * c.f}, -3.f, 3.f)), act = output({c.m, c.f});
    Twin codes = twin(nan_codes({c.m, c.f}), '8'), scales = output({c.m}, 'f');
    Twin y_a = output({c.m, c.n}), y_b = output({c.m, c.n});
    gpu_->silu_mul(gate_up.gpu, act.gpu);
    gpu_->linear_fp8_scaled(act.gpu, d8.gpu, ds.gpu, Fp8Scaling::Channel, Tensor{}, y_a.gpu);
    Fp8Rows q_gpu{codes.gpu, scales.gpu}, q_cpu{codes.cpu, scales.cpu};
    gpu_->silu_mul_fp8(gate_up.gpu, q_gpu);
    gpu_->linear_fp8_rows(q_gpu, d8.gpu, ds.gpu, Tensor{}, y_b.gpu);
    EXPECT_TRUE(same_bits(gpu_->download(y_a.gpu), gpu_->download(y_b.gpu))) << what << ": GEMM output";
    cpu_->silu_mul_fp8(gate_up.cpu, q_cpu);
    cpu_->linear_fp8_rows(q_cpu, d8.cpu, ds.cpu, Tensor{}, y_b.cpu);
    expect_close(y_b, 3e-2, what + " vs the CPU reference");
  }
}

// CUDA, the ViT's forms: scale_add_norm_fp8 (LayerNorm / RMSNorm, layer-scaled add, plain add, none) then
// linear_fp8_rows with bias and GELU, against scale_add_norm (or the plain norm) then linear_fp8_scaled(Channel,
// GELU): the residual and the GEMM output bit for bit; the CPU reference to FP8 precision. Widths of InternViT-300M
// (1,024, LayerNorm) and InternViT-6B (3,200, RMSNorm), a tile's 1,025 rows and a few.
TEST_F(OpsTest, Fp8VitNormProducersMatchTheSeparateKernels) {
  struct Case {
    int m, h, n;
    NormKind kind;
  };
  for (Case c : {Case{1025, 1024, 512, NormKind::Layer}, Case{7, 1024, 4096, NormKind::Layer},
                 Case{70, 3200, 256, NormKind::Rms}}) {
    const bool layer = c.kind == NormKind::Layer;
    const Fp8HostWeight wq = quantize_fp8_weight(random_host({c.n, c.h}, -0.1f, 0.1f), Fp8Scaling::Channel);
    Twin w8 = twin(wq.codes, '8'), ws = twin(wq.scale, 'f'), bias = twin(random_host({c.n}), 'w');
    Twin gamma = twin(random_host({c.h}, 0.5f, 1.5f), 'w'), scale = twin(random_host({c.h}, -0.5f, 0.5f), 'w');
    Twin beta = layer ? twin(random_host({c.h}, -0.3f, 0.3f), 'w') : Twin{};
    const Tensor x_host = random_host({c.m, c.h}, -4.f, 4.f);
    Twin branch = twin(random_host({c.m, c.h}));
    for (const int form : {0, 1, 2}) {  // 0: no branch, 1: plain add, 2: layer-scaled add
      const std::string what = std::string(layer ? "layer" : "rms") + " form " + std::to_string(form) +
                               " M=" + std::to_string(c.m) + " H=" + std::to_string(c.h);
      const Tensor br_gpu = form == 0 ? Tensor{} : branch.gpu, br_cpu = form == 0 ? Tensor{} : branch.cpu;
      const Tensor sc_gpu = form == 2 ? scale.gpu : Tensor{}, sc_cpu = form == 2 ? scale.cpu : Tensor{};
      Twin x_a = twin(x_host), x_b = twin(x_host), normed = output({c.m, c.h});
      Twin codes = twin(nan_codes({c.m, c.h}), '8'), scales = output({c.m}, 'f');
      Twin y_a = output({c.m, c.n}), y_b = output({c.m, c.n});
      if (form != 0) gpu_->scale_add_norm(x_a.gpu, br_gpu, sc_gpu, c.kind, gamma.gpu, beta.gpu, 1e-6f, normed.gpu);
      else if (layer) gpu_->layer_norm(x_a.gpu, gamma.gpu, beta.gpu, 1e-6f, normed.gpu);
      else gpu_->rms_norm(x_a.gpu, gamma.gpu, 1e-6f, normed.gpu);
      gpu_->linear_fp8_scaled(normed.gpu, w8.gpu, ws.gpu, Fp8Scaling::Channel, bias.gpu, y_a.gpu, Activation::Gelu);
      Fp8Rows q_gpu{codes.gpu, scales.gpu}, q_cpu{codes.cpu, scales.cpu};
      gpu_->scale_add_norm_fp8(x_b.gpu, br_gpu, sc_gpu, c.kind, gamma.gpu, beta.gpu, 1e-6f, q_gpu);
      gpu_->linear_fp8_rows(q_gpu, w8.gpu, ws.gpu, bias.gpu, y_b.gpu, Activation::Gelu);
      EXPECT_TRUE(same_bits(gpu_->download(x_a.gpu), gpu_->download(x_b.gpu))) << what << ": residual";
      EXPECT_TRUE(same_bits(gpu_->download(y_a.gpu), gpu_->download(y_b.gpu))) << what << ": GEMM output";
      cpu_->scale_add_norm_fp8(x_b.cpu, br_cpu, sc_cpu, c.kind, gamma.cpu, beta.cpu, 1e-6f, q_cpu);
      cpu_->linear_fp8_rows(q_cpu, w8.cpu, ws.cpu, bias.cpu, y_b.cpu, Activation::Gelu);
      expect_close(y_b, 3e-2, what + " vs the CPU reference");
    }
  }
}

}  // namespace
}  // namespace fovea::test

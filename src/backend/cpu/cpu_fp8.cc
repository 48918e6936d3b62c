// The scalar reference of the FP8 GEMM (Backend::linear_fp8_scaled) for each scaling recipe: the activation is
// quantized to E4M3 with the recipe's dynamic scales exactly as the CUDA kernels quantize it (core/dtype.h,
// backend/fp8_recipe.h), the E4M3 values are multiplied in float32, and the scales applied to the float32 sums
// the way cuBLASLt applies them: per tensor and per channel after the whole sum, per 128-block to each block's
// partial sum (ChannelAct128: the activation's block scales to the partial sums, the channel scale after the
// whole sum, as the CUDA path does). Every output row depends on its input row alone except with
// Fp8Scaling::Tensor.
#include <algorithm>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_util.h"

namespace fovea {
namespace {

std::vector<float> e4m3_values(const uint8_t* codes, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = e4m3_to_f32(codes[i]);
  return v;
}

// out[M,N] = sum over 128-column blocks kb of (xq[:, kb] · wq[:, kb]^T) * sx[m][kb] * sw[n/128][kb]; sw null: 1.
void block_scaled_gemm(const std::vector<float>& xq, const float* sx, const std::vector<float>& wq, const float* sw,
                       int64_t M, int64_t N, int64_t K, float* out) {
  const int64_t blocks = fp8_blocks(K), ld = fp8_block_scale_ld(K);
  std::vector<float> xs, ws, part(size_t(M * N));
  std::fill(out, out + M * N, 0.f);
  for (int64_t kb = 0; kb < blocks; ++kb) {
    const int64_t k0 = kb * kFp8Block, width = std::min(kFp8Block, K - k0);
    xs.resize(size_t(M * width));
    ws.resize(size_t(N * width));
    for (int64_t r = 0; r < M; ++r) std::copy_n(&xq[size_t(r * K + k0)], width, &xs[size_t(r * width)]);
    for (int64_t c = 0; c < N; ++c) std::copy_n(&wq[size_t(c * K + k0)], width, &ws[size_t(c * width)]);
    cpu::gemm_nt(xs.data(), ws.data(), nullptr, part.data(), M, N, width, Activation::None);
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < N; ++c)
        out[r * N + c] += part[size_t(r * N + c)] * (sw ? sx[r * blocks + kb] * sw[(c / kFp8Block) * ld + kb]
                                                        : sx[r * blocks + kb]);
  }
}

// out[M,N] = (xq · wq^T)[m,n] * sx[m] * sw[n]: the Channel recipe, scales after the whole float32 sum.
void channel_scaled_gemm(const std::vector<float>& xq, const float* sx, const std::vector<float>& wq, const float* sw,
                         int64_t M, int64_t N, int64_t K, float* out) {
  cpu::gemm_nt(xq.data(), wq.data(), nullptr, out, M, N, K, Activation::None);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t c = 0; c < N; ++c) out[r * N + c] *= sx[r] * sw[c];
}

void add_bias_act(float* out, const Tensor& bias, Activation act, int64_t M, int64_t N) {
  const float* b = bias.empty() ? nullptr : bias.ptr<float>();
  for (int64_t r = 0; r < M; ++r)
    for (int64_t c = 0; c < N; ++c) {
      const float v = out[r * N + c] + (b ? b[c] : 0.f);
      out[r * N + c] = act == Activation::Gelu ? cpu::gelu_erf(v) : v;
    }
}

// The weight's [N, K] after checking its codes and its scales' shape under `scaling`.
std::pair<int64_t, int64_t> check_fp8_weight(const Tensor& w8, const Tensor& w_scale, Fp8Scaling scaling) {
  cpu::check_host(w8, DType::F8E4M3, "linear_fp8", "w8");
  FOVEA_CHECK(w8.rank() == 2, "linear_fp8: w8 has shape ", shape_str(w8.shape), ", expected [N, K]");
  const int64_t N = w8.dim(0), K = w8.dim(1);
  FOVEA_CHECK(K % 16 == 0 && N % 8 == 0, "linear_fp8: K = ", K, " must be a multiple of 16 and N = ", N, " of 8");
  cpu::check_host(w_scale, DType::F32, "linear_fp8", "w_scale");
  FOVEA_CHECK(w_scale.shape == fp8_weight_scale_shape(scaling, N, K), "linear_fp8 (", fp8_scaling_name(scaling),
              "): w_scale has shape ", shape_str(w_scale.shape), ", expected ",
              shape_str(fp8_weight_scale_shape(scaling, N, K)));
  return {N, K};
}

void check_fp8_rows(const Fp8Rows& x, int64_t rows, int64_t cols, const char* op) {
  cpu::check_host(x.codes, DType::F8E4M3, op, "codes");
  cpu::check_host(x.scales, DType::F32, op, "scales");
  FOVEA_CHECK(x.codes.rank() == 2 && x.codes.dim(0) == rows && x.codes.dim(1) == cols && x.scales.numel() == rows,
              op, ": codes ", shape_str(x.codes.shape), " and scales ", shape_str(x.scales.shape), " for [", rows,
              ", ", cols, "]");
}

// y = the per-row (Channel) E4M3 quantization of the float32 matrix v, as linear_fp8_scaled quantizes x.
void quantize_rows(const Tensor& v, Fp8Rows& y, const char* op) {
  const int64_t M = cpu::rows_of(v), N = cpu::cols_of(v);
  check_fp8_rows(y, M, N, op);
  quantize_e4m3_blocks(v.ptr<float>(), M, N, 1, N, y.codes.ptr<uint8_t>(), y.scales.ptr<float>(), 1);
}

}  // namespace

void CpuBackend::linear_fp8_scaled(const Tensor& x, const Tensor& w8, const Tensor& w_scale, Fp8Scaling scaling,
                                   const Tensor& bias, Tensor& y, Activation act) {
  const auto [N, K] = check_fp8_weight(w8, w_scale, scaling);
  cpu::check_host(x, DType::F32, "linear_fp8", "x");
  FOVEA_CHECK(x.rank() >= 1 && cpu::cols_of(x) == K, "linear_fp8: x ", shape_str(x.shape), " does not match w8 ",
              shape_str(w8.shape));
  const int64_t M = cpu::rows_of(x);
  cpu::check_matrix(y, M, N, "linear_fp8", "y");
  if (!bias.empty()) cpu::check_vector(bias, N, DType::F32, "linear_fp8", "bias");
  FOVEA_CHECK(y.data != x.data, "linear_fp8: y aliases x");
  std::vector<uint8_t> x_codes(size_t(M * K));
  const std::vector<float> wq = e4m3_values(w8.ptr<uint8_t>(), N * K);
  const float* sw = w_scale.ptr<float>();
  float* out = y.ptr<float>();
  std::vector<float> sx;  // Tensor: [1]; Channel: [M]; Block, ChannelAct128: [M, ceil(K/128)]
  if (scaling == Fp8Scaling::Tensor) {
    sx.assign(1, quantize_e4m3(x.ptr<float>(), M * K, x_codes.data()));
  } else {
    const int64_t group = fp8_activation_blocks(scaling) ? kFp8Block : K, groups = (K + group - 1) / group;
    sx.resize(size_t(M * groups));
    quantize_e4m3_blocks(x.ptr<float>(), M, K, 1, group, x_codes.data(), sx.data(), groups);
  }
  const std::vector<float> xq = e4m3_values(x_codes.data(), M * K);
  if (scaling == Fp8Scaling::Block) {
    block_scaled_gemm(xq, sx.data(), wq, sw, M, N, K, out);
  } else if (scaling == Fp8Scaling::ChannelAct128) {
    block_scaled_gemm(xq, sx.data(), wq, nullptr, M, N, K, out);
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < N; ++c) out[r * N + c] *= sw[c];
  } else if (scaling == Fp8Scaling::Channel) {
    channel_scaled_gemm(xq, sx.data(), wq, sw, M, N, K, out);
  } else {
    cpu::gemm_nt(xq.data(), wq.data(), nullptr, out, M, N, K, Activation::None);
    for (int64_t i = 0; i < M * N; ++i) out[i] *= sx[0] * sw[0];
  }
  add_bias_act(out, bias, act, M, N);
}

void CpuBackend::linear_fp8_rows(const Fp8Rows& x, const Tensor& w8, const Tensor& w_scale, const Tensor& bias,
                                 Tensor& y, Activation act) {
  const auto [N, K] = check_fp8_weight(w8, w_scale, Fp8Scaling::Channel);
  const int64_t M = x.count();
  check_fp8_rows(x, M, K, "linear_fp8_rows");
  cpu::check_matrix(y, M, N, "linear_fp8_rows", "y");
  if (!bias.empty()) cpu::check_vector(bias, N, DType::F32, "linear_fp8_rows", "bias");
  const std::vector<float> xq = e4m3_values(x.codes.ptr<uint8_t>(), M * K);
  const std::vector<float> wq = e4m3_values(w8.ptr<uint8_t>(), N * K);
  channel_scaled_gemm(xq, x.scales.ptr<float>(), wq, w_scale.ptr<float>(), M, N, K, y.ptr<float>());
  add_bias_act(y.ptr<float>(), bias, act, M, N);
}

// The reference composes the unfused ops: the float32 activation, then the Channel quantization of
// linear_fp8_scaled. What the fusion must preserve is exactly that composition.
void CpuBackend::scale_add_norm_fp8(Tensor& x, const Tensor& branch, const Tensor& scale, NormKind kind,
                                    const Tensor& gamma, const Tensor& beta, float eps, Fp8Rows& y) {
  cpu::check_host(x, DType::F32, "scale_add_norm_fp8", "x");
  Tensor normed = Tensor::host(DType::F32, x.shape);
  if (!branch.empty()) scale_add_norm(x, branch, scale, kind, gamma, beta, eps, normed);
  else if (kind == NormKind::Layer) layer_norm(x, gamma, beta, eps, normed);
  else rms_norm(x, gamma, eps, normed);
  quantize_rows(normed, y, "scale_add_norm_fp8");
}

void CpuBackend::silu_mul_fp8(const Tensor& gate_up, Fp8Rows& y) {
  cpu::check_host(gate_up, DType::F32, "silu_mul_fp8", "gate_up");
  const int64_t M = cpu::rows_of(gate_up), F = cpu::cols_of(gate_up) / 2;
  Tensor act = Tensor::host(DType::F32, {M, F});
  silu_mul(gate_up, act);
  quantize_rows(act, y, "silu_mul_fp8");
}

}  // namespace fovea

// CudaBackend's FP8 ops: linear_fp8_scaled (quantize the activation, then the scaled cuBLASLt GEMM),
// linear_fp8_rows (the GEMM on an activation quantized beforehand) and the producers that quantize as they write
// it (scale_add_norm_fp8, silu_mul_fp8; kernels_fp8_fused.cu).
#include <utility>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/op_checks.h"
#include "backend/cuda/quantize_fp8.h"

namespace fovea::cuda {
namespace {

// The weight's N and K after checking its codes and its scales' shape under `scaling`.
std::pair<int64_t, int64_t> fp8_weight_dims(const Tensor& w8, const Tensor& w_scale, Fp8Scaling scaling) {
  FOVEA_CHECK(w8.rank() == 2, "linear_fp8: weight shape ", shape_str(w8.shape));
  const int64_t n = w8.dim(0), k = w8.dim(1);
  expect(w8, DType::F8E4M3, {n, k}, "linear_fp8 weight");
  FOVEA_CHECK(k % 16 == 0 && n % 8 == 0, "linear_fp8: K = ", k, " must be a multiple of 16 and N = ", n, " of 8");
  expect(w_scale, DType::F32, fp8_weight_scale_shape(scaling, n, k), "linear_fp8 weight scale");
  return {n, k};
}

void expect_fp8_rows(const Fp8Rows& x, int64_t rows, int64_t cols, const char* what) {
  expect(x.codes, DType::F8E4M3, {rows, cols}, what);
  expect(x.scales, DType::F32, {rows}, what);
}

}  // namespace

void CudaBackend::fp8_gemm(const uint8_t* x8, const float* x_scale, const Tensor& w8, const Tensor& w_scale,
                           Fp8Scaling scaling, const bf16* bias, bf16* out, int64_t m, int64_t n, int64_t k,
                           Activation act) {
  if (!fp8_gemm_) {
    fp8_gemm_ = std::make_unique<LtFp8Gemm>(stream_, *gemm_);
    fp8_gemm_->set_batch_invariant(batch_invariant_);
  }
  const auto* codes = static_cast<const uint8_t*>(w8.data);
  const auto* w_scales = static_cast<const float*>(w_scale.data);
  const GemmEpilogue epilogue = gemm_epilogue(bias != nullptr, act == Activation::Gelu);
  const bool gelu = act == Activation::Gelu;
  if (scaling == Fp8Scaling::ChannelAct128) {  // block GEMM with unit weight scales; channel scale, bias, GELU after
    const float* ones = fp8_unit_scales(size_t(fp8_blocks(n) * fp8_block_scale_ld(k)));
    fp8_gemm_->run(x8, codes, x_scale, ones, nullptr, out, int(m), int(n), int(k), GemmEpilogue::None,
                   Fp8Scaling::Block);
    launch_fp8_epilogue(out, bias, m, n, gelu, stream_, w_scales);
  } else if (!fp8_gemm_->run(x8, codes, x_scale, w_scales, bias, out, int(m), int(n), int(k), epilogue, scaling)) {
    // no fused epilogue with these scale modes: the GEMM, then the epilogue
    fp8_gemm_->run(x8, codes, x_scale, w_scales, nullptr, out, int(m), int(n), int(k), GemmEpilogue::None, scaling);
    launch_fp8_epilogue(out, bias, m, n, gelu, stream_);
  }
}

// The activation's codes, then (Channel, Block) its scales 256 bytes further on, in one buffer. Block scales: on
// the H200 (cuBLASLt 13) every VEC128 x BLK128x128 algorithm refused M % 4 != 0 (status 15, session 6's device
// run), so the GEMM runs on M rounded up to 4: the padding rows' codes and scales are zeroed (their outputs are 0
// and never read), the product goes to a scratch [M4, N] after the scales and its first M rows are copied to y.
// Each output row depends only on its own input row, so the padding changes no real row.
void CudaBackend::linear_fp8_scaled(const Tensor& x, const Tensor& w8, const Tensor& w_scale, Fp8Scaling scaling,
                                    const Tensor& bias, Tensor& y, Activation act) {
  const auto [n, k] = fp8_weight_dims(w8, w_scale, scaling);
  const int64_t m = rows_of(x, DType::BF16, k, "linear_fp8 input");
  FOVEA_CHECK(rows_of(y, DType::BF16, n, "linear_fp8 output") == m, "linear_fp8: output ", shape_str(y.shape),
              " for input ", shape_str(x.shape));
  if (!bias.empty()) expect_numel(bias, DType::BF16, n, "linear_fp8 bias");
  const bool block = fp8_activation_blocks(scaling);
  const int64_t group = block ? kFp8Block : k;
  const int64_t m_gemm = block ? fp8_activation_scale_ld(m) : m;  // rows the GEMM sees
  const bool padded = m_gemm != m;
  const auto round256 = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const size_t codes_bytes = round256(size_t(m_gemm) * size_t(k));
  const int64_t groups = (k + group - 1) / group;
  const size_t scale_bytes = scaling == Fp8Scaling::Tensor ? 0 : round256(size_t(m_gemm) * size_t(groups) * 4);
  const size_t y_bytes = padded ? size_t(m_gemm) * size_t(n) * sizeof(bf16) : 0;
  uint8_t* activation = fp8_activation_buffer(codes_bytes + scale_bytes + y_bytes);
  OpScope scope(profiler_.get(), OpCategory::Gemm, [&] {
    const GemmEpilogue epilogue = gemm_epilogue(!bias.empty(), act == Activation::Gelu);
    return str("linear_fp8 M=", m, " N=", n, " K=", k, " ", gemm_epilogue_name(epilogue),
               scaling == Fp8Scaling::Tensor ? "" : str(" ", fp8_scaling_name(scaling)));
  });
  const float* x_scale = fp8_stats_ + kFp8ScaleSlot;
  if (scaling == Fp8Scaling::Tensor) {
    launch_quantize_fp8(cbf(x), m * k, activation, fp8_stats_, stream_);
  } else {
    auto* scales = reinterpret_cast<float*>(activation + codes_bytes);
    launch_quantize_fp8_groups(cbf(x), m, k, group, activation, scales, m_gemm, stream_);
    if (padded) {  // scales are [groups, m_gemm], token-contiguous: zero each group's padding tokens
      FOVEA_CUDA_CHECK(cudaMemsetAsync(activation + size_t(m) * size_t(k), 0, size_t(m_gemm - m) * size_t(k), stream_));
      FOVEA_CUDA_CHECK(cudaMemset2DAsync(scales + m, size_t(m_gemm) * sizeof(float), 0,
                                         size_t(m_gemm - m) * sizeof(float), size_t(groups), stream_));
    }
    x_scale = scales;
  }
  bf16* out = padded ? reinterpret_cast<bf16*>(activation + codes_bytes + scale_bytes) : mbf(y);
  fp8_gemm(activation, x_scale, w8, w_scale, scaling, bias.empty() ? nullptr : cbf(bias), out, m_gemm, n, k, act);
  if (padded)
    FOVEA_CUDA_CHECK(cudaMemcpyAsync(mbf(y), out, size_t(m) * size_t(n) * sizeof(bf16), cudaMemcpyDeviceToDevice,
                                     stream_));
}

void CudaBackend::linear_fp8_rows(const Fp8Rows& x, const Tensor& w8, const Tensor& w_scale, const Tensor& bias,
                                  Tensor& y, Activation act) {
  const auto [n, k] = fp8_weight_dims(w8, w_scale, Fp8Scaling::Channel);
  const int64_t m = x.count();
  expect_fp8_rows(x, m, k, "linear_fp8_rows input");
  FOVEA_CHECK(rows_of(y, DType::BF16, n, "linear_fp8_rows output") == m, "linear_fp8_rows: output ",
              shape_str(y.shape), " for input ", shape_str(x.codes.shape));
  if (!bias.empty()) expect_numel(bias, DType::BF16, n, "linear_fp8_rows bias");
  OpScope scope(profiler_.get(), OpCategory::Gemm, [&] {
    return str("linear_fp8 M=", m, " N=", n, " K=", k, " ",
               gemm_epilogue_name(gemm_epilogue(!bias.empty(), act == Activation::Gelu)),
               " channel, quantized by its producer");
  });
  fp8_gemm(static_cast<const uint8_t*>(x.codes.data), static_cast<const float*>(x.scales.data), w8, w_scale,
           Fp8Scaling::Channel, bias.empty() ? nullptr : cbf(bias), mbf(y), m, n, k, act);
}

void CudaBackend::scale_add_norm_fp8(Tensor& x, const Tensor& branch, const Tensor& scale, NormKind kind,
                                     const Tensor& gamma, const Tensor& beta, float eps, Fp8Rows& y) {
  const int64_t cols = x.dim(-1), rows = rows_of(x, DType::BF16, cols, "scale_add_norm_fp8 x");
  if (!branch.empty())
    FOVEA_CHECK(rows_of(branch, DType::BF16, cols, "scale_add_norm_fp8 branch") == rows,
                "scale_add_norm_fp8: shapes ", shape_str(x.shape), " ", shape_str(branch.shape));
  expect_norm_params("scale_add_norm_fp8", cols, kind, scale, gamma, beta);
  const bool layer = kind == NormKind::Layer;
  expect_fp8_rows(y, rows, cols, "scale_add_norm_fp8 output");
  OpScope scope(profiler_.get(), OpCategory::Norm, [&] {
    const char* add = branch.empty() ? "" : scale.empty() ? "add_" : "scale_add_";
    return str(add, layer ? "layer_norm_fp8" : "rms_norm_fp8", " rows=", rows);
  });
  auto* codes = static_cast<uint8_t*>(y.codes.data);
  auto* scales = static_cast<float*>(y.scales.data);
  const bf16* scale_ptr = scale.empty() ? nullptr : cbf(scale);
  const bf16* beta_ptr = layer ? cbf(beta) : nullptr;
  if (branch.empty())
    launch_norm_fp8(nullptr, cbf(x), nullptr, layer, cbf(gamma), beta_ptr, eps, codes, scales, int(rows), int(cols),
                    stream_);
  else
    launch_norm_fp8(mbf(x), cbf(branch), scale_ptr, layer, cbf(gamma), beta_ptr, eps, codes, scales, int(rows),
                    int(cols), stream_);
}

void CudaBackend::silu_mul_fp8(const Tensor& gate_up, Fp8Rows& y) {
  const int64_t f = gate_up.dim(-1) / 2, rows = rows_of(gate_up, DType::BF16, 2 * f, "silu_mul_fp8 input");
  expect_fp8_rows(y, rows, f, "silu_mul_fp8 output");
  OpScope scope(profiler_.get(), OpCategory::Elementwise, [&] { return rows_label("silu_mul_fp8", rows); });
  launch_silu_mul_fp8(cbf(gate_up), static_cast<uint8_t*>(y.codes.data), static_cast<float*>(y.scales.data),
                      int(rows), int(f), stream_);
}

}  // namespace fovea::cuda

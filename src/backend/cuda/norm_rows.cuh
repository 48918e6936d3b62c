// The first pass of the row norms (kernels_norm.cu) and of the fused RMSNorm -> FP8 producer
// (kernels_fp8_fused.cu): one block per row with norm_threads(cols) threads, W-wide chunks, the residual update
// (residual += scale ⊙ x, launch_scale_add's arithmetic) done on the way. Sharing it keeps the float32 sum of
// squares of both kernels in the same order, so their normalised values agree to the bit.
#pragma once
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/kernels.h"

namespace fovea::cuda {

inline int norm_threads(int cols) { return cols >= 2048 ? 256 : 128; }

// A W-wide chunk of a row for a norm's first pass: x itself, or with residual != null the residual after
// residual += scale ⊙ x (scale may be null: 1), stored exactly as launch_scale_add stores it.
template <int W>
__device__ __forceinline__ void first_pass_chunk(bf16* residual, const bf16* x, const bf16* scale, int64_t base,
                                                 int c, float* v) {
  if (residual) scale_add_bf16<W>(residual + base + c, x + base + c, scale ? scale + c : nullptr, v);
  else load_bf16<W>(x + base + c, v);
}

// This thread's part of the row's sum of squares (after the residual update when residual != null).
template <int W>
__device__ __forceinline__ float rms_first_pass(bf16* residual, const bf16* x, const bf16* scale, int64_t base,
                                                int cols) {
  float v[W];
  float sq = 0.f;
  for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
    first_pass_chunk<W>(residual, x, scale, base, c, v);
#pragma unroll
    for (int i = 0; i < W; ++i) sq += v[i] * v[i];
  }
  return sq;
}

// 1 / RMS of the row (after the residual update when residual != null), the same on every thread of the block.
// `scratch`: 32 floats of shared memory.
template <int W>
__device__ __forceinline__ float row_inverse_rms(bf16* residual, const bf16* x, const bf16* scale, int64_t base,
                                                 int cols, float eps, float* scratch) {
  const float sq = rms_first_pass<W>(residual, x, scale, base, cols);
  return rsqrtf(block_sum(sq, scratch) / float(cols) + eps);
}

// The row's mean and 1 / standard deviation for LayerNorm (after the residual update when residual != null), the
// same on every thread: a first pass summing the values, a second over (v - mean) that avoids the cancellation of
// E[x^2] - mean^2 on rows with a large mean. Each thread re-reads only the chunks it wrote, so the update needs no
// barrier. `scratch`: 32 floats of shared memory.
template <int W>
__device__ __forceinline__ float2 row_mean_rstd(bf16* residual, const bf16* x, const bf16* scale, int64_t base,
                                                int cols, float eps, float* scratch) {
  const bf16* row = residual ? residual + base : x + base;
  float v[W];
  float sum = 0.f;
  for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
    first_pass_chunk<W>(residual, x, scale, base, c, v);
#pragma unroll
    for (int i = 0; i < W; ++i) sum += v[i];
  }
  const float mean = block_sum(sum, scratch) / float(cols);
  float sq = 0.f;
  for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
    load_bf16<W>(row + c, v);
#pragma unroll
    for (int i = 0; i < W; ++i) sq += (v[i] - mean) * (v[i] - mean);
  }
  return {mean, rsqrtf(block_sum(sq, scratch) / float(cols) + eps)};
}

// A normalised value, written once for the bf16 norms and the FP8 producers so both round the same expression.
__device__ __forceinline__ float layer_norm_value(float v, float2 stats, float g, float b) {
  return (v - stats.x) * stats.y * g + b;
}
__device__ __forceinline__ float rms_norm_value(float v, float rms, float g) { return v * rms * g; }

}  // namespace fovea::cuda

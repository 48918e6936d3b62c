// LayerNorm and RMSNorm, each also in a residual form (residual += scale ⊙ x, then normalise the residual, with
// scale_add's arithmetic): one block per row, float32 statistics, 16-byte accesses when the row length allows
// (W = 8), a scalar path otherwise (W = 1). Rows are re-read from L1/L2 between passes rather than held in
// registers, so any row length works with one kernel.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/norm_rows.cuh"

namespace fovea::cuda {
namespace {

// With residual != null the row normalised is the residual after the first pass's update.
template <int W>
__global__ void layer_norm_kernel(bf16* residual, const bf16* x, const bf16* scale, const bf16* gamma,
                                  const bf16* beta, float eps, bf16* y, int cols) {
  __shared__ float scratch[32];
  wait_for_upstream();
  release_downstream();
  const int64_t base = int64_t(blockIdx.x) * cols;
  const bf16* row = residual ? residual + base : x + base;
  float v[W], g[W], b[W];
  const float2 stats = row_mean_rstd<W>(residual, x, scale, base, cols, eps, scratch);
  for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
    load_bf16<W>(row + c, v);
    load_bf16<W>(gamma + c, g);
    load_bf16<W>(beta + c, b);
#pragma unroll
    for (int i = 0; i < W; ++i) v[i] = layer_norm_value(v[i], stats, g[i], b[i]);
    store_bf16<W>(y + base + c, v);
  }
}

// Residual form as in layer_norm_kernel.
template <int W>
__global__ void rms_norm_kernel(bf16* residual, const bf16* x, const bf16* scale, const bf16* gamma, float eps,
                                bf16* y, int cols) {
  __shared__ float scratch[32];
  wait_for_upstream();
  release_downstream();
  const int64_t base = int64_t(blockIdx.x) * cols;
  const bf16* row = residual ? residual + base : x + base;
  float v[W], g[W];
  const float rms = row_inverse_rms<W>(residual, x, scale, base, cols, eps, scratch);
  for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
    load_bf16<W>(row + c, v);
    load_bf16<W>(gamma + c, g);
#pragma unroll
    for (int i = 0; i < W; ++i) v[i] = rms_norm_value(v[i], rms, g[i]);
    store_bf16<W>(y + base + c, v);
  }
}

bool can_vectorise(int cols, std::initializer_list<const void*> ptrs) {
  if (cols % 8) return false;
  for (const void* p : ptrs)
    if (p && !aligned16(p)) return false;
  return true;
}

void launch_layer(bf16* residual, const bf16* x, const bf16* scale, const bf16* gamma, const bf16* beta, float eps,
                  bf16* y, int rows, int cols, cudaStream_t stream) {
  if (rows == 0) return;
  const int threads = norm_threads(cols);
  if (can_vectorise(cols, {residual, x, scale, gamma, beta, y}))
    launch_dependent(layer_norm_kernel<8>, rows, threads, 0, stream, residual, x, scale, gamma, beta, eps, y, cols);
  else
    launch_dependent(layer_norm_kernel<1>, rows, threads, 0, stream, residual, x, scale, gamma, beta, eps, y, cols);
}

void launch_rms(bf16* residual, const bf16* x, const bf16* scale, const bf16* gamma, float eps, bf16* y, int rows,
                int cols, cudaStream_t stream) {
  if (rows == 0) return;
  const int threads = norm_threads(cols);
  if (can_vectorise(cols, {residual, x, scale, gamma, y}))
    launch_dependent(rms_norm_kernel<8>, rows, threads, 0, stream, residual, x, scale, gamma, eps, y, cols);
  else
    launch_dependent(rms_norm_kernel<1>, rows, threads, 0, stream, residual, x, scale, gamma, eps, y, cols);
}

}  // namespace

void launch_layer_norm(const bf16* x, const bf16* gamma, const bf16* beta, float eps, bf16* y, int rows, int cols,
                       cudaStream_t stream) {
  launch_layer(nullptr, x, nullptr, gamma, beta, eps, y, rows, cols, stream);
}

void launch_rms_norm(const bf16* x, const bf16* gamma, float eps, bf16* y, int rows, int cols, cudaStream_t stream) {
  launch_rms(nullptr, x, nullptr, gamma, eps, y, rows, cols, stream);
}

void launch_scale_add_layer_norm(bf16* residual, const bf16* x, const bf16* scale, const bf16* gamma,
                                 const bf16* beta, float eps, bf16* y, int rows, int cols, cudaStream_t stream) {
  launch_layer(residual, x, scale, gamma, beta, eps, y, rows, cols, stream);
}

void launch_scale_add_rms_norm(bf16* residual, const bf16* x, const bf16* scale, const bf16* gamma, float eps,
                               bf16* y, int rows, int cols, cudaStream_t stream) {
  launch_rms(residual, x, scale, gamma, eps, y, rows, cols, stream);
}

}  // namespace fovea::cuda

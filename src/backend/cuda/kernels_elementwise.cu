// Memory-bound element-wise ops and row copies. One thread handles W = 8 consecutive elements (a 16-byte
// access) when the row length and pointers allow, one element otherwise.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/kernels.h"

namespace fovea::cuda {
namespace {

constexpr int kThreads = 256;

template <int W>
__global__ void scale_add_kernel(bf16* x, const bf16* y, const bf16* scale, int64_t total, int cols) {
  wait_for_upstream();
  release_downstream();
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * W;
  if (i >= total) return;
  const int c = int(i % cols);
  float sum[W];
  scale_add_bf16<W>(x + i, y + i, scale ? scale + c : nullptr, sum);
}

__global__ void scale_rows_kernel(bf16* w, const bf16* scale, int64_t total, int64_t cols) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  w[i] = __float2bfloat16(__bfloat162float(w[i]) * __bfloat162float(scale[i / cols]));
}

template <int W>
__global__ void silu_mul_kernel(const bf16* gate_up, bf16* y, int64_t total, int half_cols) {
  wait_for_upstream();
  release_downstream();
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * W;
  if (i >= total) return;
  const int64_t row = i / half_cols;
  const int c = int(i % half_cols);
  const bf16* in = gate_up + row * 2 * half_cols;
  float g[W], u[W];
  load_bf16<W>(in + c, g);
  load_bf16<W>(in + half_cols + c, u);
#pragma unroll
  for (int k = 0; k < W; ++k) g[k] = silu_times(g[k], u[k]);
  store_bf16<W>(y + i, g);
}

// One thread per W-element chunk of one copied row.
template <int W>
__global__ void copy_rows_kernel(const bf16* src, const int* src_index, int64_t src_rows, bf16* dst,
                                 const int* dst_index, int64_t dst_rows, int64_t count, int64_t cols,
                                 int* error_flag) {
  wait_for_upstream();
  release_downstream();
  const int64_t chunks_per_row = cols / W;
  const int64_t chunk = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (chunk >= count * chunks_per_row) return;
  const int64_t i = chunk / chunks_per_row, c = (chunk % chunks_per_row) * W;
  int64_t s = src_index ? src_index[i] : i;
  const int64_t d = dst_index ? dst_index[i] : i;
  if (s < 0 || s >= src_rows) {
    *error_flag = 1;
    s = s < 0 ? 0 : src_rows - 1;
  }
  if (d < 0 || d >= dst_rows) {
    *error_flag = 1;
    return;
  }
  if constexpr (W == 8) {
    *reinterpret_cast<uint4*>(dst + d * cols + c) = *reinterpret_cast<const uint4*>(src + s * cols + c);
  } else {
    dst[d * cols + c] = src[s * cols + c];
  }
}

}  // namespace

void launch_scale_add(bf16* x, const bf16* y, const bf16* scale, int rows, int cols, cudaStream_t stream) {
  const int64_t total = int64_t(rows) * cols;
  if (total == 0) return;
  if (cols % 8 == 0 && aligned16(x) && aligned16(y) && (!scale || aligned16(scale)))
    launch_dependent(scale_add_kernel<8>, blocks_for(total / 8, kThreads), kThreads, 0, stream, x, y, scale, total,
                     cols);
  else
    launch_dependent(scale_add_kernel<1>, blocks_for(total, kThreads), kThreads, 0, stream, x, y, scale, total, cols);
}

void launch_scale_rows(bf16* w, const bf16* scale, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  scale_rows_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(w, scale, total, cols);
  FOVEA_CUDA_CHECK_LAUNCH();
}

void launch_silu_mul(const bf16* gate_up, bf16* y, int rows, int half_cols, cudaStream_t stream) {
  const int64_t total = int64_t(rows) * half_cols;
  if (total == 0) return;
  if (half_cols % 8 == 0 && aligned16(gate_up) && aligned16(y))
    launch_dependent(silu_mul_kernel<8>, blocks_for(total / 8, kThreads), kThreads, 0, stream, gate_up, y, total,
                     half_cols);
  else
    launch_dependent(silu_mul_kernel<1>, blocks_for(total, kThreads), kThreads, 0, stream, gate_up, y, total,
                     half_cols);
}

void launch_copy_rows(const bf16* src, const int* src_index, int64_t src_rows, bf16* dst, const int* dst_index,
                      int64_t dst_rows, int64_t count, int64_t cols, int* error_flag, cudaStream_t stream) {
  if (count == 0 || cols == 0) return;
  if (cols % 8 == 0 && aligned16(src) && aligned16(dst))
    launch_dependent(copy_rows_kernel<8>, blocks_for(count * cols / 8, kThreads), kThreads, 0, stream, src,
                     src_index, src_rows, dst, dst_index, dst_rows, count, cols, error_flag);
  else
    launch_dependent(copy_rows_kernel<1>, blocks_for(count * cols, kThreads), kThreads, 0, stream, src, src_index,
                     src_rows, dst, dst_index, dst_rows, count, cols, error_flag);
}

}  // namespace fovea::cuda

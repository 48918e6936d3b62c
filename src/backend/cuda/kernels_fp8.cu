// Dynamic FP8 (E4M3) quantization of a bf16 activation for linear_fp8_scaled. Per tensor: stats[0] = max|x| over
// the whole tensor, stats[kFp8ScaleSlot] = the scale max|x| / 448 (1 when x is all zeros), xq = e4m3(x / scale) rounded to
// nearest even and saturated at +-448 — the CPU reference's arithmetic (an IEEE division, no reciprocal). Per
// token or per 1x128 block: the same arithmetic per group (quantize_groups_kernel).
#include <cuda_fp8.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quantize_fp8.h"

namespace fovea::cuda {
namespace {

constexpr int kFp8Threads = 256;

// Non-negative floats order like their bit patterns, so atomicMax on the bits is a float max. fmaxf drops NaN.
__global__ void absmax_kernel(const bf16* x, int64_t n, float* stats) {
  float m = 0.f;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    m = fmaxf(m, fabsf(__bfloat162float(x[i])));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) atomicMax(reinterpret_cast<unsigned*>(stats), __float_as_uint(m));
}

__global__ void quantize_kernel(const bf16* x, int64_t n, uint8_t* xq, float* stats) {
  const float absmax = stats[0];
  const float scale = absmax > 0.f ? __fdiv_rn(absmax, 448.f) : 1.f;
  if (blockIdx.x == 0 && threadIdx.x == 0) stats[kFp8ScaleSlot] = scale;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    xq[i] = __nv_cvt_float_to_fp8(__fdiv_rn(__bfloat162float(x[i]), scale), __NV_SATFINITE, __NV_E4M3);
}

// One block per (row, group): the group's max|x| (warp shuffles, then one value per warp in shared memory), its
// scale, then the codes. The arithmetic is the per-tensor kernel's, so a group's codes equal what
// quantize_e4m3_blocks gives on the host.
__global__ void quantize_groups_kernel(const bf16* x, int64_t rows, int64_t cols, int64_t group, uint8_t* xq,
                                       float* scales) {
  const int64_t r = blockIdx.x, g = blockIdx.y;
  const int64_t c0 = g * group, c1 = c0 + group < cols ? c0 + group : cols;
  const bf16* row = x + r * cols;
  float m = 0.f;
  for (int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) m = fmaxf(m, fabsf(__bfloat162float(row[c])));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  __shared__ float warp_max[kFp8Threads / 32];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  float absmax = 0.f;
  for (int w = 0; w < int(blockDim.x / 32); ++w) absmax = fmaxf(absmax, warp_max[w]);
  const float scale = absmax > 0.f ? __fdiv_rn(absmax, 448.f) : 1.f;
  if (threadIdx.x == 0) scales[g * rows + r] = scale;
  uint8_t* out = xq + r * cols;
  for (int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x)
    out[c] = __nv_cvt_float_to_fp8(__fdiv_rn(__bfloat162float(row[c]), scale), __NV_SATFINITE, __NV_E4M3);
}

// The bias add in float and one bf16 rounding, as cuBLASLt's epilogue does.
__global__ void epilogue_kernel(bf16* y, const bf16* bias, int64_t n, int64_t cols, bool gelu) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float v = __bfloat162float(y[i]) + (bias ? __bfloat162float(bias[i % cols]) : 0.f);
    if (gelu) v = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    y[i] = __float2bfloat16(v);
  }
}

}  // namespace

void launch_fp8_epilogue(bf16* y, const bf16* bias, int64_t rows, int64_t cols, bool gelu, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  const int blocks = int(std::min<int64_t>(blocks_for(n, kFp8Threads), 4096));
  epilogue_kernel<<<blocks, kFp8Threads, 0, stream>>>(y, bias, n, cols, gelu);
  FOVEA_CUDA_CHECK_LAUNCH();
}

void launch_quantize_fp8_groups(const bf16* x, int64_t rows, int64_t cols, int64_t group, uint8_t* xq, float* scales,
                                cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  const int64_t groups = (cols + group - 1) / group;
  // 128 threads cover a 1x128 block in one pass; a whole row (per token) takes 256.
  const int threads = group <= 128 ? 128 : kFp8Threads;
  quantize_groups_kernel<<<dim3(unsigned(rows), unsigned(groups)), threads, 0, stream>>>(x, rows, cols, group, xq,
                                                                                          scales);
  FOVEA_CUDA_CHECK_LAUNCH();
}

void launch_quantize_fp8(const bf16* x, int64_t n, uint8_t* xq, float* stats, cudaStream_t stream) {
  FOVEA_CUDA_CHECK(cudaMemsetAsync(stats, 0, kFp8StatsFloats * sizeof(float), stream));
  if (n == 0) return;
  const int blocks = int(std::min<int64_t>(blocks_for(n, kFp8Threads), 1024));
  absmax_kernel<<<blocks, kFp8Threads, 0, stream>>>(x, n, stats);
  FOVEA_CUDA_CHECK_LAUNCH();
  quantize_kernel<<<blocks, kFp8Threads, 0, stream>>>(x, n, xq, stats);
  FOVEA_CUDA_CHECK_LAUNCH();
}

}  // namespace fovea::cuda

// Dynamic FP8 (E4M3) quantization of a bf16 activation for linear_fp8_scaled. Per tensor: stats[0] = max|x| over
// the whole tensor, stats[kFp8ScaleSlot] = the scale max|x| / 448 (1 when x is all zeros), xq = e4m3(x / scale)
// rounded to nearest even and saturated at +-448 — the CPU reference's arithmetic (an IEEE division, no
// reciprocal). Per token or per 1x128 block: the same arithmetic per group (quantize_rows_kernel,
// quantize_blocks_kernel).
#include <cuda_fp8.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/fp8_codes.cuh"
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
  const float scale = fp8_scale_of(stats[0]);
  if (blockIdx.x == 0 && threadIdx.x == 0) stats[kFp8ScaleSlot] = scale;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    xq[i] = fp8_code(__bfloat162float(x[i]), scale);
}

// The per-token and per-block kernels read 4 bf16 (8 bytes) and write 4 codes (4 bytes) at a time: K is a
// multiple of 16 and a group starts at a multiple of 128, so a 4-element chunk never straddles a group or a row.
// Their arithmetic is the per-tensor kernel's, so a group's scale and codes equal quantize_e4m3_blocks' on the
// host.
__device__ __forceinline__ void load4(const bf16* p, float v[4]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  v[0] = lo.x, v[1] = lo.y, v[2] = hi.x, v[3] = hi.y;
}

__device__ __forceinline__ float absmax4(const float v[4]) {
  return fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
}

// Per token: one block of kFp8Threads per row; max|x| over the row (warps, then shared memory), then the codes.
__global__ void quantize_rows_kernel(const bf16* x, int64_t cols, uint8_t* xq, float* scales) {
  const int64_t r = blockIdx.x;
  const bf16* row = x + r * cols;
  float m = 0.f, v[4];
  for (int64_t c = 4 * int64_t(threadIdx.x); c < cols; c += 4 * int64_t(blockDim.x)) {
    load4(row + c, v);
    m = fmaxf(m, absmax4(v));
  }
  m = warp_max(m);
  __shared__ float partial[kFp8Threads / 32];
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = m;
  __syncthreads();
  float absmax = 0.f;
  for (int w = 0; w < kFp8Threads / 32; ++w) absmax = fmaxf(absmax, partial[w]);
  const float scale = fp8_scale_of(absmax);
  if (threadIdx.x == 0) scales[r] = scale;
  for (int64_t c = 4 * int64_t(threadIdx.x); c < cols; c += 4 * int64_t(blockDim.x)) {
    load4(row + c, v);
    store_fp8_codes<4>(xq + r * cols + c, v, scale);
  }
}

// Per 1x128 block: one warp per (row, block), 4 columns per lane; items in row-major order so neighbouring warps
// read neighbouring memory. A partial last block leaves its upper lanes idle (zeros for the max).
__global__ void quantize_blocks_kernel(const bf16* x, int64_t rows, int64_t cols, uint8_t* xq, float* scales,
                                       int64_t scale_ld) {
  const int64_t groups = (cols + 127) / 128;
  const int64_t item = int64_t(blockIdx.x) * (kFp8Threads / 32) + threadIdx.x / 32;
  if (item >= rows * groups) return;  // the whole warp leaves together
  const int64_t r = item / groups, g = item % groups, c = g * 128 + 4 * (threadIdx.x % 32);
  float v[4] = {0.f, 0.f, 0.f, 0.f};
  if (c < cols) load4(x + r * cols + c, v);
  const float scale = fp8_scale_of(warp_max(absmax4(v)));
  if (threadIdx.x % 32 == 0) scales[g * scale_ld + r] = scale;
  if (c < cols) store_fp8_codes<4>(xq + r * cols + c, v, scale);
}

// The (channel scale and) bias add in float and one bf16 rounding, as cuBLASLt's epilogue does.
__global__ void epilogue_kernel(bf16* y, const bf16* bias, const float* col_scale, int64_t n, int64_t cols,
                                bool gelu) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % cols;
    float v = __bfloat162float(y[i]) * (col_scale ? col_scale[c] : 1.f) + (bias ? __bfloat162float(bias[c]) : 0.f);
    if (gelu) v = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    y[i] = __float2bfloat16(v);
  }
}

}  // namespace

void launch_fp8_epilogue(bf16* y, const bf16* bias, int64_t rows, int64_t cols, bool gelu, cudaStream_t stream,
                         const float* col_scale) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  const int blocks = int(std::min<int64_t>(blocks_for(n, kFp8Threads), 4096));
  epilogue_kernel<<<blocks, kFp8Threads, 0, stream>>>(y, bias, col_scale, n, cols, gelu);
  FOVEA_CUDA_CHECK_LAUNCH();
}

void launch_quantize_fp8_groups(const bf16* x, int64_t rows, int64_t cols, int64_t group, uint8_t* xq, float* scales,
                                int64_t scale_ld, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  FOVEA_CHECK(cols % 4 == 0 && (group == cols || group == 128) && reinterpret_cast<uintptr_t>(x) % 8 == 0 &&
                  reinterpret_cast<uintptr_t>(xq) % 4 == 0 && scale_ld >= rows,
              "quantize_fp8_groups: needs K a multiple of 4, groups of K or 128 and aligned buffers");
  if (group == cols) {
    quantize_rows_kernel<<<unsigned(rows), kFp8Threads, 0, stream>>>(x, cols, xq, scales);
  } else {
    const int64_t items = rows * ((cols + 127) / 128);
    quantize_blocks_kernel<<<blocks_for(items, kFp8Threads / 32), kFp8Threads, 0, stream>>>(x, rows, cols, xq,
                                                                                            scales, scale_ld);
  }
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

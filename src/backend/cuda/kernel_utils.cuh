// Device helpers shared by the kernels: 8-wide bf16 loads/stores (16-byte accesses) with a scalar fallback, the
// residual update, and block-wide reductions; and allow_shared_memory(), the launch attributes of kernels with
// large shared memory.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"

namespace fovea::cuda {

// Loads W consecutive bf16 as float. W == 8 needs a 16-byte aligned pointer.
template <int W>
__device__ __forceinline__ void load_bf16(const __nv_bfloat16* p, float* v) {
  if constexpr (W == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      v[2 * i] = f.x;
      v[2 * i + 1] = f.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < W; ++i) v[i] = __bfloat162float(p[i]);
  }
}

template <int W>
__device__ __forceinline__ void store_bf16(__nv_bfloat16* p, const float* v) {
  if constexpr (W == 8) {
    uint4 raw;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
#pragma unroll
    for (int i = 0; i < W; ++i) p[i] = __float2bfloat16(v[i]);
  }
}

// x[0..W) += scale[0..W) ⊙ y[0..W) (scale null: 1) in float32, one fused multiply-add per element, stored as
// bf16; v gets the stored values. Every kernel that updates a residual stream goes through here (scale_add and the
// norms' residual forms), so the residuals they store are bit-identical.
template <int W>
__device__ __forceinline__ void scale_add_bf16(__nv_bfloat16* x, const __nv_bfloat16* y, const __nv_bfloat16* scale,
                                               float* v) {
  float b[W], s[W];
  load_bf16<W>(x, v);
  load_bf16<W>(y, b);
  if (scale) {
    load_bf16<W>(scale, s);
  } else {
#pragma unroll
    for (int i = 0; i < W; ++i) s[i] = 1.f;
  }
#pragma unroll
  for (int i = 0; i < W; ++i) v[i] = __bfloat162float(__float2bfloat16(__fmaf_rn(s[i], b[i], v[i])));
  store_bf16<W>(x, v);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result. `scratch` holds
// 32 floats; the trailing barrier lets callers reuse it immediately.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = lane < warps ? scratch[lane] : 0.f;
  total = warp_sum(total);
  __syncthreads();
  return total;
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = lane < warps ? scratch[lane] : -INFINITY;
  m = warp_max(m);
  __syncthreads();
  return m;
}

// silu(g) * u as every SwiGLU kernel computes it (silu_mul and its fused FP8 form must agree to the bit).
__device__ __forceinline__ float silu_times(float g, float u) { return g / (1.f + __expf(-g)) * u; }

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Lets `kernel` take `bytes` of dynamic shared memory (over 48 KB needs the attribute) and, with
// max_carveout, asks for the largest shared-memory carveout so that several such blocks fit a multiprocessor.
// Called at start-up (a graph capture must not contain it).
template <class Kernel>
void allow_shared_memory(Kernel kernel, int bytes, bool max_carveout) {
  FOVEA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  if (max_carveout)
    FOVEA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          int(cudaSharedmemCarveoutMaxShared)));
}

inline unsigned blocks_for(int64_t work, int threads) {
  return unsigned((work + threads - 1) / threads);
}

}  // namespace fovea::cuda

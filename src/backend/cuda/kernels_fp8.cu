// Dynamic per-tensor FP8 (E4M3) quantization of a bf16 activation for linear_fp8: stats[0] = max|x| over the
// whole tensor, stats[kFp8ScaleSlot] = the scale max|x| / 448 (1 when x is all zeros), xq = e4m3(x / scale) rounded to
// nearest even and saturated at +-448 — the CPU reference's arithmetic (an IEEE division, no reciprocal).
#include <cuda_fp8.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/kernels.h"

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

}  // namespace

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

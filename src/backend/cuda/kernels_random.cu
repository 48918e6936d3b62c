// Backend::fill_random on the device: the arithmetic of backend/random_fill.h, one element per thread, with the
// rounding of the CPU reference (a correctly rounded fma, then round-to-nearest-even conversions; E4M3 saturating),
// so both write the same bits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/kernels.h"
#include "backend/random_fill.h"

namespace fovea::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void fill_random_kernel(void* data, int64_t n, int kind, uint64_t key, RandomFill fill) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint64_t bits = random_fill::bits(key, uint64_t(i));
    const float v = __fmaf_rn(random_fill::unit(bits), fill.scale, fill.offset);
    switch (kind) {
      case kRandomF32:
        static_cast<float*>(data)[i] = v;
        break;
      case kRandomBF16:
        static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(v);
        break;
      case kRandomF16:
        static_cast<__half*>(data)[i] = __float2half_rn(v);
        break;
      case kRandomE4M3:
        static_cast<uint8_t*>(data)[i] = uint8_t(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
        break;
      case kRandomI32:
        static_cast<uint32_t*>(data)[i] = random_fill::integer(bits, fill);
        break;
      default:
        static_cast<uint8_t*>(data)[i] = uint8_t(random_fill::integer(bits, fill));
        break;
    }
  }
}

}  // namespace

void launch_fill_random(void* data, int64_t n, int kind, const RandomFill& fill, cudaStream_t stream) {
  if (n == 0) return;
  const unsigned blocks = unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, 65536));
  fill_random_kernel<<<blocks, kThreads, 0, stream>>>(data, n, kind, random_fill::key(fill.seed, fill.stream), fill);
  FOVEA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace fovea::cuda

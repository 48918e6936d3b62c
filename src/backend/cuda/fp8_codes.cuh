// The per-group E4M3 arithmetic every FP8 activation kernel shares (kernels_fp8.cu's quantizers and the fused
// producers of kernels_fp8_fused.cu), so that a fused kernel's codes and scales are bit-for-bit the separate
// quantizer's: scale = max|v| / 448 by IEEE division (1 for an all-zero group), code = e4m3(v / scale) rounded to
// nearest even and saturated at +-448 — the CPU reference's quantize_e4m3_blocks.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace fovea::cuda {

__device__ __forceinline__ float fp8_scale_of(float absmax) { return absmax > 0.f ? __fdiv_rn(absmax, 448.f) : 1.f; }

__device__ __forceinline__ uint8_t fp8_code(float v, float scale) {
  return uint8_t(__nv_cvt_float_to_fp8(__fdiv_rn(v, scale), __NV_SATFINITE, __NV_E4M3));
}

// W codes of v[0..W) to out (W = 1, 4 or 8; out aligned to W bytes).
template <int W>
__device__ __forceinline__ void store_fp8_codes(uint8_t* out, const float* v, float scale) {
  if constexpr (W == 1) {
    *out = fp8_code(v[0], scale);
  } else if constexpr (W == 4) {
    uint32_t packed = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) packed |= uint32_t(fp8_code(v[i], scale)) << (8 * i);
    *reinterpret_cast<uint32_t*>(out) = packed;
  } else {
    static_assert(W == 8, "store_fp8_codes: W is 1, 4 or 8");
    uint2 packed{0u, 0u};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      packed.x |= uint32_t(fp8_code(v[i], scale)) << (8 * i);
      packed.y |= uint32_t(fp8_code(v[4 + i], scale)) << (8 * i);
    }
    *reinterpret_cast<uint2*>(out) = packed;
  }
}

// What a bf16 store followed by a load makes of v: the value the separate quantizer would read back.
__device__ __forceinline__ float through_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

}  // namespace fovea::cuda

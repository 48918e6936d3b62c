// Device helpers of the W4A16 kernels (gemm_w4.cu: the dequantization; gemm_w4_v2.cu: the fused kernel): the
// param word's scale, the exact bf16x2 dequantization of two codes (why it is exact:
// gemm_w4.h), a 4-byte cp.async, the shared-memory row strides and the fused kernels' epilogue.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/attention_mma.cuh"
#include "backend/cuda/gemm_w4.h"
#include "backend/w4_layout.h"

namespace fovea::cuda::w4_device {

constexpr int kCodeStride = kW4TileK / 8 + 4;  // words per row: +4 puts the 8 rows a warp reads on distinct banks
constexpr int kXStride = kW4TileK + 8;         // bf16 per row: +16 bytes keeps ldmatrix free of bank conflicts

__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
  const uint32_t addr = uint32_t(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(addr), "l"(src), "r"(valid ? 4 : 0));
}

__device__ __forceinline__ float param_scale(uint32_t p) {
  const uint32_t bits = p & w4::kScaleMask;
  return (p & w4::kBf16ScaleFlag) ? __uint_as_float(bits << 16) : __half2float(__ushort_as_half(uint16_t(bits)));
}

// One group's scale and zero point as bf16x2 operands: s = hi + lo exactly (hi: s truncated to bf16, lo: the
// rest, at most 3 significant bits), zero = 128 + z in both halves.
struct GroupOperands {
  uint32_t hi, lo, zero;
};
__device__ __forceinline__ GroupOperands group_operands(uint32_t p) {
  const float s = param_scale(p);
  const float hi = __uint_as_float(__float_as_uint(s) & 0xFFFF0000u);
  const uint32_t lo = uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(s - hi)));  // exact: s - hi fits bf16
  const uint32_t hi_bits = __float_as_uint(hi) >> 16;
  const uint32_t z = uint32_t(w4::param_zero(p));
  return {hi_bits | (hi_bits << 16), lo | (lo << 16), 0x43004300u | z | (z << 16)};
}

// bf16 128 + q in each half from the codes in bits 0-3 and 16-19 of `bits`, in one lop3 ((a & b) | c: 0xEA) where
// the compiler would emit an AND and an OR (one immediate per LOP3).
__device__ __forceinline__ uint32_t biased_codes(uint32_t bits) {
  uint32_t q;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(q) : "r"(bits), "n"(0x000F000F), "r"(0x43004300));
  return q;
}

// bf16((q - z) * s) in each half of `q` = bf16x2 (128 + q), the exact product rounded once (see gemm_w4.h).
__device__ __forceinline__ uint32_t dequantize_biased(uint32_t q, const GroupOperands& g) {
  uint32_t d, lo, w;
  asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(q), "r"(g.zero));
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(lo) : "r"(d), "r"(g.lo));
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(w) : "r"(d), "r"(g.hi), "r"(lo));
  return w;
}

// This block's K stages: split blockIdx.y of gridDim.y takes an even share of K's 128-column stages.
struct StageRange {
  int begin, count;
};
__device__ __forceinline__ StageRange split_stages(int k) {
  const int split = int(blockIdx.y), splits = int(gridDim.y), k_tiles = k / kW4TileK;
  const int begin = split * k_tiles / splits;
  return {begin, (split + 1) * k_tiles / splits - begin};
}

// x's columns [k0, k0 + 128) of its first 16 * kMTiles rows into a shared tile of row stride kXStride, by
// kThreads threads; rows past m are zero-filled.
template <int kMTiles, int kThreads>
__device__ __forceinline__ void load_x_stage(bf16* s_x, const bf16* __restrict__ x, int m, int k, int k0, int tid) {
  constexpr int kParts = kW4TileK / 8;  // 16-byte parts per row
  static_assert(kMTiles * 16 * kParts % kThreads == 0, "every thread copies the same number of parts");
#pragma unroll
  for (int r = 0; r < kMTiles * 16 * kParts / kThreads; ++r) {
    const int i = tid + r * kThreads, row = i / kParts, part = i % kParts;
    const bool valid = row < m;
    const bf16* src = valid ? x + int64_t(row) * k + k0 + part * 8 : x;
    mma_detail::cp_async16(s_x + row * kXStride + part * 8, src, valid);
  }
}

// One 16-column step: the x fragments of the step's columns kk .. kk + 15 (ldmatrix from the shared x tile)
// times the warp's dequantized B fragments b[j] (n8 tile j), accumulated into acc.
template <int kMTiles, int kNTiles>
__device__ __forceinline__ void multiply_step(float (&acc)[kMTiles][kNTiles][4], const bf16* s_x, int kk, int lane,
                                              const uint32_t (&b)[kNTiles][2]) {
  uint32_t a[kMTiles][4];
#pragma unroll
  for (int mi = 0; mi < kMTiles; ++mi)
    mma_detail::ldmatrix_x4(a[mi], s_x + (mi * 16 + lane % 16) * kXStride + kk + (lane / 16) * 8);
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
    for (int mi = 0; mi < kMTiles; ++mi) mma_detail::mma_bf16(acc[mi][j], a[mi], b[j][0], b[j][1]);
  }
}

// A warp's m16n8 accumulator tiles (x tile mi, weight columns col0 + 8 j) to y (+ bias) or, when K is split, to
// split blockIdx.y's float32 partials. Rows past m and columns past n are not stored (n % 8 == 0).
template <int kMTiles, int kNTiles>
__device__ __forceinline__ void store_accumulators(const float (&acc)[kMTiles][kNTiles][4], int col0, int lane,
                                                   const bf16* __restrict__ bias, bf16* __restrict__ y,
                                                   float* __restrict__ partials, int m, int n) {
  const int split = int(blockIdx.y), splits = int(gridDim.y);
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < kMTiles; ++mi) {
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
      const int col = col0 + j * 8 + 2 * t;
      if (col >= n) continue;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = mi * 16 + g + 8 * h;
        if (row >= m) continue;
        float v0 = acc[mi][j][2 * h], v1 = acc[mi][j][2 * h + 1];
        if (splits > 1) {
          *reinterpret_cast<float2*>(partials + (int64_t(split) * m + row) * n + col) = make_float2(v0, v1);
          continue;
        }
        if (bias) {
          v0 += __bfloat162float(bias[col]);
          v1 += __bfloat162float(bias[col + 1]);
        }
        *reinterpret_cast<uint32_t*>(y + int64_t(row) * n + col) = mma_detail::pack_bf16(v0, v1);
      }
    }
  }
}

}  // namespace fovea::cuda::w4_device

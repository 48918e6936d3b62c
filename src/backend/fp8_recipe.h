// FP8 (E4M3) scaling recipes of Backend::linear_fp8_scaled: which values share one scale, and where the scales
// live. Host code, shared by the weight loader (runtime/weights.cc), the CPU reference, the CUDA backend (whose
// cuBLASLt scale modes read exactly these layouts) and the tests.
//
//   recipe   activation scales (dynamic)            weight scales (at load)           cuBLASLt (sm_90) modes
//   Tensor   one for the whole x                     one, [1]                          SCALAR_32F x SCALAR_32F
//   Channel  one per token (row of x)                one per output channel, [N]       OUTER_VEC_32F x OUTER_VEC_32F
//   Block    one per token and 128-column block      one per 128x128 block,            VEC128_32F x BLK128x128_32F
//            (on CUDA: [ceil(K/128), M rounded      [ceil(N/128), ld] (see below)
//            up to 4], token-contiguous)
//   ChannelAct128  as Block                          one per output channel, [N]       as Block with unit weight
//                                                                                      scales, then x w_scale[n]
//
// ChannelAct128 pairs the finest activation scales with per-channel weights: on trained weights (SmolLM2, 120
// prompts, this CPU reference) 0.54x per-tensor's mean KL against channel's 0.72x and block's 0.66x
// (bench/results/2026-12-02-smollm2-quantization-cpu.md). cuBLASLt has no per-channel x 1x128 mode, so CUDA runs
// the block GEMM with all-one weight block scales and applies the channel scale (then bias, GELU) after it.
//
// Every scale is max|v| / 448 over its group (1 for an all-zero group), every code f32_to_e4m3(v / scale): an
// IEEE division, no reciprocal, the same on the CPU and in the CUDA kernels. Partial last blocks (K or N not a
// multiple of 128) take what they cover.
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace fovea {

enum class Fp8Scaling : uint8_t { Tensor, Channel, Block, ChannelAct128 };
// Whether the activation takes one scale per token and 128-column block (Block, ChannelAct128).
inline bool fp8_activation_blocks(Fp8Scaling s) { return s == Fp8Scaling::Block || s == Fp8Scaling::ChannelAct128; }

inline constexpr int64_t kFp8Block = 128;
// The weight block scales' row stride: ceil(K/128) rounded up to a multiple of 4 (16 bytes, the alignment
// cuBLASLt's BLK128x128_32F mode expects of each row of scales); the padding columns hold 1 and are never read.
inline int64_t fp8_block_scale_ld(int64_t k) { return ((k + kFp8Block - 1) / kFp8Block + 3) / 4 * 4; }
inline int64_t fp8_blocks(int64_t n) { return (n + kFp8Block - 1) / kFp8Block; }

// w_scale's shape for a [n, k] weight under `scaling`: {1}, {n} (Channel, ChannelAct128) or
// {ceil(n/128), fp8_block_scale_ld(k)}.
Shape fp8_weight_scale_shape(Fp8Scaling scaling, int64_t n, int64_t k);

// "tensor", "channel", "block", "channel-act128".
const char* fp8_scaling_name(Fp8Scaling scaling);

// Block-wise E4M3 quantization of a row-major [rows, cols] array: block (i, j) covers rows [i*block_rows, ...)
// and columns [j*block_cols, ...) (the last ones partial); its scale goes to scales[i * scale_ld + j]. Per row:
// block_rows = 1, block_cols = cols (per-channel weights, per-token activations); DeepSeek's weight blocks:
// 128 x 128; its activation blocks: 1 x 128 (then the caller lays the scales out as it needs). Large arrays are
// split over ThreadPool::global(); the result does not depend on the split.
void quantize_e4m3_blocks(const float* v, int64_t rows, int64_t cols, int64_t block_rows, int64_t block_cols,
                          uint8_t* codes, float* scales, int64_t scale_ld);

// A weight [n, k] (F32 host) quantized under `scaling`: codes [n, k] F8E4M3 and scales of
// fp8_weight_scale_shape(scaling, n, k) F32, both host tensors.
struct Fp8HostWeight {
  Tensor codes, scale;
};
Fp8HostWeight quantize_fp8_weight(const Tensor& w, Fp8Scaling scaling);

}  // namespace fovea

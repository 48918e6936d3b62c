// The bit layout of W4Weight (backend.h): where each 4-bit code, scale and zero point of a W4A16 linear lives.
// Shared by the loader that repacks checkpoints into it (model/w4_repack.cc), the CPU reference and the CUDA
// kernels (backend/cuda/gemm_w4.h says why the layout is this one).
//
// codes, row n: stored columns in chunks of 32, four 32-bit words per chunk (a short last chunk is padded with
// zero codes). Column c = 32·chunk + 16·step + 8·half + 2·t + e sits in word 4·chunk + t, nibble
// 2·step + half + 4·e (bits 4·nibble .. 4·nibble + 3). So word t of a chunk holds exactly the eight codes that
// lane t (mod 4) of an mma.sync m16n8k16 B fragment needs for the chunk's two 16-column steps, and the pairs
// (nibble i, nibble i + 4) are the fragment's (column 2t, 2t + 1) register halves.
//
// params, element (n, g): bits 0-15 the scale s as F16 bits (bit 31 clear) or BF16 bits (bit 31 set), bits
// 16-19 the zero point z. The dequantized weight is float(q - z) * s in float32, rounded once to bf16.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace fovea {

struct W4Weight;

namespace w4 {

inline constexpr int kChunkColumns = 32;
inline constexpr int kChunkWords = 4;
inline constexpr uint32_t kScaleMask = 0xFFFFu;
inline constexpr int kZeroShift = 16;
inline constexpr uint32_t kBf16ScaleFlag = 1u << 31;

// Words per row of codes for K input columns.
constexpr int64_t code_words(int64_t k) { return (k + kChunkColumns - 1) / kChunkColumns * kChunkWords; }

struct CodeSlot {
  int64_t word;  // within the row
  int shift;     // bit offset of the nibble
};
constexpr CodeSlot code_slot(int64_t column) {
  const int r = int(column % kChunkColumns);
  const int step = r / 16, half = (r % 16) / 8, t = (r % 8) / 2, e = r % 2;
  return {column / kChunkColumns * kChunkWords + t, 4 * (2 * step + half + 4 * e)};
}

constexpr uint32_t make_param(uint16_t scale_bits, bool scale_is_bf16, int zero) {
  return uint32_t(scale_bits) | (uint32_t(zero & 0xF) << kZeroShift) | (scale_is_bf16 ? kBf16ScaleFlag : 0u);
}
constexpr int param_zero(uint32_t p) { return int((p >> kZeroShift) & 0xFu); }
inline float param_scale(uint32_t p) {
  return (p & kBf16ScaleFlag) ? bf16_to_f32(uint16_t(p & kScaleMask)) : f16_to_f32(uint16_t(p & kScaleMask));
}
// The weight value in float32 before the one rounding to bf16 (the order of w4_dequant.cc: (q - z), then * s).
inline float dequantize(int q, uint32_t p) { return (float(q) - float(param_zero(p))) * param_scale(p); }

// Checks a W4Weight's tensors (dtypes, shapes, group, perms; all on `device`) for op `op`; throws fovea::Error.
void check_weight(const W4Weight& w, Device device, const char* op);

}  // namespace w4
}  // namespace fovea

// The two passes of the resampler for one row, in a scalar and an AVX2 version (identical results).
#pragma once
#include <cstddef>
#include <cstdint>

#include "image/resample.h"

namespace fovea::resample_kernels {

// Horizontal: RGB row `in` → `out_width` RGB pixels. The AVX2 version reads one byte past the last pixel it
// uses, so `in` must have one readable byte after the row.
void horizontal_scalar(const uint8_t* in, uint8_t* out, const ResampleWeights& w);
void horizontal_avx2(const uint8_t* in, uint8_t* out, const ResampleWeights& w, const int32_t* weights_x4);

// Vertical: output row from `count` input rows starting at `first_row` (rows `stride` bytes apart), each
// `row_bytes` long, weighted by `k`.
void vertical_scalar(const uint8_t* first_row, size_t stride, int count, const int32_t* k, uint8_t* out,
                     size_t row_bytes);
void vertical_avx2(const uint8_t* first_row, size_t stride, int count, const int32_t* k, uint8_t* out,
                   size_t row_bytes);

// Pillow's clip8 on a fixed-point sum: shift out the fraction, clamp to a byte.
inline uint8_t clip8(int32_t sum) {
  const int32_t v = sum >> kResamplePrecisionBits;
  return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
}
constexpr int32_t kHalf = 1 << (kResamplePrecisionBits - 1);

}  // namespace fovea::resample_kernels

// AVX2 kernels of the resampler, compiled with -mavx2 and only called after a runtime CPU check. Integer
// arithmetic only, so they give exactly the scalar kernels' bytes: 22-bit weights × 8-bit pixels summed in
// int32, as Pillow does.
#include <immintrin.h>

#include <cstring>

#include "image/resample_kernels.h"

namespace fovea::resample_kernels {
namespace {

inline __m128i load4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm_cvtsi32_si128(v);
}

// Shifts out the fraction and clamps 8 int32 sums to bytes (saturating packs = Pillow's clip8 table).
inline __m128i pack8(__m256i sums) {
  const __m256i shifted = _mm256_srai_epi32(sums, kResamplePrecisionBits);
  const __m256i words = _mm256_packs_epi32(shifted, shifted);             // [a0-3 a0-3 | a4-7 a4-7]
  const __m256i ordered = _mm256_permute4x64_epi64(words, 0b00001000);    // [a0-3 a4-7 ...]
  const __m128i low = _mm256_castsi256_si128(ordered);
  return _mm_packus_epi16(low, low);
}

}  // namespace

// Fixed-point sum (R, G, B, ignored) of one output pixel, before rounding.
inline __m128i horizontal_pixel_sum(const uint8_t* p, const int32_t* k, int count) {
  __m256i acc = _mm256_setzero_si256();
  int t = 0;
  for (; t + 1 < count; t += 2) {
    // Two taps at once: pixels t and t+1 (4 bytes each, the 4th belongs to the next pixel and is ignored).
    const __m128i pair = _mm_unpacklo_epi32(load4(p + 3 * t), load4(p + 3 * t + 3));
    const __m256i px = _mm256_cvtepu8_epi32(pair);
    acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(px, _mm256_loadu_si256((const __m256i*)(k + 4 * t))));
  }
  __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  if (t < count) {
    const __m128i px = _mm_cvtepu8_epi32(load4(p + 3 * t));
    sum = _mm_add_epi32(sum, _mm_mullo_epi32(px, _mm_loadu_si128((const __m128i*)(k + 4 * t))));
  }
  return sum;
}

void horizontal_avx2(const uint8_t* in, uint8_t* out, const ResampleWeights& w, const int32_t* weights_x4) {
  const int out_width = int(w.first.size());
  const int ksize_even = (w.ksize + 1) & ~1;
  const size_t stride_k = size_t(ksize_even) * 4;
  const __m128i half = _mm_set1_epi32(kHalf);
  // RGBX RGBX RGBX RGBX → RGB RGB RGB RGB (12 bytes) after packing four pixels.
  const __m128i drop_x = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  int xx = 0;
  for (; xx + 4 <= out_width; xx += 4) {
    __m128i sums[4];
    for (int j = 0; j < 4; ++j)
      sums[j] = horizontal_pixel_sum(in + 3 * size_t(w.first[xx + j]), weights_x4 + size_t(xx + j) * stride_k,
                                     w.count[xx + j]);
    for (int j = 0; j < 4; ++j) sums[j] = _mm_srai_epi32(_mm_add_epi32(sums[j], half), kResamplePrecisionBits);
    const __m128i words2 = _mm_packs_epi32(sums[2], sums[3]);
    const __m128i bytes = _mm_shuffle_epi8(_mm_packus_epi16(_mm_packs_epi32(sums[0], sums[1]), words2), drop_x);
    _mm_storel_epi64((__m128i*)(out + 3 * size_t(xx)), bytes);
    const int32_t tail = _mm_extract_epi32(bytes, 2);
    std::memcpy(out + 3 * size_t(xx) + 8, &tail, 4);
  }
  for (; xx < out_width; ++xx) {
    __m128i sum = horizontal_pixel_sum(in + 3 * size_t(w.first[xx]), weights_x4 + size_t(xx) * stride_k, w.count[xx]);
    sum = _mm_srai_epi32(_mm_add_epi32(sum, half), kResamplePrecisionBits);
    const __m128i words = _mm_packs_epi32(sum, sum);
    const uint32_t bytes = uint32_t(_mm_cvtsi128_si32(_mm_packus_epi16(words, words)));
    out[3 * xx] = uint8_t(bytes);
    out[3 * xx + 1] = uint8_t(bytes >> 8);
    out[3 * xx + 2] = uint8_t(bytes >> 16);
  }
}

void vertical_avx2(const uint8_t* first_row, size_t stride, int count, const int32_t* k, uint8_t* out,
                   size_t row_bytes) {
  size_t i = 0;
  const __m256i half = _mm256_set1_epi32(kHalf);
  for (; i + 32 <= row_bytes; i += 32) {
    __m256i acc0 = half, acc1 = half, acc2 = half, acc3 = half;
    const uint8_t* p = first_row + i;
    for (int t = 0; t < count; ++t, p += stride) {
      const __m256i weight = _mm256_set1_epi32(k[t]);
      const __m128i lo = _mm_loadu_si128((const __m128i*)p);
      const __m128i hi = _mm_loadu_si128((const __m128i*)(p + 16));
      acc0 = _mm256_add_epi32(acc0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(lo), weight));
      acc1 = _mm256_add_epi32(acc1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)), weight));
      acc2 = _mm256_add_epi32(acc2, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(hi), weight));
      acc3 = _mm256_add_epi32(acc3, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)), weight));
    }
    _mm_storel_epi64((__m128i*)(out + i), pack8(acc0));
    _mm_storel_epi64((__m128i*)(out + i + 8), pack8(acc1));
    _mm_storel_epi64((__m128i*)(out + i + 16), pack8(acc2));
    _mm_storel_epi64((__m128i*)(out + i + 24), pack8(acc3));
  }
  for (; i + 8 <= row_bytes; i += 8) {
    __m256i acc = half;
    const uint8_t* p = first_row + i;
    for (int t = 0; t < count; ++t, p += stride) {
      const __m128i v = _mm_loadl_epi64((const __m128i*)p);
      acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(v), _mm256_set1_epi32(k[t])));
    }
    _mm_storel_epi64((__m128i*)(out + i), pack8(acc));
  }
  if (i < row_bytes) vertical_scalar(first_row + i, stride, count, k, out + i, row_bytes - i);
}

}  // namespace fovea::resample_kernels

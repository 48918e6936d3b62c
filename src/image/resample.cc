// The resampler's driver (Pillow's ImagingResampleInner) and its scalar kernels.
#include <cstring>

#include "image/resample.h"
#include "image/resample_kernels.h"

namespace fovea {
namespace resample_kernels {

void horizontal_scalar(const uint8_t* in, uint8_t* out, const ResampleWeights& w) {
  const int out_width = int(w.first.size());
  for (int xx = 0; xx < out_width; ++xx) {
    const uint8_t* p = in + 3 * size_t(w.first[xx]);
    const int32_t* k = &w.weights[size_t(xx) * w.ksize];
    int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
    for (int t = 0; t < w.count[xx]; ++t) {
      s0 += p[3 * t] * k[t];
      s1 += p[3 * t + 1] * k[t];
      s2 += p[3 * t + 2] * k[t];
    }
    out[3 * xx] = clip8(s0);
    out[3 * xx + 1] = clip8(s1);
    out[3 * xx + 2] = clip8(s2);
  }
}

void vertical_scalar(const uint8_t* first_row, size_t stride, int count, const int32_t* k, uint8_t* out,
                     size_t row_bytes) {
  for (size_t i = 0; i < row_bytes; ++i) {
    int32_t sum = kHalf;
    for (int t = 0; t < count; ++t) sum += first_row[t * stride + i] * k[t];
    out[i] = clip8(sum);
  }
}

}  // namespace resample_kernels

namespace {

using namespace resample_kernels;

// Weights repeated over 4 lanes (R, G, B, ignored) and padded to an even tap count, the AVX2 layout.
std::vector<int32_t> widen_weights(const ResampleWeights& w) {
  const int ksize_even = (w.ksize + 1) & ~1;
  std::vector<int32_t> out(w.first.size() * ksize_even * 4, 0);
  for (size_t xx = 0; xx < w.first.size(); ++xx)
    for (int t = 0; t < w.count[xx]; ++t)
      for (int lane = 0; lane < 4; ++lane)
        out[(xx * ksize_even + t) * 4 + lane] = w.weights[xx * w.ksize + t];
  return out;
}

void for_rows(ThreadPool* pool, int64_t rows, const std::function<void(int64_t, int64_t)>& body) {
  if (pool && pool->size() > 0 && rows > 16) {
    pool->parallel_for(rows, body, 16);
  } else {
    body(0, rows);
  }
}

RgbImage resize(const RgbImage& in, int out_width, int out_height, ThreadPool* pool, bool fast) {
  FOVEA_CHECK(in.width > 0 && in.height > 0 && out_width > 0 && out_height > 0, "resize: bad sizes ", in.width,
              "x", in.height, " -> ", out_width, "x", out_height);
  if (in.width == out_width && in.height == out_height) return in;  // PIL returns a copy
  const bool need_horizontal = out_width != in.width;
  const bool need_vertical = out_height != in.height;
  const ResampleWeights vert = bicubic_weights(in.height, out_height);
  // Only the input rows the vertical pass reads go through the horizontal pass.
  const int first_row = vert.first[0];
  const int last_row = vert.first[out_height - 1] + vert.count[out_height - 1];

  const uint8_t* source = in.pixels.data();
  int source_width = in.width;
  int row_offset = 0;  // row of `source` that vertical bounds count from
  RgbImage temp;
  if (need_horizontal) {
    const ResampleWeights horiz = bicubic_weights(in.width, out_width);
    const std::vector<int32_t> widened = fast ? widen_weights(horiz) : std::vector<int32_t>{};
    temp.width = out_width;
    temp.height = last_row - first_row;
    temp.pixels.resize(size_t(temp.width) * temp.height * 3);
    const size_t in_stride = size_t(in.width) * 3;
    for_rows(pool, temp.height, [&](int64_t begin, int64_t end) {
      std::vector<uint8_t> padded;  // the AVX2 kernel reads one byte past a row: copy the image's last row
      for (int64_t r = begin; r < end; ++r) {
        const int64_t y = first_row + r;
        const uint8_t* row = in.pixels.data() + size_t(y) * in_stride;
        uint8_t* dst = temp.pixels.data() + size_t(r) * out_width * 3;
        if (!fast) {
          horizontal_scalar(row, dst, horiz);
          continue;
        }
        if (y == in.height - 1) {
          padded.assign(row, row + in_stride);
          padded.resize(in_stride + 4, 0);
          row = padded.data();
        }
        horizontal_avx2(row, dst, horiz, widened.data());
      }
    });
    source = temp.pixels.data();
    source_width = out_width;
    row_offset = first_row;
    if (!need_vertical) return temp;
  }

  RgbImage out;
  out.width = source_width;
  out.height = out_height;
  out.pixels.resize(size_t(out.width) * out.height * 3);
  const size_t stride = size_t(source_width) * 3;
  for_rows(pool, out_height, [&](int64_t begin, int64_t end) {
    for (int64_t yy = begin; yy < end; ++yy) {
      const uint8_t* first = source + size_t(vert.first[yy] - row_offset) * stride;
      const int32_t* k = &vert.weights[size_t(yy) * vert.ksize];
      uint8_t* dst = out.pixels.data() + size_t(yy) * stride;
      if (fast) {
        vertical_avx2(first, stride, vert.count[yy], k, dst, stride);
      } else {
        vertical_scalar(first, stride, vert.count[yy], k, dst, stride);
      }
    }
  });
  return out;
}

}  // namespace

bool resample_uses_avx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}

RgbImage resize_bicubic(const RgbImage& in, int out_width, int out_height, ThreadPool* pool) {
  return resize(in, out_width, out_height, pool, resample_uses_avx2());
}

RgbImage resize_bicubic_reference(const RgbImage& in, int out_width, int out_height) {
  return resize(in, out_width, out_height, nullptr, false);
}

}  // namespace fovea

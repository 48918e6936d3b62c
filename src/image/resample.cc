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

// Where the output rows go: `segments` pieces of `segment_bytes` per row (one piece for a plain image, one per
// tile column when writing tiles directly).
struct RowSink {
  int segments = 1;
  size_t segment_bytes = 0;
  std::function<uint8_t*(int64_t row, int segment)> at;
};

// Pillow's ImagingResampleInner. Returns false when only the horizontal pass ran (its result is `*temp_out`
// and the caller copies it into the sink), true when the sink holds the output.
bool resize_into(const RgbImage& in, int out_width, int out_height, ThreadPool* pool, bool fast,
                 const RowSink& sink, RgbImage* temp_out) {
  FOVEA_CHECK(in.width > 0 && in.height > 0 && out_width > 0 && out_height > 0, "resize: bad sizes ", in.width,
              "x", in.height, " -> ", out_width, "x", out_height);
  FOVEA_CHECK(in.pixels.size() == size_t(in.width) * in.height * 3, "resize: pixel buffer does not match ",
              in.width, "x", in.height);
  const bool need_horizontal = out_width != in.width;
  const bool need_vertical = out_height != in.height;
  const ResampleWeights vert = bicubic_weights(in.height, out_height);
  // Only the input rows the vertical pass reads go through the horizontal pass.
  const int first_row = vert.first[0];
  const int last_row = vert.first[out_height - 1] + vert.count[out_height - 1];

  const uint8_t* source = in.pixels.data();
  int row_offset = 0;  // row of `source` that vertical bounds count from
  RgbImage& temp = *temp_out;
  if (need_horizontal) {
    const ResampleWeights horiz = bicubic_weights(in.width, out_width);
    const std::vector<int32_t> widened = fast ? widen_weights(horiz) : std::vector<int32_t>{};
    temp.width = out_width;
    temp.height = need_vertical ? last_row - first_row : in.height;
    const int temp_first = need_vertical ? first_row : 0;
    temp.pixels.resize(size_t(temp.width) * temp.height * 3);
    const size_t in_stride = size_t(in.width) * 3;
    for_rows(pool, temp.height, [&](int64_t begin, int64_t end) {
      std::vector<uint8_t> padded;  // the AVX2 kernel reads one byte past a row: copy the image's last row
      for (int64_t r = begin; r < end; ++r) {
        const int64_t y = temp_first + r;
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
    if (!need_vertical) return false;
    source = temp.pixels.data();
    row_offset = first_row;
  } else if (!need_vertical) {
    temp = in;  // PIL returns a copy
    return false;
  }

  const size_t stride = size_t(out_width) * 3;
  for_rows(pool, out_height, [&](int64_t begin, int64_t end) {
    for (int64_t yy = begin; yy < end; ++yy) {
      const uint8_t* first = source + size_t(vert.first[yy] - row_offset) * stride;
      const int32_t* k = &vert.weights[size_t(yy) * vert.ksize];
      for (int seg = 0; seg < sink.segments; ++seg) {
        const uint8_t* seg_first = first + size_t(seg) * sink.segment_bytes;
        uint8_t* dst = sink.at(yy, seg);
        if (fast) {
          vertical_avx2(seg_first, stride, vert.count[yy], k, dst, sink.segment_bytes);
        } else {
          vertical_scalar(seg_first, stride, vert.count[yy], k, dst, sink.segment_bytes);
        }
      }
    }
  });
  return true;
}

RgbImage resize(const RgbImage& in, int out_width, int out_height, ThreadPool* pool, bool fast) {
  RgbImage out;
  out.width = out_width;
  out.height = out_height;
  out.pixels.resize(size_t(out_width) * out_height * 3);
  RowSink sink{1, size_t(out_width) * 3,
               [&](int64_t row, int) { return out.pixels.data() + size_t(row) * out_width * 3; }};
  RgbImage temp;
  if (!resize_into(in, out_width, out_height, pool, fast, sink, &temp)) return temp;
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

void resize_bicubic_to_tiles(const RgbImage& in, int cols, int rows, int tile, uint8_t* tiles, ThreadPool* pool) {
  FOVEA_CHECK(cols > 0 && rows > 0 && tile > 0, "resize: bad tile grid ", cols, "x", rows, " of ", tile);
  const size_t tile_row_bytes = size_t(tile) * 3, tile_bytes = tile_row_bytes * tile;
  RowSink sink{cols, tile_row_bytes, [&](int64_t row, int col) {
                 const int64_t tile_index = (row / tile) * cols + col;
                 return tiles + size_t(tile_index) * tile_bytes + size_t(row % tile) * tile_row_bytes;
               }};
  RgbImage whole;
  if (resize_into(in, cols * tile, rows * tile, pool, resample_uses_avx2(), sink, &whole)) return;
  // Only one pass (or none) was needed: cut the full-size result into tiles.
  const size_t whole_stride = size_t(whole.width) * 3;
  for (int64_t row = 0; row < int64_t(rows) * tile; ++row)
    for (int col = 0; col < cols; ++col)
      std::memcpy(sink.at(row, col), whole.pixels.data() + size_t(row) * whole_stride + col * tile_row_bytes,
                  tile_row_bytes);
}

}  // namespace fovea

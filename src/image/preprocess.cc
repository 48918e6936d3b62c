// The pipeline: decode → grid → Pillow-exact resize → tiles (+ thumbnail) → ImageNet normalisation.
#include "image/preprocess.h"

#include <cstring>

#include "core/thread_pool.h"
#include "image/resample.h"
#include "image/tiling.h"

namespace fovea {
namespace {

// Copies the cols × rows tiles of `grid_image` (tile-sized cells, row-major) into tiles [first, ...).
void split_tiles(const RgbImage& grid_image, int cols, int rows, int tile, uint8_t* tiles) {
  const size_t tile_row_bytes = size_t(tile) * 3;
  const size_t tile_bytes = tile_row_bytes * tile;
  const size_t image_stride = size_t(grid_image.width) * 3;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      uint8_t* dst = tiles + size_t(r * cols + c) * tile_bytes;
      const uint8_t* src = grid_image.pixels.data() + size_t(r) * tile * image_stride + size_t(c) * tile_row_bytes;
      for (int y = 0; y < tile; ++y) std::memcpy(dst + y * tile_row_bytes, src + y * image_stride, tile_row_bytes);
    }
}

}  // namespace

void choose_tile_grid(int width, int height, const PreprocessOptions& options, int* cols, int* rows,
                      bool* thumbnail) {
  const TileGrid grid =
      options.compact
          ? compact_tile_grid(width, height, options.min_tiles, options.max_tiles, options.tile_size,
                              options.use_thumbnail)
          : official_tile_grid(width, height, options.min_tiles, options.max_tiles, options.tile_size,
                               options.use_thumbnail);
  *cols = grid.cols;
  *rows = grid.rows;
  *thumbnail = grid.thumbnail;
}

Tensor normalize_tiles(const Tensor& tiles_u8) {
  FOVEA_CHECK(tiles_u8.dtype == DType::U8 && tiles_u8.rank() == 4 && tiles_u8.dim(3) == 3,
              "normalize_tiles: expected [T, S, S, 3] U8, got ", shape_str(tiles_u8.shape));
  const int64_t count = tiles_u8.dim(0), height = tiles_u8.dim(1), width = tiles_u8.dim(2);
  // Every byte maps to one float per channel: a 3 × 256 table computed with torchvision's float32 ops.
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std_dev[3] = {0.229f, 0.224f, 0.225f};
  float table[3][256];
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) table[c][v] = (float(v) / 255.0f - mean[c]) / std_dev[c];
  Tensor out = Tensor::host(DType::F32, {count, 3, height, width});
  const uint8_t* src = tiles_u8.ptr<uint8_t>();
  float* dst = out.ptr<float>();
  const size_t plane = size_t(height) * width;
  for (int64_t t = 0; t < count; ++t) {
    const uint8_t* tile = src + size_t(t) * plane * 3;
    float* out_tile = dst + size_t(t) * plane * 3;
    for (size_t i = 0; i < plane; ++i) {
      out_tile[i] = table[0][tile[3 * i]];
      out_tile[plane + i] = table[1][tile[3 * i + 1]];
      out_tile[2 * plane + i] = table[2][tile[3 * i + 2]];
    }
  }
  return out;
}

PreprocessedImage preprocess_rgb(const RgbImage& image, const PreprocessOptions& options) {
  FOVEA_CHECK(options.tile_size > 0 && options.tile_size <= 4096, "preprocess: bad tile size ", options.tile_size);
  FOVEA_CHECK(options.max_tiles >= 1 && options.max_tiles <= 64, "preprocess: max tiles must be 1..64, got ",
              options.max_tiles);
  FOVEA_CHECK(options.min_tiles >= 1 && options.min_tiles <= options.max_tiles,
              "preprocess: min tiles must be 1..max tiles, got ", options.min_tiles);
  PreprocessedImage out;
  choose_tile_grid(image.width, image.height, options, &out.cols, &out.rows, &out.thumbnail);
  const int tile = options.tile_size;
  out.tiles_u8 = Tensor::host(DType::U8, {out.num_tiles(), tile, tile, 3});
  uint8_t* tiles = out.tiles_u8.ptr<uint8_t>();
  {
    const RgbImage grid_image = resize_bicubic(image, out.cols * tile, out.rows * tile, options.pool);
    split_tiles(grid_image, out.cols, out.rows, tile, tiles);
  }
  if (out.thumbnail) {
    const RgbImage thumb = resize_bicubic(image, tile, tile, options.pool);
    std::memcpy(tiles + size_t(out.cols * out.rows) * tile * tile * 3, thumb.pixels.data(), thumb.pixels.size());
  }
  if (options.with_pixel_values) out.pixel_values = normalize_tiles(out.tiles_u8);
  return out;
}

PreprocessedImage preprocess_image(const std::string& bytes, const PreprocessOptions& options) {
  return preprocess_rgb(decode_image(bytes, options.limits, options.exif_transpose), options);
}

}  // namespace fovea

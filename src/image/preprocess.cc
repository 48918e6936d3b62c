// The pipeline: decode → grid → Pillow-exact resize → tiles (+ thumbnail) → ImageNet normalisation.
#include "image/preprocess.h"

#include <cstring>

#include "core/thread_pool.h"
#include "image/normalize_kernels.h"
#include "image/resample.h"
#include "image/tiling.h"

namespace fovea {
namespace {

// Host tensor without Tensor::host's zero fill, for outputs that are written in full.
template <typename T>
Tensor uninitialized_host(DType dtype, Shape shape) {
  size_t count = 1;
  for (int64_t d : shape) count *= size_t(d);
  std::shared_ptr<T[]> storage(new T[count]);
  Tensor out;
  out.data = storage.get();
  out.dtype = dtype;
  out.shape = std::move(shape);
  out.owner = std::shared_ptr<void>(storage, storage.get());
  return out;
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
  const normalize_kernels::ChannelConstants& constants = normalize_kernels::kImageNet;
  // Every element is written below, so skip Tensor::host's zero fill (28 MB for 13 tiles).
  const size_t plane = size_t(height) * width;
  Tensor out = uninitialized_host<float>(DType::F32, {count, 3, height, width});
  const bool avx2 = resample_uses_avx2();
  const uint8_t* src = tiles_u8.ptr<uint8_t>();
  float* dst = out.ptr<float>();
  for (int64_t t = 0; t < count; ++t) {
    const uint8_t* tile = src + size_t(t) * plane * 3;
    float* r = dst + size_t(t) * plane * 3;
    if (avx2) {
      normalize_kernels::normalize_pixels_avx2(tile, plane, constants, r, r + plane, r + 2 * plane);
    } else {
      normalize_kernels::normalize_pixels_generic(tile, plane, constants, r, r + plane, r + 2 * plane);
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
  out.tiles_u8 = uninitialized_host<uint8_t>(DType::U8, {out.num_tiles(), tile, tile, 3});
  uint8_t* tiles = out.tiles_u8.ptr<uint8_t>();
  resize_bicubic_to_tiles(image, out.cols, out.rows, tile, tiles, options.pool);
  if (out.thumbnail)
    resize_bicubic_to_tiles(image, 1, 1, tile, tiles + size_t(out.cols * out.rows) * tile * tile * 3, options.pool);
  if (options.with_pixel_values) out.pixel_values = normalize_tiles(out.tiles_u8);
  return out;
}

PreprocessedImage preprocess_image(const std::string& bytes, const PreprocessOptions& options) {
  return preprocess_rgb(decode_image(bytes, options.limits, options.exif_transpose), options);
}

}  // namespace fovea

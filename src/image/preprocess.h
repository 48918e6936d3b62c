// Photo -> model input, exactly as InternVL's reference does it with Pillow: decode, convert('RGB'), pick the
// tile grid, bicubic-resize (Pillow-exact), crop tiles, add a thumbnail, normalise.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace fovea {

class ThreadPool;

// Every limit on one image's decode (docs/components/image-pipeline.md lists them); each is named in the error
// it raises.
struct ImageLimits {
  int64_t max_pixels = 89478485;          // Pillow's decompression-bomb threshold (warning level)
  int64_t max_bytes = 64ll * 1024 * 1024;  // encoded file size
  // Progressive JPEG scans: each one re-reads every coefficient (400 scans of 8000x8000 cost 12.7 CPU-s).
  // Encoders write about 10; libjpeg-turbo's tools allow 500.
  int max_jpeg_scans = 100;
  // CPU time of the decoding thread, checked while JPEG/PNG/GIF rows are decoded.
  double max_decode_cpu_seconds = 8.0;
  int64_t max_png_chunk_bytes = 16ll << 20;  // any PNG chunk but IDAT/fdAT (ICC, EXIF, text, ...)
  int64_t max_png_text_bytes = 1 << 20;      // one zTXt/iTXt/iCCP inflated: Pillow's MAX_TEXT_CHUNK
};

struct PreprocessOptions {
  int min_tiles = 1;
  int max_tiles = 12;
  bool use_thumbnail = true;
  bool compact = false;        // false: the official InternVL policy; true: Fovea's token-saving policy
  bool exif_transpose = false; // the reference ignores EXIF orientation
  int tile_size = 448;
  ImageLimits limits;
  bool with_pixel_values = true;  // false: only tiles_u8 (e.g. when normalisation happens on the GPU)
  ThreadPool* pool = nullptr;  // optional: spreads one image's resize over these threads (output unchanged)
};

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // row-major RGB
};

struct PreprocessedImage {
  int cols = 0;            // tile grid (cols × rows), before the thumbnail
  int rows = 0;
  bool thumbnail = false;  // a 448×448 thumbnail was appended
  int num_tiles() const { return cols * rows + (thumbnail ? 1 : 0); }
  Tensor tiles_u8;         // [T, S, S, 3] U8, RGB before normalisation
  Tensor pixel_values;     // [T, 3, S, S] F32, normalised with ImageNet mean/std
};

// Decodes JPEG/PNG/WebP/BMP/GIF bytes to RGB as Pillow's Image.open(f).convert('RGB') does. Throws
// fovea::Error with a one-line message (format, reason, the limit when one was hit) on bad input.
RgbImage decode_image(const std::string& bytes, const ImageLimits& limits = {}, bool exif_transpose = false);
RgbImage decode_image_file(const std::string& path, const ImageLimits& limits = {}, bool exif_transpose = false);

// Full pipeline from encoded bytes. Thread-safe; parallelism across images is the caller's.
PreprocessedImage preprocess_image(const std::string& bytes, const PreprocessOptions& options);

// The same from decoded pixels.
PreprocessedImage preprocess_rgb(const RgbImage& image, const PreprocessOptions& options);

// The grid the options' policy picks for a width × height image (cols, rows, thumbnail).
void choose_tile_grid(int width, int height, const PreprocessOptions& options, int* cols, int* rows,
                      bool* thumbnail);

// ImageNet normalisation exactly as torchvision's ToTensor + Normalize compute it in float32:
// [T, S, S, 3] U8 → [T, 3, S, S] F32.
Tensor normalize_tiles(const Tensor& tiles_u8);

}  // namespace fovea

// Internal to src/image: the per-format decoders behind decode_image(), and the helpers they share.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "image/preprocess.h"

namespace fovea::image_internal {

enum class ImageFormat { Unknown, Jpeg, Png, Webp, Bmp, Gif, Tiff, Jpeg2000, Avif, Other };

ImageFormat sniff_format(const std::string& bytes);
const char* format_name(ImageFormat format);

// What a decoder hands back: RGB pixels converted as Pillow's convert('RGB') does, plus the raw EXIF
// block (TIFF header onwards, empty when absent) so the caller can honour orientation on request.
struct DecodedImage {
  RgbImage rgb;
  std::string exif;
};

DecodedImage decode_jpeg(const std::string& bytes, const ImageLimits& limits);
DecodedImage decode_png(const std::string& bytes, const ImageLimits& limits);
DecodedImage decode_webp(const std::string& bytes, const ImageLimits& limits);
DecodedImage decode_bmp(const std::string& bytes, const ImageLimits& limits);
DecodedImage decode_gif(const std::string& bytes, const ImageLimits& limits);

// Walks a PNG's chunks before libpng sees them and refuses what Pillow refuses (png_chunks.cc): truncated
// chunks, bad CRCs before the image data, unknown compression methods, zTXt/iTXt/iCCP that inflate past
// limits.max_png_text_bytes, APNG frame-sequence errors, and chunks over limits.max_png_chunk_bytes.
void check_png_chunks(const std::string& bytes, const ImageLimits& limits);

// The decoding thread's CPU time since construction against limits.max_decode_cpu_seconds.
class DecodeClock {
 public:
  explicit DecodeClock(const ImageLimits& limits);
  bool expired() const;
  std::string message() const;  // "decoding took more than N CPU seconds, the limit per image"

 private:
  double start_ = 0, limit_ = 0;
};

// Throws "<format>: image is W×H = N pixels, over the limit of M pixels" when the size is not allowed.
void check_pixel_limit(const char* format, int64_t width, int64_t height, const ImageLimits& limits);

// Allocates an RGB image after the limit check.
RgbImage make_rgb(const char* format, int64_t width, int64_t height, const ImageLimits& limits);

// EXIF orientation (1..8) from a TIFF-structured EXIF block; 1 when absent or unreadable.
int exif_orientation(const std::string& exif);
// Applies an EXIF orientation as Pillow's ImageOps.exif_transpose does.
RgbImage apply_orientation(const RgbImage& image, int orientation);

// Pillow's conversions to RGB, byte for byte.
inline uint8_t muldiv255(int a, int b) {
  const int t = a * b + 128;
  return uint8_t(((t >> 8) + t) >> 8);
}
// Pillow's cmyk2rgb (Convert.c): no colour management, just ink coverage.
inline void cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb) {
  const int nk = 255 - cmyk[3];
  for (int c = 0; c < 3; ++c) {
    const int v = nk - muldiv255(cmyk[c], nk);
    rgb[c] = uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
  }
}

}  // namespace fovea::image_internal

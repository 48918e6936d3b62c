// decode_image(): format sniffing, size limits, EXIF orientation, dispatch to the per-format decoders.
#include <time.h>

#include <sstream>

#include "core/local_file.h"
#include "image/image_internal.h"

namespace fovea {
namespace image_internal {

ImageFormat sniff_format(const std::string& b) {
  auto starts = [&](const char* magic, size_t n, size_t at = 0) {
    return b.size() >= at + n && b.compare(at, n, magic, n) == 0;
  };
  if (starts("\xff\xd8\xff", 3)) return ImageFormat::Jpeg;
  if (starts("\x89PNG\r\n\x1a\n", 8)) return ImageFormat::Png;
  if (starts("RIFF", 4) && starts("WEBP", 4, 8)) return ImageFormat::Webp;
  if (starts("BM", 2)) return ImageFormat::Bmp;
  if (starts("GIF87a", 6) || starts("GIF89a", 6)) return ImageFormat::Gif;
  if (starts("II*\0", 4) || starts("MM\0*", 4)) return ImageFormat::Tiff;
  if (starts("\0\0\0\x0cjP  ", 8) || starts("\xff\x4f\xff\x51", 4)) return ImageFormat::Jpeg2000;
  if (starts("ftypavif", 8, 4) || starts("ftypavis", 8, 4)) return ImageFormat::Avif;
  return ImageFormat::Unknown;
}

const char* format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::Jpeg: return "JPEG";
    case ImageFormat::Png: return "PNG";
    case ImageFormat::Webp: return "WebP";
    case ImageFormat::Bmp: return "BMP";
    case ImageFormat::Gif: return "GIF";
    case ImageFormat::Tiff: return "TIFF";
    case ImageFormat::Jpeg2000: return "JPEG 2000";
    case ImageFormat::Avif: return "AVIF";
    default: return "unknown";
  }
}

void check_pixel_limit(const char* format, int64_t width, int64_t height, const ImageLimits& limits) {
  FOVEA_CHECK(width > 0 && height > 0, format, ": bad image size ", width, "x", height);
  const int64_t pixels = width * height;
  FOVEA_CHECK(pixels <= limits.max_pixels, format, ": image is ", width, "x", height, " = ", pixels,
              " pixels, over the limit of ", limits.max_pixels, " pixels (possible decompression bomb)");
}

namespace {
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
}  // namespace

DecodeClock::DecodeClock(const ImageLimits& limits)
    : start_(thread_cpu_seconds()), limit_(limits.max_decode_cpu_seconds) {}

bool DecodeClock::expired() const { return thread_cpu_seconds() - start_ > limit_; }

std::string DecodeClock::message() const {
  return str("decoding took more than ", limit_, " CPU seconds, the limit per image");
}

RgbImage make_rgb(const char* format, int64_t width, int64_t height, const ImageLimits& limits) {
  check_pixel_limit(format, width, height, limits);
  RgbImage image;
  image.width = int(width);
  image.height = int(height);
  image.pixels.resize(size_t(width) * size_t(height) * 3);
  return image;
}

}  // namespace image_internal

using namespace image_internal;

RgbImage decode_image(const std::string& bytes, const ImageLimits& limits, bool exif_transpose) {
  FOVEA_CHECK(bytes.size() <= uint64_t(limits.max_bytes), "image file is ", bytes.size(),
              " bytes, over the limit of ", limits.max_bytes, " bytes");
  FOVEA_CHECK(!bytes.empty(), "image file is empty");
  const ImageFormat format = sniff_format(bytes);
  DecodedImage decoded;
  switch (format) {
    case ImageFormat::Jpeg: decoded = decode_jpeg(bytes, limits); break;
    case ImageFormat::Png: decoded = decode_png(bytes, limits); break;
    case ImageFormat::Webp: decoded = decode_webp(bytes, limits); break;
    case ImageFormat::Bmp: decoded = decode_bmp(bytes, limits); break;
    case ImageFormat::Gif: decoded = decode_gif(bytes, limits); break;
    case ImageFormat::Unknown: FOVEA_FAIL("cannot identify image format (supported: JPEG, PNG, WebP, BMP, GIF)");
    default: FOVEA_FAIL("unsupported image format ", format_name(format), " (supported: JPEG, PNG, WebP, BMP, GIF)");
  }
  if (!exif_transpose) return std::move(decoded.rgb);
  return apply_orientation(decoded.rgb, exif_orientation(decoded.exif));
}

RgbImage decode_image_file(const std::string& path, const ImageLimits& limits, bool exif_transpose) {
  LocalFileLimits file_limits;
  file_limits.max_bytes = limits.max_bytes;
  return decode_image(read_local_file(path, file_limits, "image file"), limits, exif_transpose);
}

}  // namespace fovea

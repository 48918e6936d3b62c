// EXIF orientation: read tag 0x0112 from IFD0, and the eight transposes of Pillow's ImageOps.exif_transpose.
#include "image/image_internal.h"

namespace fovea::image_internal {

int exif_orientation(const std::string& exif) {
  if (exif.size() < 8) return 1;
  const auto* p = reinterpret_cast<const uint8_t*>(exif.data());
  const bool little = p[0] == 'I' && p[1] == 'I';
  if (!little && !(p[0] == 'M' && p[1] == 'M')) return 1;
  auto u16 = [&](size_t at) -> uint32_t { return little ? p[at] | p[at + 1] << 8 : p[at] << 8 | p[at + 1]; };
  auto u32 = [&](size_t at) -> uint32_t {
    return little ? u16(at) | u16(at + 2) << 16 : u16(at) << 16 | u16(at + 2);
  };
  const size_t ifd = u32(4);
  if (ifd + 2 > exif.size()) return 1;
  const size_t count = u16(ifd);
  for (size_t i = 0; i < count; ++i) {
    const size_t entry = ifd + 2 + 12 * i;
    if (entry + 12 > exif.size()) return 1;
    if (u16(entry) == 0x0112 && u16(entry + 2) == 3) {
      const uint32_t value = u16(entry + 8);
      return value >= 1 && value <= 8 ? int(value) : 1;
    }
  }
  return 1;
}

RgbImage apply_orientation(const RgbImage& in, int orientation) {
  if (orientation <= 1 || orientation > 8) return in;
  const int w = in.width, h = in.height;
  const bool swap = orientation >= 5;
  RgbImage out;
  out.width = swap ? h : w;
  out.height = swap ? w : h;
  out.pixels.resize(in.pixels.size());
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;
      switch (orientation) {
        case 2: sx = w - 1 - x; break;                      // FLIP_LEFT_RIGHT
        case 3: sx = w - 1 - x, sy = h - 1 - y; break;      // ROTATE_180
        case 4: sy = h - 1 - y; break;                      // FLIP_TOP_BOTTOM
        case 5: sx = y, sy = x; break;                      // TRANSPOSE
        case 6: sx = y, sy = h - 1 - x; break;              // ROTATE_270 (clockwise)
        case 7: sx = w - 1 - y, sy = h - 1 - x; break;      // TRANSVERSE
        case 8: sx = w - 1 - y, sy = x; break;              // ROTATE_90 (counter-clockwise)
      }
      const uint8_t* s = &in.pixels[(size_t(sy) * w + sx) * 3];
      uint8_t* d = &out.pixels[(size_t(y) * out.width + x) * 3];
      d[0] = s[0], d[1] = s[1], d[2] = s[2];
    }
  }
  return out;
}

}  // namespace fovea::image_internal

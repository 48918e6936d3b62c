// BMP/DIB, parsed here (no Debian library decodes it) following Pillow's BmpImagePlugin: OS/2 and Windows
// headers, 1/4/8-bit palettes (raw, RLE8, RLE4), 16/24/32-bit raw and bitfields. Every read is bounds
// checked; a short pixel area is an error, as Pillow's "not enough image data".
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "image/image_internal.h"

namespace fovea::image_internal {
namespace {

uint32_t le32(const std::string& b, size_t at) {
  FOVEA_CHECK(at + 4 <= b.size(), "BMP: header is truncated");
  const auto* p = reinterpret_cast<const uint8_t*>(b.data()) + at;
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint16_t le16(const std::string& b, size_t at) {
  FOVEA_CHECK(at + 2 <= b.size(), "BMP: header is truncated");
  const auto* p = reinterpret_cast<const uint8_t*>(b.data()) + at;
  return uint16_t(p[0] | p[1] << 8);
}

enum Compression { kRaw = 0, kRle8 = 1, kRle4 = 2, kBitfields = 3 };

struct BmpInfo {
  int64_t width = 0, height = 0;
  bool top_down = false;
  int bits = 0;
  uint32_t compression = kRaw;
  uint32_t masks[3] = {0, 0, 0};  // red, green, blue
  uint32_t alpha_mask = 0;
  std::vector<uint8_t> palette;   // RGB triples
  bool gray_ramp = false;         // Pillow mode "L"/"1": indices are grey levels
  bool two_colors = false;
  size_t pixel_offset = 0;
};

BmpInfo read_info(const std::string& b) {
  BmpInfo info;
  info.pixel_offset = le32(b, 10);
  const uint32_t header_size = le32(b, 14);
  const size_t h = 14;
  if (header_size == 12) {  // OS/2 1.x
    info.width = le16(b, h + 4);
    info.height = int16_t(le16(b, h + 6));
    info.bits = le16(b, h + 10);
  } else {
    // Pillow knows these Windows/OS2 2.x header sizes and refuses the others.
    FOVEA_CHECK(header_size == 40 || header_size == 52 || header_size == 56 || header_size == 64 ||
                    header_size == 108 || header_size == 124,
                "BMP: unsupported header size ", header_size);
    info.width = int32_t(le32(b, h + 4));
    info.height = int32_t(le32(b, h + 8));
    info.bits = le16(b, h + 14);
    info.compression = le32(b, h + 16);
  }
  info.top_down = info.height < 0;
  info.height = info.height < 0 ? -info.height : info.height;
  FOVEA_CHECK(info.width > 0 && info.height > 0, "BMP: bad size ", info.width, "x", info.height);
  if (info.compression == kBitfields) {
    // Masks follow a 40-byte header, or sit inside a V2+ header at the same place.
    for (int c = 0; c < 3; ++c) info.masks[c] = le32(b, h + 40 + 4 * c);
    // Pillow reads an alpha mask only from headers that hold one (56 bytes and up).
    if (header_size >= 56) info.alpha_mask = le32(b, h + 52);
  }
  if (info.bits <= 8) {
    const size_t entry = header_size == 12 ? 3 : 4;
    uint32_t colors = header_size >= 40 ? le32(b, h + 32) : 0;
    if (colors == 0) colors = 1u << info.bits;
    // Pillow allows up to 65536 in the header but its palettes hold 256 colours: more fails to load there.
    FOVEA_CHECK(colors <= 256, "BMP: unsupported palette size ", colors, " (more than 256 colours)");
    size_t at = h + header_size;
    // Pillow: when the pixel offset points right after the header, the palette sits in between.
    if (info.pixel_offset == at) info.pixel_offset += entry * colors;
    for (uint32_t i = 0; i < colors && i < 256 && at + 3 <= b.size(); ++i, at += entry) {
      info.palette.push_back(uint8_t(b[at + 2]));
      info.palette.push_back(uint8_t(b[at + 1]));
      info.palette.push_back(uint8_t(b[at]));
    }
    // A palette that is exactly the grey ramp (or black/white for 2 colours) makes Pillow read the indices
    // as grey levels ("L"/"1") instead of looking them up.
    info.gray_ramp = info.palette.size() == 3 * size_t(std::min<uint32_t>(colors, 256));
    for (size_t i = 0; info.gray_ramp && i < info.palette.size() / 3; ++i) {
      const int expected = colors == 2 ? (i ? 255 : 0) : int(i);
      for (int c = 0; c < 3; ++c) info.gray_ramp = info.gray_ramp && info.palette[3 * i + c] == expected;
    }
    info.two_colors = colors == 2;
  }
  return info;
}

// Palette indices of the whole image, rows in file order (bottom-up unless top_down), decoded as Pillow 13's
// BmpRleDecoder does (runs clipped to the row, a stream that ends early leaves the image short → error).
std::vector<uint8_t> decode_rle(const std::string& b, const BmpInfo& info, bool rle4) {
  const size_t xsize = size_t(info.width), total = xsize * size_t(info.height);
  std::vector<uint8_t> data;
  data.reserve(total);
  size_t at = info.pixel_offset;
  size_t x = 0;
  auto byte_at = [&](size_t i) { return uint8_t(b[i]); };
  while (data.size() < total && at + 2 <= b.size()) {
    size_t count = byte_at(at);
    const uint8_t value = byte_at(at + 1);
    at += 2;
    if (count) {  // encoded run, clipped to the row as Pillow clips it
      count = x + count > xsize ? (x < xsize ? xsize - x : 0) : count;
      for (size_t i = 0; i < count; ++i) data.push_back(rle4 ? (i % 2 ? value & 15 : value >> 4) : value);
      x += count;
    } else if (value == 0) {  // end of line
      while (data.size() % xsize) data.push_back(0);
      x = 0;
    } else if (value == 1) {  // end of bitmap
      break;
    } else if (value == 2) {  // delta: skip `right` pixels and `up` rows (zero-filled)
      if (at + 2 > b.size()) break;
      const size_t right = byte_at(at), up = byte_at(at + 1);
      at += 2;
      data.insert(data.end(), std::min(total - data.size(), right + up * xsize), 0);
      x = data.size() % xsize;
    } else {  // absolute run of `value` pixels, word aligned; an odd RLE4 run still uses a whole byte
      const size_t pixels = std::min(total - data.size(), size_t(value));
      const size_t nbytes = rle4 ? (pixels + 1) / 2 : pixels;
      const size_t have = std::min(nbytes, b.size() - at);
      for (size_t i = 0; i < have; ++i) {
        const uint8_t v = byte_at(at + i);
        if (!rle4) {
          data.push_back(v);
          continue;
        }
        data.push_back(v >> 4);
        if (2 * i + 1 < pixels) data.push_back(v & 15);
      }
      at += have;
      if (have < nbytes || data.size() == total) break;
      x += value;
      if (at % 2) ++at;
    }
  }
  FOVEA_CHECK(data.size() >= total, "BMP: not enough image data");
  data.resize(total);
  return data;
}

// Pillow's unpackers scale an n-bit field to 0..255 by v * 255 / (2^n - 1), integer division.
struct MaskField {
  int shift = 0, width = 0;
  explicit MaskField(uint32_t mask) {
    if (!mask) return;
    while (!((mask >> shift) & 1)) ++shift;
    while (width + shift < 32 && ((mask >> (shift + width)) & 1)) ++width;
  }
  uint8_t read(uint32_t pixel) const {
    if (!width) return 0;
    const uint32_t max = width >= 32 ? 0xffffffffu : (1u << width) - 1;
    const uint64_t v = (pixel >> shift) & max;
    return width == 8 ? uint8_t(v) : uint8_t(v * 255 / max);
  }
};

// Pillow decodes only these bitfield layouts (its MASK_MODES) and refuses every other one.
void check_bitfields_layout(const BmpInfo& info) {
  const uint32_t r = info.masks[0], g = info.masks[1], b = info.masks[2], a = info.alpha_mask;
  bool known = false;
  if (info.bits == 32) {
    const uint32_t layouts[][4] = {{0xFF0000, 0xFF00, 0xFF, 0},          {0xFF000000, 0xFF0000, 0xFF00, 0},
                                   {0xFF000000, 0xFF00, 0xFF, 0},        {0xFF000000, 0xFF0000, 0xFF00, 0xFF},
                                   {0xFF, 0xFF00, 0xFF0000, 0xFF000000}, {0xFF0000, 0xFF00, 0xFF, 0xFF000000},
                                   {0xFF000000, 0xFF00, 0xFF, 0xFF0000}, {0, 0, 0, 0}};
    for (const auto& l : layouts) known = known || (r == l[0] && g == l[1] && b == l[2] && a == l[3]);
  } else if (info.bits == 24) {
    known = r == 0xFF0000 && g == 0xFF00 && b == 0xFF;
  } else if (info.bits == 16) {
    known = (r == 0xF800 && g == 0x7E0 && b == 0x1F) || (r == 0x7C00 && g == 0x3E0 && b == 0x1F);
  }
  if (known) return;
  char masks[64];
  std::snprintf(masks, sizeof masks, "%x/%x/%x/%x", r, g, b, a);
  FOVEA_FAIL("BMP: unsupported bitfields layout ", masks, " (R/G/B/A masks) at ", info.bits, " bits");
}

void lookup(const BmpInfo& info, uint8_t index, uint8_t* px) {
  if (info.gray_ramp) {
    px[0] = px[1] = px[2] = info.two_colors ? (index ? 255 : 0) : index;
    return;
  }
  const size_t at = size_t(index) * 3;
  if (at + 3 <= info.palette.size()) {
    std::memcpy(px, &info.palette[at], 3);
  } else {
    px[0] = px[1] = px[2] = 0;
  }
}

}  // namespace

DecodedImage decode_bmp(const std::string& b, const ImageLimits& limits) {
  FOVEA_CHECK(b.size() >= 26 && b[0] == 'B' && b[1] == 'M', "BMP: not a BMP file");
  const BmpInfo info = read_info(b);
  const int bits = info.bits;
  FOVEA_CHECK(bits == 1 || bits == 4 || bits == 8 || bits == 16 || bits == 24 || bits == 32,
              "BMP: unsupported bit depth ", bits);
  const uint32_t comp = info.compression;
  // BI_ALPHABITFIELDS (6) is refused as Pillow refuses it.
  FOVEA_CHECK(comp == kRaw || (comp == kRle8 && bits == 8) || (comp == kRle4 && bits == 4) ||
                  (comp == kBitfields && (bits == 16 || bits == 24 || bits == 32)),
              "BMP: unsupported compression ", comp, " at ", bits, " bits");
  if (comp == kBitfields) check_bitfields_layout(info);
  DecodedImage out;
  out.rgb = make_rgb("BMP", info.width, info.height, limits);
  const size_t w = size_t(info.width), h = size_t(info.height);
  auto dest_row = [&](size_t file_row) {
    const size_t y = info.top_down ? file_row : h - 1 - file_row;
    return out.rgb.pixels.data() + y * w * 3;
  };

  if (comp == kRle8 || comp == kRle4) {
    const std::vector<uint8_t> indices = decode_rle(b, info, comp == kRle4);
    for (size_t r = 0; r < h; ++r)
      for (size_t x = 0; x < w; ++x) lookup(info, indices[r * w + x], dest_row(r) + 3 * x);
    return out;
  }

  const size_t stride = ((w * size_t(bits) + 31) / 32) * 4;
  // The last row's padding may be missing (Pillow does not need it).
  const size_t needed = stride * (h - 1) + (w * size_t(bits) + 7) / 8;
  FOVEA_CHECK(info.pixel_offset <= b.size() && b.size() - info.pixel_offset >= needed,
              "BMP: not enough image data");
  const uint32_t default16[3] = {0x7c00, 0x3e0, 0x1f}, default32[3] = {0xff0000, 0xff00, 0xff};
  const uint32_t* masks = comp == kRaw ? (bits == 16 ? default16 : default32) : info.masks;
  const bool no_masks = !masks[0] && !masks[1] && !masks[2];  // Pillow reads all-zero masks as BGRA
  const MaskField fields[3] = {MaskField(no_masks ? default32[0] : masks[0]),
                               MaskField(no_masks ? default32[1] : masks[1]),
                               MaskField(no_masks ? default32[2] : masks[2])};
  for (size_t r = 0; r < h; ++r) {
    const auto* src = reinterpret_cast<const uint8_t*>(b.data()) + info.pixel_offset + r * stride;
    uint8_t* dst = dest_row(r);
    for (size_t x = 0; x < w; ++x, dst += 3) {
      if (bits <= 8) {
        const size_t bit = x * bits;
        const int shift = 8 - bits - int(bit % 8);
        lookup(info, uint8_t((src[bit / 8] >> shift) & ((1 << bits) - 1)), dst);
      } else if (bits == 24) {
        dst[0] = src[3 * x + 2], dst[1] = src[3 * x + 1], dst[2] = src[3 * x];
      } else {
        const uint32_t pixel = bits == 16 ? uint32_t(src[2 * x] | src[2 * x + 1] << 8)
                                          : uint32_t(src[4 * x]) | uint32_t(src[4 * x + 1]) << 8 |
                                                uint32_t(src[4 * x + 2]) << 16 | uint32_t(src[4 * x + 3]) << 24;
        for (int c = 0; c < 3; ++c) dst[c] = fields[c].read(pixel);
      }
    }
  }
  return out;
}

}  // namespace fovea::image_internal

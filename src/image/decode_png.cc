// PNG through libpng, asking it only to unpack sub-byte samples and de-interlace; every conversion to RGB
// is done here the way Pillow's PngImagePlugin modes + convert('RGB') do it (no gamma, tRNS ignored,
// 16-bit colour keeps the high byte, 16-bit grey is clipped to 255 as Pillow's I;16 → RGB does).
#include <png.h>

#include <csetjmp>
#include <cstring>
#include <memory>

#include "image/image_internal.h"

namespace fovea::image_internal {
namespace {

struct PngReader {
  const std::string* bytes = nullptr;
  size_t offset = 0;
  char message[256] = {};
};

void on_png_error(png_structp png, png_const_charp msg) {
  auto* reader = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(reader->message, sizeof(reader->message), "%s", msg);
  png_longjmp(png, 1);
}
void on_png_warning(png_structp, png_const_charp) {}

void read_from_memory(png_structp png, png_bytep out, png_size_t length) {
  auto* reader = static_cast<PngReader*>(png_get_io_ptr(png));
  if (reader->offset + length > reader->bytes->size()) png_error(png, "image file is truncated");
  std::memcpy(out, reader->bytes->data() + reader->offset, length);
  reader->offset += length;
}

struct PngHeader {
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0, interlace = 0;
};

struct PngHandles {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngHandles() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

bool read_header(PngHandles& h, PngHeader& header, int* passes) {
  if (setjmp(png_jmpbuf(h.png))) return false;
  png_read_info(h.png, h.info);
  png_get_IHDR(h.png, h.info, &header.width, &header.height, &header.bit_depth, &header.color_type,
               &header.interlace, nullptr, nullptr);
  if (header.bit_depth < 8) png_set_packing(h.png);
  *passes = png_set_interlace_handling(h.png);
  png_read_update_info(h.png, h.info);
  return true;
}

enum class RowsRead { Done, Error, OutOfTime };

// Row by row (every interlace pass) so the decode time limit is checked as it goes.
RowsRead read_rows(PngHandles& h, std::vector<png_bytep>& rows, int passes, const DecodeClock& clock) {
  if (setjmp(png_jmpbuf(h.png))) return RowsRead::Error;
  for (int pass = 0; pass < passes; ++pass) {
    for (size_t y = 0; y < rows.size(); ++y) {
      if (y % 64 == 0 && clock.expired()) return RowsRead::OutOfTime;
      png_read_row(h.png, rows[y], nullptr);
    }
  }
  return RowsRead::Done;
}

// Pillow's unpackers for L;1/L;2/L;4 scale a sample of `bits` bits to 0..255.
uint8_t scale_gray(uint8_t v, int bits) {
  switch (bits) {
    case 1: return v ? 255 : 0;
    case 2: return uint8_t(v * 0x55);
    case 4: return uint8_t(v * 0x11);
    default: return v;
  }
}

void convert_row(const PngHeader& hd, const uint8_t* in, uint8_t* out, const png_color* palette,
                 int palette_size) {
  const bool wide = hd.bit_depth == 16;
  const int sample = wide ? 2 : 1;
  for (png_uint_32 x = 0; x < hd.width; ++x) {
    uint8_t* px = out + 3 * size_t(x);
    switch (hd.color_type) {
      case PNG_COLOR_TYPE_GRAY: {
        uint8_t g;
        if (wide) {
          const int v = (in[2 * x] << 8) | in[2 * x + 1];  // I;16, clipped by convert('RGB')
          g = uint8_t(v > 255 ? 255 : v);
        } else {
          g = scale_gray(in[x], hd.bit_depth);
        }
        px[0] = px[1] = px[2] = g;
        break;
      }
      case PNG_COLOR_TYPE_GRAY_ALPHA:  // LA (LA;16B keeps the high byte)
        px[0] = px[1] = px[2] = in[2 * sample * x];
        break;
      case PNG_COLOR_TYPE_PALETTE: {
        const int index = in[x];
        if (index < palette_size) {
          px[0] = palette[index].red, px[1] = palette[index].green, px[2] = palette[index].blue;
        } else {
          px[0] = px[1] = px[2] = 0;
        }
        break;
      }
      default: {  // RGB or RGBA, high byte of 16-bit samples
        const int channels = hd.color_type == PNG_COLOR_TYPE_RGB ? 3 : 4;
        for (int c = 0; c < 3; ++c) px[c] = in[(channels * x + c) * sample];
      }
    }
  }
}

}  // namespace

DecodedImage decode_png(const std::string& bytes, const ImageLimits& limits) {
  const DecodeClock clock(limits);
  check_png_chunks(bytes, limits);
  PngReader reader;
  reader.bytes = &bytes;
  PngHandles h;
  h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, on_png_error, on_png_warning);
  FOVEA_CHECK(h.png, "PNG: out of memory");
  h.info = png_create_info_struct(h.png);
  FOVEA_CHECK(h.info, "PNG: out of memory");
  png_set_read_fn(h.png, &reader, read_from_memory);
  // Ancillary chunks are capped so a file cannot make libpng buffer gigabytes of metadata.
  png_set_chunk_cache_max(h.png, 1000);
  png_set_chunk_malloc_max(h.png, png_alloc_size_t(limits.max_png_chunk_bytes));
  png_set_user_limits(h.png, 1u << 30, 1u << 30);

  PngHeader hd;
  int passes = 1;
  FOVEA_CHECK(read_header(h, hd, &passes), "PNG: ", reader.message);
  DecodedImage out;
  out.rgb = make_rgb("PNG", hd.width, hd.height, limits);

  const size_t row_bytes = png_get_rowbytes(h.png, h.info);
  std::vector<uint8_t> raw(row_bytes * hd.height);
  std::vector<png_bytep> rows(hd.height);
  for (png_uint_32 y = 0; y < hd.height; ++y) rows[y] = raw.data() + y * row_bytes;
  const RowsRead status = read_rows(h, rows, passes, clock);
  FOVEA_CHECK(status != RowsRead::OutOfTime, "PNG: ", clock.message());
  FOVEA_CHECK(status == RowsRead::Done, "PNG: ", reader.message);

  png_colorp palette = nullptr;
  int palette_size = 0;
  if (hd.color_type == PNG_COLOR_TYPE_PALETTE) {
    FOVEA_CHECK(png_get_PLTE(h.png, h.info, &palette, &palette_size), "PNG: palette image without PLTE");
  }
  for (png_uint_32 y = 0; y < hd.height; ++y)
    convert_row(hd, rows[y], out.rgb.pixels.data() + size_t(y) * hd.width * 3, palette, palette_size);

  png_bytep exif = nullptr;
  png_uint_32 exif_size = 0;
  if (png_get_eXIf_1(h.png, h.info, &exif_size, &exif) && exif)
    out.exif.assign(reinterpret_cast<const char*>(exif), exif_size);
  return out;
}

}  // namespace fovea::image_internal

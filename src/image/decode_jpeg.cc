// JPEG through libjpeg(-turbo) with the settings Pillow's JpegDecode.c uses: libjpeg's defaults (JDCT_ISLOW,
// fancy upsampling on), no DCT scaling, output colour space chosen from the component count exactly as
// JpegImagePlugin does (1 → L, 3 → RGB, 4 → CMYK read as "CMYK;I", i.e. Adobe-inverted).
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

#include <jpeglib.h>
#include <jerror.h>

#include "image/image_internal.h"

namespace fovea::image_internal {
namespace {

// libjpeg reports fatal errors through error_exit, which must not return: we longjmp back to the caller.
struct JpegErrorManager {
  jpeg_error_mgr base;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
  bool hit_eof = false;
};

void on_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  longjmp(err->jump, 1);
}

// Warnings (corrupt data that libjpeg can skip) are ignored as Pillow ignores them, except a premature end
// of data: libjpeg would pad with grey, Pillow refuses a truncated file.
void on_emit_message(j_common_ptr cinfo, int level) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) err->hit_eof = true;
}

// Progressive files can carry hundreds of scans, each a pass over every coefficient (a known CPU bomb): the
// scan count and the decode's CPU time are checked from libjpeg's progress hook, which it calls per iMCU row
// while reading input and per scanline while writing output.
struct ScanLimit {
  jpeg_progress_mgr base;
  int max_scans = 0;
  const DecodeClock* clock = nullptr;
  int calls = 0;
};
void on_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  auto* limit = reinterpret_cast<ScanLimit*>(cinfo->progress);
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  if (d->is_decompressor && d->input_scan_number > limit->max_scans) {
    std::snprintf(err->message, sizeof(err->message), "more than %d progressive scans, the limit per image",
                  limit->max_scans);
    longjmp(err->jump, 1);
  }
  if (++limit->calls % 16 == 0 && limit->clock->expired()) {
    std::snprintf(err->message, sizeof(err->message), "%s", limit->clock->message().c_str());
    longjmp(err->jump, 1);
  }
}

enum class JpegLayout { Gray, Rgb, Cmyk };

// Everything between setjmp and the end lives in trivially destructible objects owned by the caller, so
// a longjmp cannot skip a destructor.
struct JpegState {
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  ScanLimit progress;
  JpegLayout layout = JpegLayout::Rgb;
  bool created = false;
};

bool read_header(JpegState& s, const std::string& bytes) {
  if (setjmp(s.err.jump)) return false;
  jpeg_create_decompress(&s.cinfo);
  s.created = true;
  jpeg_mem_src(&s.cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), (unsigned long)bytes.size());
  jpeg_save_markers(&s.cinfo, JPEG_APP0 + 1, 0xffff);
  jpeg_read_header(&s.cinfo, TRUE);
  return true;
}

// Decodes scanlines into `row_buffer` (width × components) and converts each into `out` (RGB).
bool read_pixels(JpegState& s, uint8_t* row_buffer, uint8_t* out) {
  if (setjmp(s.err.jump)) return false;
  jpeg_decompress_struct& c = s.cinfo;
  jpeg_start_decompress(&c);
  const int width = int(c.output_width);
  while (c.output_scanline < c.output_height) {
    const size_t y = c.output_scanline;
    JSAMPROW row = row_buffer;
    jpeg_read_scanlines(&c, &row, 1);
    uint8_t* dst = out + y * size_t(width) * 3;
    if (s.layout == JpegLayout::Rgb) {
      std::memcpy(dst, row_buffer, size_t(width) * 3);
    } else if (s.layout == JpegLayout::Gray) {
      for (int x = 0; x < width; ++x) dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = row_buffer[x];
    } else {
      for (int x = 0; x < width; ++x) {
        uint8_t cmyk[4];
        for (int k = 0; k < 4; ++k) cmyk[k] = uint8_t(255 - row_buffer[4 * x + k]);  // "CMYK;I"
        cmyk_to_rgb(cmyk, dst + 3 * x);
      }
    }
  }
  jpeg_finish_decompress(&c);
  return true;
}

std::string saved_exif(const jpeg_decompress_struct& cinfo) {
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m; m = m->next) {
    if (m->marker == JPEG_APP0 + 1 && m->data_length > 6 && std::memcmp(m->data, "Exif\0\0", 6) == 0)
      return std::string(reinterpret_cast<const char*>(m->data) + 6, m->data_length - 6);
  }
  return {};
}

struct JpegCleanup {
  JpegState& s;
  ~JpegCleanup() {
    if (s.created) jpeg_destroy_decompress(&s.cinfo);
  }
};

}  // namespace

DecodedImage decode_jpeg(const std::string& bytes, const ImageLimits& limits) {
  auto state = std::make_unique<JpegState>();
  JpegState& s = *state;
  s.cinfo.err = jpeg_std_error(&s.err.base);
  s.err.base.error_exit = on_error_exit;
  s.err.base.emit_message = on_emit_message;
  JpegCleanup cleanup{s};
  FOVEA_CHECK(read_header(s, bytes), "JPEG: ", s.err.message);

  jpeg_decompress_struct& c = s.cinfo;
  const DecodeClock clock(limits);
  c.progress = &s.progress.base;
  s.progress.base.progress_monitor = on_progress;
  s.progress.max_scans = limits.max_jpeg_scans;
  s.progress.clock = &clock;
  switch (c.num_components) {
    case 1: s.layout = JpegLayout::Gray; c.out_color_space = JCS_GRAYSCALE; break;
    case 3: s.layout = JpegLayout::Rgb; c.out_color_space = JCS_RGB; break;
    case 4: s.layout = JpegLayout::Cmyk; c.out_color_space = JCS_CMYK; break;
    default: FOVEA_FAIL("JPEG: unsupported number of components ", c.num_components);
  }
  DecodedImage out;
  out.rgb = make_rgb("JPEG", c.image_width, c.image_height, limits);
  out.exif = saved_exif(c);
  std::vector<uint8_t> row(size_t(c.image_width) * 4);
  FOVEA_CHECK(read_pixels(s, row.data(), out.rgb.pixels.data()), "JPEG: ", s.err.message);
  FOVEA_CHECK(!s.err.hit_eof, "JPEG: image file is truncated");
  return out;
}

}  // namespace fovea::image_internal

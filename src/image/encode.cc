#include "image/encode.h"

#include <jpeglib.h>
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <memory>

namespace fovea {
namespace {

struct FileCloser {
  void operator()(FILE* f) const {
    if (f) std::fclose(f);
  }
};
using File = std::unique_ptr<FILE, FileCloser>;

File open_for_writing(const std::string& path) {
  File f(std::fopen(path.c_str(), "wb"));
  FOVEA_CHECK(f, "cannot write ", path);
  return f;
}

struct JpegEncodeError {
  jpeg_error_mgr base;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
};

void on_jpeg_encode_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegEncodeError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  longjmp(err->jump, 1);
}

// Plain C-style body: nothing with a destructor lives between setjmp and a possible longjmp.
bool encode_jpeg(FILE* file, const RgbImage& image, int quality, jpeg_compress_struct* c, JpegEncodeError* err) {
  if (setjmp(err->jump)) return false;
  jpeg_create_compress(c);
  jpeg_stdio_dest(c, file);
  c->image_width = JDIMENSION(image.width);
  c->image_height = JDIMENSION(image.height);
  c->input_components = 3;
  c->in_color_space = JCS_RGB;
  jpeg_set_defaults(c);
  jpeg_set_quality(c, quality, TRUE);
  jpeg_start_compress(c, TRUE);
  while (c->next_scanline < c->image_height) {
    JSAMPROW row = const_cast<uint8_t*>(image.pixels.data()) + size_t(c->next_scanline) * image.width * 3;
    jpeg_write_scanlines(c, &row, 1);
  }
  jpeg_finish_compress(c);
  return true;
}

bool encode_png(FILE* file, const RgbImage& image, png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_init_io(png, file);
  png_set_IHDR(png, info, png_uint_32(image.width), png_uint_32(image.height), 8, PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < image.height; ++y)
    png_write_row(png, image.pixels.data() + size_t(y) * image.width * 3);
  png_write_end(png, nullptr);
  return true;
}

void check_image(const RgbImage& image) {
  FOVEA_CHECK(image.width > 0 && image.height > 0 &&
                  image.pixels.size() == size_t(image.width) * image.height * 3,
              "encode: bad image ", image.width, "x", image.height);
}

}  // namespace

void write_jpeg(const std::string& path, const RgbImage& image, int quality) {
  check_image(image);
  File file = open_for_writing(path);
  auto c = std::make_unique<jpeg_compress_struct>();
  auto err = std::make_unique<JpegEncodeError>();
  c->err = jpeg_std_error(&err->base);
  err->base.error_exit = on_jpeg_encode_error;
  const bool ok = encode_jpeg(file.get(), image, quality, c.get(), err.get());
  jpeg_destroy_compress(c.get());
  FOVEA_CHECK(ok, "JPEG encode of ", path, ": ", err->message);
}

void write_png(const std::string& path, const RgbImage& image) {
  check_image(image);
  File file = open_for_writing(path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  FOVEA_CHECK(png, "PNG encode: out of memory");
  png_infop info = png_create_info_struct(png);
  const bool ok = info && encode_png(file.get(), image, png, info);
  png_destroy_write_struct(&png, &info);
  FOVEA_CHECK(ok, "PNG encode of ", path, " failed");
}

}  // namespace fovea

// Test helper next to the fovea binary, used by tests/python/test_image_*.py to check the decoder and the
// resampler separately from each other:
//   fovea_image_tool decode IMAGE OUT.raw [--exif]   writes "W H\n" + RGB bytes (or one error line, exit 1)
//   fovea_image_tool resize IN.raw W H OUT.raw       Pillow-exact bicubic resize of a raw file as above
//   fovea_image_tool tiles IMAGE...                  per image one line "COLS ROWS THUMB CRC32 ADLER32"
//                                                    (official policy; zlib checksums of tiles_u8) or
//                                                    "ERROR message"
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <zlib.h>

#include "image/preprocess.h"
#include "image/resample.h"

namespace {

void write_raw(const std::string& path, const fovea::RgbImage& image) {
  std::ofstream out(path, std::ios::binary);
  out << image.width << " " << image.height << "\n";
  out.write(reinterpret_cast<const char*>(image.pixels.data()), std::streamsize(image.pixels.size()));
  FOVEA_CHECK(out, "cannot write ", path);
}

fovea::RgbImage read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  fovea::RgbImage image;
  in >> image.width >> image.height;
  in.get();
  FOVEA_CHECK(in && image.width > 0 && image.height > 0, "bad raw file ", path);
  image.pixels.resize(size_t(image.width) * image.height * 3);
  in.read(reinterpret_cast<char*>(image.pixels.data()), std::streamsize(image.pixels.size()));
  FOVEA_CHECK(in, "short raw file ", path);
  return image;
}

void print_tile_checksums(const std::string& path) {
  try {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    fovea::PreprocessOptions options;
    options.with_pixel_values = false;
    const fovea::PreprocessedImage p = fovea::preprocess_image(bytes, options);
    const auto* b = p.tiles_u8.ptr<Bytef>();
    const auto n = uInt(p.tiles_u8.nbytes());
    std::printf("%d %d %d %lu %lu\n", p.cols, p.rows, int(p.thumbnail), crc32(crc32(0, nullptr, 0), b, n),
                adler32(adler32(0, nullptr, 0), b, n));
  } catch (const std::exception& e) {
    std::string message = e.what();
    for (char& c : message)
      if (c == '\n') c = ' ';
    std::printf("ERROR %s\n", message.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "decode" && argc >= 4) {
      const bool exif = argc > 4 && std::string(argv[4]) == "--exif";
      write_raw(argv[3], fovea::decode_image_file(argv[2], {}, exif));
      return 0;
    }
    if (cmd == "resize" && argc == 6) {
      write_raw(argv[5], fovea::resize_bicubic(read_raw(argv[2]), std::stoi(argv[3]), std::stoi(argv[4])));
      return 0;
    }
    if (cmd == "tiles") {
      for (int i = 2; i < argc; ++i) print_tile_checksums(argv[i]);
      return 0;
    }
    std::fprintf(stderr, "usage: fovea_image_tool decode IMAGE OUT.raw [--exif] | resize IN.raw W H OUT.raw\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

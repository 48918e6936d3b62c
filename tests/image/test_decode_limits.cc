// The per-image decode limits (ImageLimits), each on an input made here that trips it, and each one's
// default left wide enough for the normal version of that input. Issue 19's hostile images: progressive JPEG
// scans, decode CPU time, PNG chunk sizes and zTXt/iTXt/iCCP bombs, APNG sequence errors, GIF frames.
#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include <jpeglib.h>

#include "image/preprocess.h"

namespace fovea {
namespace {

std::string error_of(const std::string& bytes, const ImageLimits& limits = {}) {
  try {
    decode_image(bytes, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<uint8_t> noise(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

// A 3-component JPEG of random pixels; with `one_scan_per_coefficient`, a progressive script of 190 scans
// (the DC of all components, then every AC coefficient of every component in its own scan).
std::string make_jpeg(int w, int h, bool one_scan_per_coefficient) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = JDIMENSION(w);
  c.image_height = JDIMENSION(h);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  std::vector<jpeg_scan_info> scans;
  if (one_scan_per_coefficient) {
    scans.push_back({3, {0, 1, 2, 0}, 0, 0, 0, 0});
    for (int comp = 0; comp < 3; ++comp)
      for (int k = 1; k < 64; ++k) scans.push_back({1, {comp, 0, 0, 0}, k, k, 0, 0});
    c.scan_info = scans.data();
    c.num_scans = int(scans.size());
  }
  jpeg_start_compress(&c, TRUE);
  const std::vector<uint8_t> pixels = noise(size_t(w) * h * 3, 7);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels.data()) + size_t(c.next_scanline) * w * 3;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::string bytes(reinterpret_cast<char*>(out), size);
  jpeg_destroy_compress(&c);
  std::free(out);
  return bytes;
}

std::string be32(uint32_t v) {
  const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  return std::string(b, 4);
}

std::string png_chunk(const std::string& type, const std::string& data) {
  uLong crc = crc32(0, reinterpret_cast<const Bytef*>(type.data()), 4);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data()), uInt(data.size()));
  return be32(uint32_t(data.size())) + type + data + be32(uint32_t(crc));
}

std::string deflate(const std::string& data) {
  uLongf size = compressBound(uLong(data.size()));
  std::string out(size, '\0');
  compress2(reinterpret_cast<Bytef*>(out.data()), &size, reinterpret_cast<const Bytef*>(data.data()),
            uLong(data.size()), 9);
  out.resize(size);
  return out;
}

// An 8-bit RGB PNG of random pixels with `extra` chunks between IHDR and IDAT and `after` between IDAT and IEND.
std::string make_png(int w, int h, const std::string& extra = "", const std::string& after = "") {
  std::string ihdr = be32(uint32_t(w)) + be32(uint32_t(h)) + std::string("\x08\x02\x00\x00\x00", 5);
  const std::vector<uint8_t> px = noise(size_t(w) * h * 3, 3);
  std::string raw;
  for (int y = 0; y < h; ++y) {
    raw += '\0';  // filter: none
    raw.append(reinterpret_cast<const char*>(px.data()) + size_t(y) * w * 3, size_t(w) * 3);
  }
  return std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) + extra + png_chunk("IDAT", deflate(raw)) +
         after + png_chunk("IEND", "");
}

// A GIF of `frames` side x side frames (8-bit LZW, literal codes with a clear every 200).
// frames > 1 with corrupt_later: every frame after the first holds codes no LZW table has (511), so decoding any
// of them would fail.
std::string make_gif(int frames, int side = 16, bool corrupt_later = false) {
  const std::string size{char(side & 0xff), char(side >> 8), char(side & 0xff), char(side >> 8)};
  std::string g = "GIF89a" + size + std::string("\xf7\x00\x00", 3);  // global palette of 256
  for (int i = 0; i < 256; ++i) g += std::string{char(i), char(255 - i), char(i / 2)};
  for (int f = 0; f < frames; ++f) {
    g += std::string(",\0\0\0\0", 5) + size + std::string(1, '\0');
    g += '\x08';
    std::string codes;  // 9-bit codes, LSB first
    uint32_t buffer = 0;
    int bits = 0;
    auto put = [&](int code) {
      buffer |= uint32_t(code) << bits;
      for (bits += 9; bits >= 8; bits -= 8, buffer >>= 8) codes += char(buffer & 0xff);
    };
    for (int i = 0; i < side * side; ++i) {
      if (i % 200 == 0) put(256);
      put(f > 0 && corrupt_later ? 511 : (i + f) & 0xff);
    }
    put(257);
    if (bits) codes += char(buffer & 0xff);
    for (size_t at = 0; at < codes.size(); at += 255) {
      const std::string block = codes.substr(at, 255);
      g += char(block.size()) + block;
    }
    g += '\0';
  }
  return g + ";";
}

TEST(DecodeLimits, ProgressiveJpegScansAreCapped) {
  const std::string many = make_jpeg(64, 48, true);
  const std::string message = error_of(many);
  EXPECT_NE(message.find("more than 100 progressive scans"), std::string::npos) << message;
  ImageLimits generous;
  generous.max_jpeg_scans = 200;
  EXPECT_EQ(error_of(many, generous), "");
  EXPECT_EQ(error_of(make_jpeg(64, 48, false)), "");  // libjpeg's own scripts: 1 or 10 scans
}

TEST(DecodeLimits, DecodeCpuTimeIsCapped) {
  ImageLimits none, wide;
  none.max_decode_cpu_seconds = 0;
  none.max_jpeg_scans = wide.max_jpeg_scans = 200;  // the 190-scan file trips the time limit, not the scan cap
  for (const std::string& bytes :
       {make_jpeg(256, 256, false), make_jpeg(256, 256, true), make_png(256, 256), make_gif(1, 300)}) {
    const std::string message = error_of(bytes, none);
    EXPECT_NE(message.find("CPU seconds, the limit per image"), std::string::npos) << message;
    EXPECT_EQ(error_of(bytes, wide), "");
  }
}

TEST(DecodeLimits, PngChunkSizeIsCapped) {
  const std::string text = png_chunk("tEXt", "Comment" + std::string(1, '\0') + std::string(300000, 'x'));
  const std::string png = make_png(8, 8, text);
  EXPECT_EQ(error_of(png), "");
  ImageLimits small;
  small.max_png_chunk_bytes = 100000;
  const std::string message = error_of(png, small);
  EXPECT_NE(message.find("tEXt chunk of 300008 bytes is over the limit of 100000 bytes"), std::string::npos)
      << message;
}

// zTXt, compressed iTXt and iCCP each inflating 2 MB of zeros: Pillow refuses them (MAX_TEXT_CHUNK, 1 MB);
// libpng inflated them up to its malloc limit and the image was accepted.
TEST(DecodeLimits, PngTextAndIccBombsAreRefused) {
  const std::string nul(1, '\0');
  for (const size_t inflated : {size_t(2) << 20, size_t(500000)}) {
    const std::string z = deflate(std::string(inflated, '\0'));
    const std::string chunks[] = {png_chunk("zTXt", "Comment" + nul + nul + z),
                                  png_chunk("iTXt", "Comment" + nul + "\x01" + nul + "en" + nul + nul + z),
                                  png_chunk("iCCP", "icc" + nul + nul + z)};
    for (const std::string& chunk : chunks) {
      for (const bool before_idat : {true, false}) {
        const std::string png = before_idat ? make_png(4, 4, chunk) : make_png(4, 4, "", chunk);
        const std::string message = error_of(png);
        if (inflated > (1u << 20)) {
          EXPECT_NE(message.find("inflates to more than 1048576 bytes"), std::string::npos) << message;
        } else {
          EXPECT_EQ(message, "") << chunk.substr(4, 4);
        }
      }
    }
  }
}

TEST(DecodeLimits, PngUnknownCompressionMethodsAreRefused) {
  const std::string nul(1, '\0'), z = deflate("text");
  EXPECT_NE(error_of(make_png(4, 4, png_chunk("iCCP", "icc" + nul + "\x01" + z))).find("compression method 1 in iCCP"),
            std::string::npos);
  EXPECT_NE(error_of(make_png(4, 4, png_chunk("zTXt", "k" + nul + "\x07" + z))).find("compression method 7 in zTXt"),
            std::string::npos);
}

TEST(DecodeLimits, ApngSequenceErrorsAreRefused) {
  const std::string actl = png_chunk("acTL", be32(1) + be32(0));
  // fdAT without an fcTL before it (Pillow's chunk_no_fctl.png).
  const std::string message = error_of(make_png(4, 4, actl, png_chunk("fdAT", be32(0) + deflate("xx"))));
  EXPECT_NE(message.find("frame sequence"), std::string::npos) << message;
  // A proper fcTL (number 0, whole image) before the IDAT is fine.
  const std::string fctl = png_chunk("fcTL", be32(0) + be32(4) + be32(4) + be32(0) + be32(0) + std::string(6, '\0'));
  EXPECT_EQ(error_of(make_png(4, 4, actl + fctl)), "");
  // A frame outside the image is not.
  const std::string wide = png_chunk("fcTL", be32(0) + be32(5) + be32(4) + be32(0) + be32(0) + std::string(6, '\0'));
  EXPECT_NE(error_of(make_png(4, 4, actl + wide)).find("invalid frames"), std::string::npos);
}

// Only the first frame is decoded, as the reference's convert('RGB') reads frame 0: thousands of later frames
// cost nothing.
TEST(DecodeLimits, OnlyTheFirstGifFrameIsDecoded) {
  const RgbImage one = decode_image(make_gif(1));
  const RgbImage many = decode_image(make_gif(20000));
  EXPECT_EQ(one.pixels, many.pixels);
  EXPECT_EQ(one.pixels[3], 1);  // pixel 1 is index 1: the first frame's
  // Later frames are never decoded (not merely decoded fast): 20,000 undecodable frames after a good one change
  // nothing.
  const RgbImage corrupt_tail = decode_image(make_gif(20000, 16, true));
  EXPECT_EQ(one.pixels, corrupt_tail.pixels);
}

}  // namespace
}  // namespace fovea

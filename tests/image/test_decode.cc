// Decoders on bad input: every file of ../shared/data/images decodes or throws fovea::Error with a one-line
// message (no crash, no hang); truncations and byte flips of valid files likewise; limits are enforced
// with the limit in the message. Pixel exactness against Pillow is tested in tests/python/test_image_*.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "image/preprocess.h"

namespace fovea {
namespace {

namespace fs = std::filesystem;

const fs::path kImages = fs::path(FOVEA_SOURCE_DIR) / ".." / "shared" / "data" / "images";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Decodes or throws fovea::Error; anything else (another exception type, a multi-line message, a wrong
// buffer size) fails the test.
void expect_decode_or_error(const std::string& bytes, const std::string& what, const ImageLimits& limits = {}) {
  try {
    const RgbImage image = decode_image(bytes, limits);
    ASSERT_GT(image.width, 0) << what;
    ASSERT_GT(image.height, 0) << what;
    ASSERT_EQ(image.pixels.size(), size_t(image.width) * image.height * 3) << what;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_FALSE(message.empty()) << what;
    EXPECT_EQ(message.find('\n'), std::string::npos) << what << ": " << message;
  }
}

std::vector<fs::path> corpus_files() {
  std::vector<fs::path> files;
  if (!fs::is_directory(kImages)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(kImages))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(Decode, EveryCorpusFileDecodesOrFailsCleanly) {
  const auto files = corpus_files();
  if (files.empty()) GTEST_SKIP() << "no " << kImages;
  int decoded = 0;
  for (const auto& path : files) {
    const std::string bytes = read_file(path);
    try {
      decode_image(bytes);
      ++decoded;
    } catch (const Error&) {
    }
    expect_decode_or_error(bytes, path.string());
  }
  EXPECT_GT(decoded, 300);  // the corpus is mostly valid PNG/JPEG/GIF/WebP/BMP
}

TEST(Decode, TruncatedAndCorruptedFilesFailCleanly) {
  const auto files = corpus_files();
  if (files.empty()) GTEST_SKIP() << "no " << kImages;
  std::mt19937 rng(1234);
  for (const char* name : {"hopper.jpg", "hopper.png", "hopper.webp", "hopper.gif", "hopper.bmp",
                           "hopper_rle8.bmp", "pil_sample_cmyk.jpg", "flower.webp", "iss634.webp",
                           "hopper_progressive.jpg", "rgb32bf-rgba.bmp", "hopper_lzw.tif"}) {
    const std::string bytes = read_file(kImages / name);
    if (bytes.empty()) continue;
    for (int cut = 0; cut < 40; ++cut) {
      const size_t length = bytes.size() * cut / 40;
      expect_decode_or_error(bytes.substr(0, length), std::string(name) + " cut at " + std::to_string(length));
    }
    for (int trial = 0; trial < 40; ++trial) {
      std::string corrupted = bytes;
      for (int flips = 0; flips < 4; ++flips) corrupted[rng() % corrupted.size()] = char(rng());
      expect_decode_or_error(corrupted, std::string(name) + " corrupted #" + std::to_string(trial));
    }
  }
}

TEST(Decode, DecompressionBombIsRefusedWithTheLimit) {
  const std::string bomb = read_file(kImages / "decompression_bomb.gif");
  if (bomb.empty()) GTEST_SKIP() << "no corpus";
  try {
    decode_image(bomb);
    FAIL() << "a 4-gigapixel GIF was decoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("89478485"), std::string::npos) << e.what();
  }
}

TEST(Decode, LimitsAreExplicit) {
  const std::string png = read_file(kImages / "hopper.png");
  if (png.empty()) GTEST_SKIP() << "no corpus";
  ImageLimits small_pixels;
  small_pixels.max_pixels = 1000;
  try {
    decode_image(png, small_pixels);
    FAIL() << "128x128 passed a 1000-pixel limit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("limit of 1000 pixels"), std::string::npos) << e.what();
  }
  ImageLimits small_bytes;
  small_bytes.max_bytes = 100;
  try {
    decode_image(png, small_bytes);
    FAIL() << "a big file passed a 100-byte limit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("limit of 100 bytes"), std::string::npos) << e.what();
  }
  const RgbImage ok = decode_image(png);
  EXPECT_EQ(ok.width, 128);
  EXPECT_EQ(ok.height, 128);
}

TEST(Decode, UnknownAndUnsupportedFormatsAreNamed) {
  try {
    decode_image("this is not an image");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot identify"), std::string::npos) << e.what();
  }
  try {
    decode_image(std::string("II*\0\x08\0\0\0", 8));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TIFF"), std::string::npos) << e.what();
  }
  EXPECT_THROW(decode_image(""), Error);
  EXPECT_THROW(decode_image_file("/nonexistent/file.jpg"), Error);
}

TEST(Decode, PreprocessShapesAndNormalisation) {
  const std::string jpeg = read_file(kImages / "hopper.jpg");
  if (jpeg.empty()) GTEST_SKIP() << "no corpus";
  PreprocessOptions options;
  const PreprocessedImage p = preprocess_image(jpeg, options);
  EXPECT_EQ(p.cols * p.rows + int(p.thumbnail), p.num_tiles());
  ASSERT_EQ(p.tiles_u8.shape, (Shape{p.num_tiles(), 448, 448, 3}));
  ASSERT_EQ(p.pixel_values.shape, (Shape{p.num_tiles(), 3, 448, 448}));
  // pixel_values[t][c][y][x] = (u8 / 255 - mean) / std, float32 all the way, as torchvision computes it.
  const uint8_t u = p.tiles_u8.ptr<uint8_t>()[(10 * 448 + 20) * 3 + 1];
  const float expected = (float(u) / 255.0f - 0.456f) / 0.224f;
  EXPECT_EQ(p.pixel_values.ptr<float>()[1 * 448 * 448 + 10 * 448 + 20], expected);
}

}  // namespace
}  // namespace fovea

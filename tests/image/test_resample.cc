// The resampler: Pillow goldens (made with PIL.Image.resize(..., BICUBIC), see the generator comment), the
// AVX2 path against the scalar reference on random images of awkward sizes, and thread-count invariance.
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "core/thread_pool.h"
#include "image/resample.h"

namespace fovea {
namespace {

// The 7x5 input of the goldens: pixel (x, y, c) = (37x + 91y + 53c + 13xy) mod 256.
RgbImage golden_input() {
  RgbImage image{7, 5, {}};
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 7; ++x)
      for (int c = 0; c < 3; ++c) image.pixels.push_back(uint8_t((x * 37 + y * 91 + c * 53 + x * y * 13) % 256));
  return image;
}

struct Golden {
  int width, height;
  std::vector<int> pixels;
};

// Pillow 13: np.asarray(Image.fromarray(input).resize((w, h), Image.BICUBIC)).flatten()
const std::vector<Golden> kPillowGoldens = {
    {3, 2, {108,134,145,140,144,147,144,135,140,124,154,122,144,122,125,137,106,154}},
    {11, 9, {0,43,96,5,58,110,31,84,139,55,106,177,76,137,205,100,174,227,138,199,255,168,227,210,190,253,35,216,107,31,232,0,61,21,71,134,36,93,155,66,128,176,98,159,145,129,152,146,151,125,178,124,147,220,117,183,196,148,216,88,183,132,97,205,59,125,76,128,193,97,155,228,134,199,236,172,246,90,217,176,45,236,42,95,102,62,135,32,107,165,80,145,180,124,170,213,150,181,236,141,203,123,172,167,156,199,131,180,146,178,109,150,156,104,189,92,145,124,131,97,103,134,87,150,80,143,114,127,195,78,173,225,178,249,28,218,152,55,236,38,101,93,81,141,56,128,192,115,168,221,155,227,90,202,190,27,245,47,84,131,65,131,34,105,158,82,144,63,118,113,109,157,89,155,125,158,93,144,150,97,191,94,147,134,154,121,127,179,127,196,135,181,172,71,131,141,28,81,12,64,130,46,104,167,101,166,184,144,218,57,201,162,33,241,47,100,126,72,143,69,134,196,122,195,249,183,99,151,224,11,64,71,124,199,118,175,150,160,222,88,89,150,89,94,124,132,158,132,185,173,59,122,140,47,107,68,121,175,115,136,189,166,134,187,109,162,235,163,216,138,197,250,33,57,109,109,31,102,191,109,183,236,200,56,108,183,0,53,41,76,129,75,156,209,129,204,255}},
    {7, 3, {40,93,146,82,135,188,123,176,123,165,112,165,100,153,206,142,195,98,183,95,148,128,181,86,191,96,158,115,168,95,178,105,158,115,177,82,187,92,154,102,101,154,68,121,174,152,205,109,87,140,87,171,118,171,150,53,106,84,137,190,169,107,160}},
};

RgbImage random_image(int width, int height, uint32_t seed) {
  std::mt19937 rng(seed);
  RgbImage image{width, height, std::vector<uint8_t>(size_t(width) * height * 3)};
  // Smooth gradients plus noise: extremes (0/255) exercise the clipping, noise the rounding.
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) {
        const int v = (x * 255 / width + y * 97 / height + c * 60) % 256 + int(rng() % 41) - 20;
        image.pixels[(size_t(y) * width + x) * 3 + c] = uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
      }
  return image;
}

TEST(Resample, MatchesPillowGoldens) {
  const RgbImage input = golden_input();
  for (const Golden& g : kPillowGoldens) {
    for (const RgbImage& out : {resize_bicubic(input, g.width, g.height),
                                resize_bicubic_reference(input, g.width, g.height)}) {
      ASSERT_EQ(out.width, g.width);
      ASSERT_EQ(out.height, g.height);
      ASSERT_EQ(out.pixels.size(), g.pixels.size());
      for (size_t i = 0; i < g.pixels.size(); ++i)
        ASSERT_EQ(int(out.pixels[i]), g.pixels[i]) << g.width << "x" << g.height << " byte " << i;
    }
  }
}

TEST(Resample, WeightsSumToOneInFixedPoint) {
  for (auto [in, out] : {std::pair{480, 1792}, {1920, 448}, {7, 3}, {1, 5}, {4096, 448}, {333, 334}}) {
    const ResampleWeights w = bicubic_weights(in, out);
    for (int i = 0; i < out; ++i) {
      int64_t sum = 0;
      for (int t = 0; t < w.count[i]; ++t) sum += w.weights[size_t(i) * w.ksize + t];
      EXPECT_NEAR(double(sum), double(1 << kResamplePrecisionBits), w.ksize) << in << "->" << out << " @" << i;
      EXPECT_GE(w.first[i], 0);
      EXPECT_LE(w.first[i] + w.count[i], in);
    }
  }
}

TEST(Resample, FastPathEqualsReference) {
  const std::vector<std::pair<int, int>> sizes = {{1, 1}, {1, 7}, {5, 1}, {3, 2}, {17, 13}, {480, 360},
                                                  {641, 479}, {100, 1000}, {1080, 33}};
  const std::vector<std::pair<int, int>> targets = {{448, 448}, {896, 448}, {1, 1}, {2, 9}, {1344, 1792}, {37, 41}};
  uint32_t seed = 1;
  for (auto [w, h] : sizes) {
    const RgbImage in = random_image(w, h, seed++);
    for (auto [ow, oh] : targets) {
      const RgbImage fast = resize_bicubic(in, ow, oh);
      const RgbImage ref = resize_bicubic_reference(in, ow, oh);
      ASSERT_EQ(fast.pixels, ref.pixels) << w << "x" << h << " -> " << ow << "x" << oh;
    }
    // One direction only (the other pass is skipped, as in Pillow).
    EXPECT_EQ(resize_bicubic(in, w, 2 * h + 1).pixels, resize_bicubic_reference(in, w, 2 * h + 1).pixels);
    EXPECT_EQ(resize_bicubic(in, 3 * w + 2, h).pixels, resize_bicubic_reference(in, 3 * w + 2, h).pixels);
  }
}

TEST(Resample, ThreadCountDoesNotChangeOutput) {
  const RgbImage in = random_image(1024, 768, 42);
  ThreadPool pool(3);
  const RgbImage serial = resize_bicubic(in, 1792, 1344);
  const RgbImage threaded = resize_bicubic(in, 1792, 1344, &pool);
  EXPECT_EQ(serial.pixels, threaded.pixels);
  EXPECT_EQ(resize_bicubic(in, 448, 448).pixels, resize_bicubic(in, 448, 448, &pool).pixels);
}

// Writing straight into tiles must equal resize-then-crop, including the one-pass and no-pass cases.
TEST(Resample, DirectTilesEqualResizeThenCrop) {
  const int tile = 16;
  for (auto [w, h, cols, rows] : {std::tuple{50, 37, 3, 2}, {48, 37, 3, 2}, {50, 32, 3, 2}, {48, 32, 3, 2},
                                  {7, 90, 1, 4}, {16, 16, 1, 1}}) {
    const RgbImage in = random_image(w, h, uint32_t(w * 100 + h));
    const RgbImage whole = resize_bicubic_reference(in, cols * tile, rows * tile);
    std::vector<uint8_t> tiles(size_t(cols) * rows * tile * tile * 3, 0);
    ThreadPool pool(2);
    resize_bicubic_to_tiles(in, cols, rows, tile, tiles.data(), &pool);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c)
        for (int y = 0; y < tile; ++y)
          for (int x = 0; x < tile * 3; ++x) {
            const uint8_t expected = whole.pixels[(size_t(r * tile + y) * whole.width + c * tile) * 3 + x];
            const uint8_t got = tiles[((size_t(r * cols + c) * tile + y) * tile) * 3 + x];
            ASSERT_EQ(got, expected) << w << "x" << h << " tile " << c << "," << r << " y " << y << " x " << x;
          }
  }
}

TEST(Resample, SameSizeIsACopyAndBadSizesThrow) {
  const RgbImage in = random_image(20, 10, 7);
  EXPECT_EQ(resize_bicubic(in, 20, 10).pixels, in.pixels);
  EXPECT_THROW(resize_bicubic(in, 0, 10), Error);
  EXPECT_THROW(resize_bicubic(RgbImage{}, 10, 10), Error);
}

}  // namespace
}  // namespace fovea

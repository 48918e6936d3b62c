// The CPU backend's normalize_pixels against the image pipeline: tiles of a real (JPEG-encoded) photo,
// normalised by the backend op, equal PreprocessedImage::pixel_values bit for bit. This is what lets the engine
// ship tiles as bytes and normalise them next to the ViT; test_ops checks the CUDA op against this one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "backend/backend.h"
#include "image/demo_images.h"
#include "image/encode.h"
#include "image/preprocess.h"

namespace fovea {
namespace {

std::string demo_jpeg(int width, int height, int variant) {
  const std::string path = std::string(FOVEA_BINARY_DIR) + "/test_normalize_pixels_" + std::to_string(variant) + ".jpg";
  write_jpeg(path, make_demo_photo(width, height, variant));
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  return bytes;
}

// Number of floats whose bit patterns differ.
int64_t bitwise_differences(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape, b.shape);
  if (a.shape != b.shape) return -1;
  int64_t differ = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    uint32_t x, y;
    std::memcpy(&x, a.ptr<float>() + i, 4);
    std::memcpy(&y, b.ptr<float>() + i, 4);
    differ += x != y;
  }
  return differ;
}

Tensor normalize_on(Backend& backend, const Tensor& tiles_u8, const NormalizeConstants& k) {
  Tensor rgb = backend.alloc(DType::U8, tiles_u8.shape);
  backend.upload(rgb, tiles_u8);
  Tensor out = backend.alloc(DType::F32, {tiles_u8.dim(0), 3, tiles_u8.dim(1), tiles_u8.dim(2)});
  backend.normalize_pixels(rgb, k, out);
  return backend.download(out);
}

TEST(NormalizePixels, CpuBackendEqualsThePipelineBitwise) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  for (int variant : {1, 2}) {
    const std::string bytes = demo_jpeg(variant == 1 ? 1000 : 640, variant == 1 ? 600 : 480, variant);
    PreprocessOptions options;
    options.max_tiles = 6;
    const PreprocessedImage image = preprocess_image(bytes, options);
    ASSERT_GT(image.num_tiles(), 1);
    ASSERT_EQ(image.tiles_u8.dim(0), image.num_tiles());
    const Tensor on_backend = normalize_on(*cpu, image.tiles_u8, normalize_kernels::kImageNet);
    EXPECT_EQ(bitwise_differences(on_backend, image.pixel_values), 0) << "variant " << variant;

    // The bytes-only pipeline produces the same tiles and skips the floats.
    options.with_pixel_values = false;
    const PreprocessedImage bytes_only = preprocess_image(bytes, options);
    EXPECT_TRUE(bytes_only.pixel_values.empty());
    ASSERT_EQ(bytes_only.tiles_u8.shape, image.tiles_u8.shape);
    EXPECT_EQ(std::memcmp(bytes_only.tiles_u8.data, image.tiles_u8.data, image.tiles_u8.nbytes()), 0);
  }
}

// The comparison above sees a one-ulp change: other constants (std rounded the other way) give other floats.
TEST(NormalizePixels, DifferentConstantsAreDetected) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  PreprocessOptions options;
  const PreprocessedImage image = preprocess_rgb(make_demo_photo(448, 448, 3), options);
  NormalizeConstants k = normalize_kernels::kImageNet;
  k.std_dev[1] = std::nextafter(k.std_dev[1], 1.0f);
  EXPECT_GT(bitwise_differences(normalize_on(*cpu, image.tiles_u8, k), image.pixel_values), 0);
}

TEST(NormalizePixels, RejectsWrongShapesAndDtypes) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  const NormalizeConstants& k = normalize_kernels::kImageNet;
  Tensor rgb = cpu->alloc(DType::U8, {2, 6, 4, 3});
  Tensor transposed = cpu->alloc(DType::F32, {2, 3, 4, 6});
  EXPECT_THROW(cpu->normalize_pixels(rgb, k, transposed), Error);
  Tensor planes = cpu->alloc(DType::F32, {2, 3, 6, 4});
  EXPECT_NO_THROW(cpu->normalize_pixels(rgb, k, planes));
  Tensor floats = cpu->alloc(DType::F32, {2, 6, 4, 3});
  EXPECT_THROW(cpu->normalize_pixels(floats, k, planes), Error);
  Tensor four_channels = cpu->alloc(DType::U8, {2, 6, 4, 4});
  EXPECT_THROW(cpu->normalize_pixels(four_channels, k, planes), Error);
}

}  // namespace
}  // namespace fovea

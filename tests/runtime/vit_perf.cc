// ViT + projector time per tile at the InternVL2-8B shape (InternViT-300M, 4096-wide projector), pixels already
// on the device, batches of 32 and 64 tiles: the figure issue 5 compares with transformers' 1.79 ms per tile
// (measured the same way: pixel_values on the GPU, batch 32). Random weights: the work does not depend on them.
// A timing, not a check: it runs only with FOVEA_VIT_PERF=1 on a CUDA GPU and prints its figures.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "backend/backend.h"
#include "runtime/vision_encoder.h"
#include "runtime/weights.h"

namespace fovea {
namespace {

class RandomUploads {
 public:
  explicit RandomUploads(Backend& backend) : backend_(backend) {}
  // A device tensor of the weight dtype with values uniform in [-scale, scale].
  Tensor operator()(const Shape& shape, float scale = 0.02f) {
    Tensor host = Tensor::host(DType::F32, shape);
    std::uniform_real_distribution<float> dist(-scale, scale);
    for (int64_t i = 0; i < host.numel(); ++i) host.ptr<float>()[i] = dist(rng_);
    Tensor dev = backend_.alloc(backend_.weight_dtype(), shape);
    backend_.upload(dev, host);
    return dev;
  }

 private:
  Backend& backend_;
  std::mt19937 rng_{7};
};

VisionWeights random_vision_weights(const ModelDesc& desc, Backend& backend) {
  const VisionConfig& v = desc.vision;
  const int64_t C = v.hidden, P = v.patch_size, M = v.mlp, H = desc.llm.hidden;
  RandomUploads random(backend);
  VisionWeights w;
  w.patch_w = random({C, 3 * P * P});
  w.patch_b = random({C});
  w.cls = random({C});
  w.pos = random({int64_t(v.tokens()), C});
  for (int l = 0; l < v.layers; ++l) {
    VitLayerWeights layer;
    layer.norm1_w = random({C}, 1.f);
    layer.norm1_b = random({C});
    layer.qkv_w = random({3 * C, C});
    layer.qkv_b = random({3 * C});
    layer.proj_w = random({C, C});
    layer.proj_b = random({C});
    layer.norm2_w = random({C}, 1.f);
    layer.norm2_b = random({C});
    layer.fc1_w = random({M, C});
    layer.fc1_b = random({M});
    layer.fc2_w = random({C, M});
    layer.fc2_b = random({C});
    w.layers.push_back(std::move(layer));
  }
  w.proj_norm_w = random({4 * C}, 1.f);
  w.proj_norm_b = random({4 * C});
  w.proj_fc1_w = random({H, 4 * C});
  w.proj_fc1_b = random({H});
  w.proj_fc2_w = random({H, H});
  w.proj_fc2_b = random({H});
  return w;
}

TEST(VitPerf, InternVl2_8bShapePerTile) {
  if (!std::getenv("FOVEA_VIT_PERF")) GTEST_SKIP() << "set FOVEA_VIT_PERF=1 to time the ViT on the GPU";
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA GPU";
  std::unique_ptr<Backend> backend = make_backend("cuda");
  const ModelDesc desc;  // defaults: the InternVL2-8B shape
  const VisionWeights weights = random_vision_weights(desc, *backend);
  const int max_tiles = 64, size = desc.vision.image_size;
  VisionEncoder encoder(desc, weights, *backend, max_tiles, /*graphs=*/false);
  Tensor pixels = Tensor::host(DType::F32, {max_tiles, 3, size, size});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  for (int64_t i = 0; i < pixels.numel(); ++i) pixels.ptr<float>()[i] = dist(rng);
  Tensor dst = encoder.pixels(max_tiles);
  backend->upload(dst, pixels);
  for (int tiles : {32, 64}) {
    for (int i = 0; i < 2; ++i) encoder.encode(tiles);  // warm-up (plans, clocks)
    backend->synchronize();
    constexpr int kReps = 10;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kReps; ++i) encoder.encode(tiles);
    backend->synchronize();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const double per_tile = ms / kReps / tiles;
    std::printf("vit+projector batch %d: %.3f ms per tile (%d reps, pixels on the device)\n", tiles, per_tile, kReps);
    EXPECT_GT(per_tile, 0.0);
  }
}

}  // namespace
}  // namespace fovea

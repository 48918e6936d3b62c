// A ModelRunner for engine tests: records every call and computes deterministic "KV" so that outputs depend on
// the whole prefix, like a real model's. Row p's value mixes row p-1's value with position p's input (token id,
// or the image embedding row the VisionRef points at); the sampled token is a function of the last row. A
// block shared with the wrong content (another image) therefore changes the output, which is what the prefix
// cache tests look for. It also checks the contract: block tables cover the positions, rows read were written,
// VisionRefs point at live embeddings and at <IMG_CONTEXT> positions.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "runtime/runner.h"

namespace fovea::test {

struct FakeRunnerConfig {
  int num_kv_blocks = 64;
  int block_size = 4;
  int max_step_tokens = 1 << 20;
  int max_step_tiles = 16;
  int vision_pool_tiles = 32;
  int vocab = 1000;
  int max_position = 4096;
  std::optional<ModelDesc> desc;  // e.g. the demo model's (ids, template); vocab/max_position taken from it
  std::function<void()> before_step;
  int poison_token = 666;  // step() throws when a chunk holds it; -1: never (real tokenizers use 666)   // runs at the
                           // start of every step() (tests block the scheduler with it)
};

struct RecordedStep {
  std::vector<SeqChunk> chunks;
  int total_tokens() const;
};

struct RecordedEncode {
  int images = 0;
  int tiles = 0;
};

class FakeRunner : public ModelRunner {
 public:
  static constexpr int kImageToken = 999;  // the default desc's <IMG_CONTEXT>
  static constexpr int kEos = 2;
  static constexpr int kPoisonToken = 666;        // the default FakeRunnerConfig::poison_token
  static constexpr float kPoisonPixel = -123.0f;  // encode_images() throws for an image starting with it
  static constexpr float kDeviceLostPixel = -321.0f;  // encode_images() throws fovea::DeviceError (device gone)

  explicit FakeRunner(const FakeRunnerConfig& config = {});

  const ModelDesc& desc() const override { return desc_; }
  int block_size() const override { return config_.block_size; }
  int num_kv_blocks() const override { return config_.num_kv_blocks; }
  int max_step_tokens() const override { return config_.max_step_tokens; }
  int max_step_tiles() const override { return config_.max_step_tiles; }
  int vision_pool_tiles() const override { return config_.vision_pool_tiles; }
  std::vector<int64_t> encode_images(const std::vector<Tensor>& pixel_values) override;
  void release_image(int64_t handle) override;
  int free_vision_tiles() const override;
  std::vector<SeqResult> step(const std::vector<SeqChunk>& chunks) override;

  // What the test asked for.
  std::vector<RecordedStep> steps;
  std::vector<RecordedEncode> encodes;
  int live_images() const { return int(images_.size()); }

 private:
  struct Image {
    uint64_t signature = 0;
    int tiles = 0;
  };
  uint64_t image_row_value(const VisionRef& ref, int row) const;

  FakeRunnerConfig config_;
  ModelDesc desc_;
  std::map<int64_t, Image> images_;
  int64_t next_handle_ = 1;
  std::vector<uint64_t> kv_;  // [blocks * block_size] fake KV rows
  std::vector<bool> kv_written_;
};

// A [tiles, 3, S, S] pixel tensor whose content (hence embedding) is identified by `signature`.
Tensor fake_pixels(int tiles, float signature, int image_size);

}  // namespace fovea::test

// Engine(config) with weights from the config alone (--load-format dummy) and its memory plan: a directory with
// config.json and the tokenizer but no safetensors serves requests; a memory limit it cannot fit in is refused
// before any weight exists, with what would fit; a bad load format is refused by name; a checkpoint that cannot fit
// is refused before any of its weights is read.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "../runtime/poison_weight.h"

using namespace fovea;
using namespace fovea::test;

namespace {

template <typename Body>
void expect_error_text(Body body, const std::string& part) {
  try {
    body();
    ADD_FAILURE() << "no error; expected one mentioning " << part;
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "'" << part << "' not in: " << e.what();
  }
}

// The demo model's directory without its weights.
class ConfigOnlyDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::remove(std::filesystem::path(demo_.path()) / "model.safetensors");
    config_.model_dir = demo_.path();
    config_.backend = "cpu";
    config_.kv_blocks = 64;
    config_.max_step_tokens = 1024;
    config_.preprocess_threads = 2;
    config_.load_format = "dummy";
  }
  DemoModelDir demo_;
  EngineConfig config_;
};

Collected run_one(Engine& engine) {
  Request r;
  r.images.push_back(ImageInput{make_bmp(64, 48, 3), "photo"});
  r.prompt = "What is in the picture?";
  r.max_tiles = 1;
  r.params.max_tokens = 3;
  Collector collector;
  engine.submit(r, collector.callback_for("r"));
  EXPECT_TRUE(collector.wait_finals(1));
  return collector.get("r");
}

TEST_F(ConfigOnlyDir, DummyWeightsServeRequests) {
  Engine engine(config_);
  const Collected c = run_one(engine);
  EXPECT_TRUE(c.last.error.empty()) << c.last.error;
  EXPECT_EQ(c.tokens.size(), 3u);
  // Deterministic: a second engine answers the same.
  Engine again(config_);
  EXPECT_EQ(run_one(again).tokens, c.tokens);
}

TEST_F(ConfigOnlyDir, WithoutDummyTheMissingWeightsAreNamed) {
  config_.load_format = "auto";
  expect_error_text([&] { Engine engine(config_); }, "safetensors");
  config_.load_format = "random";
  expect_error_text([&] { Engine engine(config_); }, "unknown load format 'random'");
}

TEST_F(ConfigOnlyDir, RefusedBeforeLoadingWhenItCannotFit) {
  config_.kv_blocks = 0;
  config_.memory_limit_bytes = 1 << 20;  // 1 MiB: the demo's weights alone take more
  expect_error_text([&] { Engine engine(config_); }, "does not fit: it needs");
}

// A damaged checkpoint (a NaN in a weight) that cannot fit: the refusal comes first, so no weight was read; with
// room, the damage is found when the weight is read.
TEST(CheckpointPlan, RefusedBeforeAnyWeightIsRead) {
  DemoModelDir demo;
  test::poison_weight(demo.path() + "/model.safetensors", "language_model.model.layers.1.feed_forward.w2.weight");

  EngineConfig config;
  config.model_dir = demo.path();
  config.backend = "cpu";
  config.preprocess_threads = 1;
  config.memory_limit_bytes = 1 << 20;
  expect_error_text([&] { Engine engine(config); }, "does not fit: it needs");
  config.memory_limit_bytes = 0;
  config.kv_blocks = 64;
  expect_error_text([&] { Engine engine(config); }, "NaN or infinite");
}

}  // namespace

// The quantization_config `fovea quantize` writes for an -hf checkpoint: the modules it leaves dense must be
// matched by each loader's own rule. transformers' AWQ loader matches modules_to_not_convert from the start of
// the module path (at a "." boundary) or as a suffix; vLLM and AutoAWQ by substring. A name only vLLM matches
// made transformers replace the ViT's dense linears with 4-bit ones that have no weights (found loading the
// trained-weights model's AWQ checkpoint with gptqmodel's kernels).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "quantize/quantized_config.h"
#include "support/temp_dir.h"

namespace fovea {
namespace {

bool transformers_skips(const std::string& module, const std::string& key) {
  const bool from_start = module.compare(0, key.size(), key) == 0 &&
                          (module.size() == key.size() || module[key.size()] == '.');
  const bool suffix = module.size() >= key.size() && module.compare(module.size() - key.size(), key.size(), key) == 0;
  return from_start || suffix;
}

TEST(QuantizedConfig, AwqLeavesTheHfVisionModulesDenseByTransformersRule) {
  const test::TempDir dir("quantized_config");
  dir.write("in.json", R"({"architectures": ["InternVLForConditionalGeneration"], "text_config": {}})");
  QuantizeOptions opt;
  opt.method = QuantizeMethod::Awq;
  opt.group = 64;
  write_quantized_config(opt, dir / "in.json", dir / "out.json", "model.language_model.layers");
  std::ifstream file(dir / "out.json");
  const nlohmann::json config = nlohmann::json::parse(file);
  std::vector<std::string> skip;
  for (const auto& key : config["quantization_config"]["modules_to_not_convert"]) skip.push_back(key);
  for (const std::string module : {"model.vision_tower.encoder.layer.0.attention.q_proj",
                                   "model.vision_tower.encoder.layer.1.mlp.fc2", "model.multi_modal_projector.linear_1",
                                   "lm_head"}) {
    bool skipped = false;
    for (const std::string& key : skip) skipped = skipped || transformers_skips(module, key);
    EXPECT_TRUE(skipped) << module;
  }
  for (const std::string module : {"model.language_model.layers.0.self_attn.q_proj",
                                   "model.language_model.layers.3.mlp.down_proj"}) {
    for (const std::string& key : skip) EXPECT_FALSE(transformers_skips(module, key)) << module << " by " << key;
  }
  EXPECT_EQ(config["text_config"]["quantization_config"], config["quantization_config"]);
}

}  // namespace
}  // namespace fovea

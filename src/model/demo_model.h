// The demo checkpoint behind `fovea make-demo-model`: a tiny InternVL2 in the ORIGINAL format (internvl_chat,
// InternLM2 LLM, internlm2-chat template) with deterministic random bf16 weights and the demo SentencePiece
// tokenizer. It exercises every code path of a real InternVL2-8B (grouped wqkv, 448px tiles, 12-tile dynamic
// resolution with thumbnail) at a size that loads in milliseconds; its answers are meaningless.
#pragma once
#include <cstdint>
#include <string>

namespace fovea {

struct DemoModelShape {  // the fixed demo sizes (vocab comes from the demo tokenizer)
  static constexpr int kVisionHidden = 64, kVisionLayers = 2, kVisionHeads = 4, kVisionMlp = 128;
  static constexpr int kLlmHidden = 64, kLlmLayers = 2, kLlmHeads = 4, kLlmKvHeads = 2, kLlmFfn = 176;
};

// Writes config.json, model.safetensors, tokenizer.model, tokenizer_config.json and README.txt into `dir`
// (created if needed). The same seed gives byte-identical files. Throws fovea::Error if it cannot write.
void write_demo_model(const std::string& dir, uint64_t seed = 0);

}  // namespace fovea

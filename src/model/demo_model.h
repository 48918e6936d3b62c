// The demo checkpoint behind `fovea make-demo-model`: a tiny InternVL2 in the ORIGINAL format (internvl_chat,
// InternLM2 LLM, internlm2-chat template) with deterministic random bf16 weights and the demo SentencePiece
// tokenizer. It exercises every code path of a real InternVL2-8B (grouped wqkv, 448px tiles, 12-tile dynamic
// resolution with thumbnail) at a size that loads in milliseconds; its answers are meaningless.
#pragma once
#include <cstdint>
#include <string>

#include "model/quantization.h"

namespace fovea {

struct DemoModelShape {  // the fixed demo sizes (vocab comes from the demo tokenizer)
  static constexpr int kVisionHidden = 64, kVisionLayers = 2, kVisionHeads = 4, kVisionMlp = 128;
  static constexpr int kLlmHidden = 64, kLlmLayers = 2, kLlmHeads = 4, kLlmKvHeads = 2, kLlmFfn = 176;
  static constexpr int kQuantGroup = 16;  // divides every LLM linear's input width (64, 176)
};

// Writes config.json, model.safetensors, tokenizer.model, tokenizer_config.json and README.txt into `dir`
// (created if needed). The same seed gives byte-identical files. Throws fovea::Error if it cannot write.
// `quantize` Awq / Gptq stores the LLM layers' linears (wqkv, wo, w1, w2, w3) as 4-bit packed tensors of the same
// random weights (model/w4_pack.h) with the matching quantization_config: AWQ in llm_config as LMDeploy writes
// it, GPTQ at the top level with act-order (a random g_idx permutation) and v1 zeros, as transformers writes it.
void write_demo_model(const std::string& dir, uint64_t seed = 0, WeightQuantMethod quantize = WeightQuantMethod::None);

}  // namespace fovea

// Where a checkpoint keeps each LLM layer's linears and the ops in front of them, in both formats the loader
// reads: InternLM2 (attention.wqkv / wo, feed_forward.w1 / w3 / w2, attention_norm, ffn_norm) and Llama / Qwen2
// (self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj, input_layernorm, post_attention_layernorm), under
// language_model.model., model.language_model. or language_model.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "model/safetensors.h"
#include "quantize/calibration.h"

namespace fovea {

struct LayerLinears {
  // Linear prefixes ("X" of X.weight) by the input they read, in LinearInput order.
  std::array<std::vector<std::string>, kLinearInputs> by_input;
  std::string attn_norm, ffn_norm;  // tensor names
  std::string up;                   // the prefix whose rows make down's input (the up projection)
};

std::vector<LayerLinears> find_llm_linears(const SafetensorsSet& set, int layers);

}  // namespace fovea

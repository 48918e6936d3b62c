#include "quantize/llm_linears.h"

#include "core/error.h"

namespace fovea {

std::vector<LayerLinears> find_llm_linears(const SafetensorsSet& set, int layers) {
  std::string prefix;
  for (const char* p : {"language_model.model.", "model.language_model.", "language_model."})
    if (prefix.empty() && set.has(std::string(p) + "layers.0.input_layernorm.weight")) prefix = p;
  const bool internlm2 = prefix.empty();
  if (internlm2) prefix = "language_model.model.";
  std::vector<LayerLinears> out(static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l) {
    const std::string b = prefix + "layers." + std::to_string(l) + ".";
    LayerLinears& L = out[size_t(l)];
    if (internlm2) {
      L.by_input = {{{b + "attention.wqkv"}, {b + "attention.wo"},
                     {b + "feed_forward.w1", b + "feed_forward.w3"}, {b + "feed_forward.w2"}}};
      L.attn_norm = b + "attention_norm.weight";
      L.ffn_norm = b + "ffn_norm.weight";
      L.up = b + "feed_forward.w3";
    } else {
      const std::string a = b + "self_attn.", m = b + "mlp.";
      L.by_input = {{{a + "q_proj", a + "k_proj", a + "v_proj"}, {a + "o_proj"},
                     {m + "gate_proj", m + "up_proj"}, {m + "down_proj"}}};
      L.attn_norm = b + "input_layernorm.weight";
      L.ffn_norm = b + "post_attention_layernorm.weight";
      L.up = m + "up_proj";
    }
    for (const auto& group : L.by_input)
      for (const std::string& linear : group)
        FOVEA_CHECK(set.has(linear + ".weight"), set.describe(), ": missing tensor ", linear, ".weight");
    for (const std::string& norm : {L.attn_norm, L.ffn_norm})
      FOVEA_CHECK(set.has(norm), set.describe(), ": missing tensor ", norm);
  }
  return out;
}

}  // namespace fovea

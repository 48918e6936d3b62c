// Language-model weights -> canonical names. InternLM2 (original format): tok_embeddings, attention.wqkv
// (regrouped), attention.wo, feed_forward.w1/w3/w2 (gate/up/down), attention_norm, ffn_norm, output.
// Llama/Qwen2 (both formats): embed_tokens, self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj,
// input_layernorm, post_attention_layernorm, lm_head; Qwen3 adds self_attn.{q,k}_norm [head_dim]. q/k/v and
// gate/up are fused here, once.
#include "model/weight_map.h"

namespace fovea {
namespace {

void put(ModelWeights* out, const std::string& name, WeightRef t) { out->tensors[name] = std::move(t); }

std::string llm_prefix(const SafetensorsSet& set) {
  for (const char* p : {"language_model.model.", "model.language_model.", "language_model."}) {
    for (const char* probe : {"embed_tokens.weight", "tok_embeddings.weight"})
      if (set.has(std::string(p) + probe)) return p;
  }
  return "language_model.model.";
}

void map_internlm2_layer(const SafetensorsSet& set, ModelDesc* desc, const std::string& base, ModelWeights* out,
                         const std::string& dst) {
  const LlmConfig& l = desc->llm;
  const int64_t h = l.hidden, d = l.head_dim, f = l.ffn;
  const int64_t qkv_rows = int64_t(l.heads + 2 * l.kv_heads) * d;
  const RowRegroup regroup = [l](const Tensor& t) { return regroup_internlm2_wqkv(t, l); };  // runs at load: a copy
  put_linear(set, {{base + "attention.wqkv.weight", {qkv_rows, h}}}, regroup, desc, out, dst + "qkv");
  put_linear(set, {{base + "attention.wo.weight", {h, l.heads * d}}}, {}, desc, out, dst + "o");
  put(out, dst + "attn_norm", set.ref(base + "attention_norm.weight", {h}));
  put(out, dst + "ffn_norm", set.ref(base + "ffn_norm.weight", {h}));
  put_linear(set, {{base + "feed_forward.w1.weight", {f, h}}, {base + "feed_forward.w3.weight", {f, h}}}, {}, desc,
             out, dst + "gate_up");
  put_linear(set, {{base + "feed_forward.w2.weight", {h, f}}}, {}, desc, out, dst + "down");
}

void map_llama_layer(const SafetensorsSet& set, ModelDesc* desc, const std::string& base, ModelWeights* out,
                     const std::string& dst) {
  const LlmConfig& l = desc->llm;
  const int64_t h = l.hidden, d = l.head_dim, f = l.ffn;
  const int64_t q = int64_t(l.heads) * d, kv = int64_t(l.kv_heads) * d;
  const std::string attn = base + "self_attn.";
  put_linear(set, {{attn + "q_proj.weight", {q, h}}, {attn + "k_proj.weight", {kv, h}}, {attn + "v_proj.weight", {kv, h}}},
             {}, desc, out, dst + "qkv");
  if (l.qkv_bias) {
    put(out, dst + "qkv.bias",
        stack_rows({set.ref(attn + "q_proj.bias", {q}), set.ref(attn + "k_proj.bias", {kv}),
                    set.ref(attn + "v_proj.bias", {kv})},
                   attn + "{q,k,v}_proj.bias"));
  }
  if (l.qk_norm) {
    put(out, dst + "q_norm", set.ref(attn + "q_norm.weight", {d}));
    put(out, dst + "k_norm", set.ref(attn + "k_norm.weight", {d}));
  }
  put_linear(set, {{attn + "o_proj.weight", {h, q}}}, {}, desc, out, dst + "o");
  put(out, dst + "attn_norm", set.ref(base + "input_layernorm.weight", {h}));
  put(out, dst + "ffn_norm", set.ref(base + "post_attention_layernorm.weight", {h}));
  put_linear(set, {{base + "mlp.gate_proj.weight", {f, h}}, {base + "mlp.up_proj.weight", {f, h}}}, {}, desc, out,
             dst + "gate_up");
  put_linear(set, {{base + "mlp.down_proj.weight", {h, f}}}, {}, desc, out, dst + "down");
}

}  // namespace

void map_llm_weights(const SafetensorsSet& set, ModelDesc* desc, ModelWeights* out) {
  const LlmConfig& l = desc->llm;
  const bool internlm2 = l.arch == LlmArch::InternLM2;
  const std::string prefix = llm_prefix(set);
  const Shape table{l.vocab, l.hidden};
  put(out, "llm.embed", set.ref(prefix + (internlm2 ? "tok_embeddings.weight" : "embed_tokens.weight"), table));
  for (int layer = 0; layer < l.layers; ++layer) {
    const std::string base = prefix + "layers." + std::to_string(layer) + ".";
    const std::string dst = "llm." + std::to_string(layer) + ".";
    if (internlm2) {
      map_internlm2_layer(set, desc, base, out, dst);
    } else {
      map_llama_layer(set, desc, base, out, dst);
    }
  }
  // A config that names fewer layers than the checkpoint holds would load and silently skip the rest.
  const std::string beyond = prefix + "layers." + std::to_string(l.layers) + ".";
  for (const std::string& name : set.names())
    FOVEA_CHECK(name.rfind(beyond, 0) != 0, set.describe(), ": config.json num_hidden_layers is ", l.layers,
                " but the checkpoint holds weights of layer ", l.layers, " (", name,
                "): the config does not match the weights");
  put(out, "llm.norm", set.ref(prefix + "norm.weight", {l.hidden}));
  const std::string head =
      internlm2 ? "language_model.output.weight" : pick_name(set, {"language_model.lm_head.weight", "lm_head.weight"});
  if (set.has(head)) {
    put(out, "llm.lm_head", set.ref(head, table));
  } else {
    FOVEA_CHECK(l.tie_embeddings, set.describe(), ": missing tensor ", head,
                " (and the config does not tie the embeddings)");
    put(out, "llm.lm_head", out->tensors.at("llm.embed"));  // same handle, no copy
  }
}

}  // namespace fovea

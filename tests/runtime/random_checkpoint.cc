#include "random_checkpoint.h"

#include <random>
#include <vector>

#include "core/safetensors_writer.h"

namespace fovea::test {
namespace {

class Writer {
 public:
  explicit Writer(uint64_t seed) : rng_(seed) {}
  void add(const std::string& name, Shape shape, float mean = 0.f, float std = 0.02f) {
    Tensor t = Tensor::host(DType::F32, std::move(shape));
    std::normal_distribution<float> dist(mean, std);
    for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = std == 0.f ? mean : dist(rng_);
    tensors_.push_back({name, std::move(t)});
  }
  void linear(const std::string& prefix, int64_t out, int64_t in, bool bias) {
    add(prefix + ".weight", {out, in});
    if (bias) add(prefix + ".bias", {out});
  }
  void norm(const std::string& prefix, int64_t n, bool bias) {
    add(prefix + ".weight", {n}, 1.f, 0.05f);
    if (bias) add(prefix + ".bias", {n});
  }
  const std::vector<NamedTensor>& tensors() const { return tensors_; }

 private:
  std::mt19937_64 rng_;
  std::vector<NamedTensor> tensors_;
};

void vision(const ModelDesc& d, Writer& w) {
  const VisionConfig& v = d.vision;
  const int64_t c = v.hidden, m = v.mlp, p = v.patch_size;
  const bool hf = d.format == CheckpointFormat::HfInternVL, ln = v.norm == VitNorm::LayerNorm;
  const std::string root = hf ? "vision_tower." : "vision_model.";
  w.add(root + (hf ? "embeddings.cls_token" : "embeddings.class_embedding"), {1, 1, c});
  const std::string patch = root + (hf ? "embeddings.patch_embeddings.projection." : "embeddings.patch_embedding.");
  w.add(patch + "weight", {c, 3, p, p});  // a conv weight in both formats
  w.add(patch + "bias", {c});
  w.add(root + (hf ? "embeddings.position_embeddings" : "embeddings.position_embedding"), {1, v.tokens(), c});
  for (int l = 0; l < v.layers; ++l) {
    const std::string b = root + (hf ? "encoder.layer." : "encoder.layers.") + std::to_string(l) + ".";
    const std::string attn = b + (hf ? "attention." : "attn.");
    if (hf) {
      for (const char* part : {"q_proj", "k_proj", "v_proj"}) w.linear(attn + part, c, c, v.qkv_bias);
      w.linear(attn + "projection_layer", c, c, true);
    } else {
      w.linear(attn + "qkv", 3 * c, c, v.qkv_bias);
      w.linear(attn + "proj", c, c, true);
    }
    if (v.qk_norm) {
      w.norm(attn + "q_norm", c, false);
      w.norm(attn + "k_norm", c, false);
    }
    w.linear(b + "mlp.fc1", m, c, true);
    w.linear(b + "mlp.fc2", c, m, true);
    w.norm(b + (hf ? "layernorm_before" : "norm1"), c, ln);
    w.norm(b + (hf ? "layernorm_after" : "norm2"), c, ln);
    w.add(b + (hf ? "lambda_1" : "ls1"), {c}, 0.1f, 0.f);
    w.add(b + (hf ? "lambda_2" : "ls2"), {c}, 0.1f, 0.f);
  }
  const int64_t in = 4 * c, h = d.llm.hidden;
  const std::string proj = hf ? "multi_modal_projector." : "mlp1.";
  w.norm(proj + (hf ? "layer_norm" : "0"), in, true);
  w.linear(proj + (hf ? "linear_1" : "1"), h, in, true);
  w.linear(proj + (hf ? "linear_2" : "3"), h, h, true);
}

void llm(const ModelDesc& d, Writer& w) {
  const LlmConfig& l = d.llm;
  const int64_t h = l.hidden, dh = l.head_dim, f = l.ffn, q = int64_t(l.heads) * dh, kv = int64_t(l.kv_heads) * dh;
  const std::string base = "language_model.model.";
  if (l.arch == LlmArch::InternLM2) {  // original format only
    w.add(base + "tok_embeddings.weight", {l.vocab, h});
    for (int i = 0; i < l.layers; ++i) {
      const std::string b = base + "layers." + std::to_string(i) + ".";
      w.linear(b + "attention.wqkv", q + 2 * kv, h, false);
      w.linear(b + "attention.wo", h, q, false);
      w.linear(b + "feed_forward.w1", f, h, false);
      w.linear(b + "feed_forward.w3", f, h, false);
      w.linear(b + "feed_forward.w2", h, f, false);
      w.norm(b + "attention_norm", h, false);
      w.norm(b + "ffn_norm", h, false);
    }
    w.norm(base + "norm", h, false);
    w.add("language_model.output.weight", {l.vocab, h});
    return;
  }
  w.add(base + "embed_tokens.weight", {l.vocab, h});
  for (int i = 0; i < l.layers; ++i) {
    const std::string b = base + "layers." + std::to_string(i) + ".";
    w.linear(b + "self_attn.q_proj", q, h, l.qkv_bias);
    w.linear(b + "self_attn.k_proj", kv, h, l.qkv_bias);
    w.linear(b + "self_attn.v_proj", kv, h, l.qkv_bias);
    w.linear(b + "self_attn.o_proj", h, q, false);
    if (l.qk_norm) {
      w.norm(b + "self_attn.q_norm", dh, false);
      w.norm(b + "self_attn.k_norm", dh, false);
    }
    w.linear(b + "mlp.gate_proj", f, h, false);
    w.linear(b + "mlp.up_proj", f, h, false);
    w.linear(b + "mlp.down_proj", h, f, false);
    w.norm(b + "input_layernorm", h, false);
    w.norm(b + "post_attention_layernorm", h, false);
  }
  w.norm(base + "norm", h, false);
  w.add(d.format == CheckpointFormat::HfInternVL ? "lm_head.weight" : "language_model.lm_head.weight", {l.vocab, h});
}

}  // namespace

void write_random_checkpoint(const ModelDesc& desc, const std::string& dir, uint64_t seed) {
  Writer w(seed);
  vision(desc, w);
  llm(desc, w);
  write_safetensors(dir + "/model.safetensors", w.tensors(), {{"format", "pt"}});
}

}  // namespace fovea::test

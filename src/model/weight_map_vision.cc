// InternViT + projector weights -> canonical names. Original: vision_model.* / mlp1.{0,1,3}.*;
// -hf: vision_tower.* / multi_modal_projector.* (optionally under a leading "model.", as transformers 5 keeps
// them in memory). The conv weight is flattened, cls/pos lose their leading 1-dims, -hf q/k/v are fused.
// InternViT-6B: RMSNorm norm1/norm2 (weight only), no qkv bias, q_norm / k_norm [C] (attn.{q,k}_norm.weight,
// -hf attention.{q,k}_norm.weight).
#include "model/weight_map.h"

namespace fovea {
namespace {

struct VisionNames {  // per-format spellings; L is substituted per layer
  std::string prefix, cls, pos, patch, layer, norm1, norm2, proj, ls1, ls2, attn;
};

VisionNames vision_names(const SafetensorsSet& set, CheckpointFormat format) {
  if (format == CheckpointFormat::InternVLChat)
    return {"vision_model.",
            "embeddings.class_embedding",
            "embeddings.position_embedding",
            "embeddings.patch_embedding.",
            "encoder.layers.",
            "norm1.",
            "norm2.",
            "attn.proj.",
            "ls1",
            "ls2",
            "attn."};
  const std::string prefix =
      set.has("model.vision_tower.embeddings.cls_token") ? "model.vision_tower." : "vision_tower.";
  return {prefix,
          "embeddings.cls_token",
          "embeddings.position_embeddings",
          "embeddings.patch_embeddings.projection.",
          "encoder.layer.",
          "layernorm_before.",
          "layernorm_after.",
          "attention.projection_layer.",
          "lambda_1",
          "lambda_2",
          "attention."};
}

void put(ModelWeights* out, const std::string& name, WeightRef t) { out->tensors[name] = std::move(t); }

WeightRef fused_vit_qkv(const SafetensorsSet& set, const std::string& base, const ModelDesc& desc, const char* kind,
                        bool is_weight) {
  const int64_t c = desc.vision.hidden;
  if (desc.format == CheckpointFormat::InternVLChat)
    return set.ref(base + "attn.qkv." + kind, is_weight ? Shape{3 * c, c} : Shape{3 * c});
  std::vector<WeightRef> parts;
  for (const char* p : {"q_proj.", "k_proj.", "v_proj."})
    parts.push_back(set.ref(base + "attention." + p + kind, is_weight ? Shape{c, c} : Shape{c}));
  return stack_rows(parts, base + "attention.{q,k,v}_proj." + kind);
}

void map_vit_layer(const SafetensorsSet& set, const ModelDesc& desc, const VisionNames& n, int layer,
                   ModelWeights* out) {
  const int64_t c = desc.vision.hidden, m = desc.vision.mlp;
  const std::string base = n.prefix + n.layer + std::to_string(layer) + ".";
  const std::string dst = "vit." + std::to_string(layer) + ".";
  const bool layer_norm = desc.vision.norm == VitNorm::LayerNorm;
  put(out, dst + "norm1.weight", set.ref(base + n.norm1 + "weight", {c}));
  if (layer_norm) put(out, dst + "norm1.bias", set.ref(base + n.norm1 + "bias", {c}));
  put(out, dst + "qkv.weight", fused_vit_qkv(set, base, desc, "weight", true));
  if (desc.vision.qkv_bias) put(out, dst + "qkv.bias", fused_vit_qkv(set, base, desc, "bias", false));
  if (desc.vision.qk_norm) {
    put(out, dst + "q_norm", set.ref(base + n.attn + "q_norm.weight", {c}));
    put(out, dst + "k_norm", set.ref(base + n.attn + "k_norm.weight", {c}));
  }
  put(out, dst + "proj.weight", set.ref(base + n.proj + "weight", {c, c}));
  put(out, dst + "proj.bias", set.ref(base + n.proj + "bias", {c}));
  put(out, dst + "ls1", set.ref(base + n.ls1, {c}));
  put(out, dst + "norm2.weight", set.ref(base + n.norm2 + "weight", {c}));
  if (layer_norm) put(out, dst + "norm2.bias", set.ref(base + n.norm2 + "bias", {c}));
  put(out, dst + "fc1.weight", set.ref(base + "mlp.fc1.weight", {m, c}));
  put(out, dst + "fc1.bias", set.ref(base + "mlp.fc1.bias", {m}));
  put(out, dst + "fc2.weight", set.ref(base + "mlp.fc2.weight", {c, m}));
  put(out, dst + "fc2.bias", set.ref(base + "mlp.fc2.bias", {c}));
  put(out, dst + "ls2", set.ref(base + n.ls2, {c}));
}

}  // namespace

void map_vision_weights(const SafetensorsSet& set, const ModelDesc& desc, ModelWeights* out) {
  const VisionConfig& v = desc.vision;
  const int64_t c = v.hidden, p = v.patch_size;
  const VisionNames n = vision_names(set, desc.format);
  put(out, "vit.patch.weight", set.ref(n.prefix + n.patch + "weight", {c, 3, p, p}).view({c, 3 * p * p}));
  put(out, "vit.patch.bias", set.ref(n.prefix + n.patch + "bias", {c}));
  put(out, "vit.cls", set.ref(n.prefix + n.cls, {1, 1, c}).view({c}));
  put(out, "vit.pos", set.ref(n.prefix + n.pos, {1, v.tokens(), c}).view({v.tokens(), c}));
  for (int layer = 0; layer < v.layers; ++layer) map_vit_layer(set, desc, n, layer, out);
}

void map_projector_weights(const SafetensorsSet& set, const ModelDesc& desc, ModelWeights* out) {
  const int64_t in = int64_t(desc.vision.hidden) * 4, h = desc.llm.hidden;
  std::string norm = "mlp1.0.", fc1 = "mlp1.1.", fc2 = "mlp1.3.";
  if (desc.format == CheckpointFormat::HfInternVL) {
    const std::string prefix = set.has("model.multi_modal_projector.layer_norm.weight") ? "model.multi_modal_projector."
                                                                                        : "multi_modal_projector.";
    norm = prefix + "layer_norm.", fc1 = prefix + "linear_1.", fc2 = prefix + "linear_2.";
  }
  put(out, "proj.norm.weight", set.ref(norm + "weight", {in}));
  put(out, "proj.norm.bias", set.ref(norm + "bias", {in}));
  put(out, "proj.fc1.weight", set.ref(fc1 + "weight", {h, in}));
  put(out, "proj.fc1.bias", set.ref(fc1 + "bias", {h}));
  put(out, "proj.fc2.weight", set.ref(fc2 + "weight", {h, h}));
  put(out, "proj.fc2.bias", set.ref(fc2 + "bias", {h}));
}

}  // namespace fovea

// config.json -> ModelDesc, for the original `internvl_chat` format and transformers' `internvl` format.
// Anything the runtime does not implement (other pixel-shuffle versions, other feature layers, unknown templates,
// mixture-of-experts and other LLM architectures) is rejected here with the key and value that ask for it.
#include <cmath>
#include <filesystem>
#include <fstream>

#include "model/config_json.h"
#include "model/model_desc.h"
#include "model/special_tokens.h"

namespace fovea {
namespace fs = std::filesystem;
namespace {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  FOVEA_CHECK(in, "cannot read ", path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    FOVEA_FAIL(path, ": bad JSON: ", e.what());
  }
}

void check_common_vision(const VisionConfig& v, const std::string& where) {
  FOVEA_CHECK(v.hidden > 0 && v.heads > 0 && v.hidden % v.heads == 0, where, ": hidden_size ", v.hidden,
              " is not a multiple of num_attention_heads ", v.heads);
  FOVEA_CHECK(v.layers > 0 && v.mlp > 0, where, ": needs positive num_hidden_layers and intermediate_size");
  FOVEA_CHECK(v.patch_size > 0 && v.image_size % v.patch_size == 0 && (v.image_size / v.patch_size) % 2 == 0, where,
              ": image_size ", v.image_size, " must be an even number of patches of ", v.patch_size);
}

void check_llm(const LlmConfig& l, const std::string& where) {
  FOVEA_CHECK(l.hidden > 0 && l.layers > 0 && l.heads > 0 && l.kv_heads > 0 && l.ffn > 0 && l.vocab > 0, where,
              ": sizes must be positive");
  FOVEA_CHECK(l.heads % l.kv_heads == 0, where, ": num_attention_heads ", l.heads,
              " is not a multiple of num_key_value_heads ", l.kv_heads);
  FOVEA_CHECK(l.head_dim > 0 && l.head_dim % 2 == 0, where, ": head_dim ", l.head_dim, " must be even (rope)");
}

// Fields llm_config (original) and text_config (-hf) share. Qwen3 states head_dim (heads * head_dim may differ
// from hidden_size: Qwen3-0.6B has 16 x 128 over 1024); transformers' Qwen3Config defaults it to 128.
void read_llm_sizes(const JsonSection& s, LlmConfig* l) {
  l->hidden = s.get_int("hidden_size");
  l->layers = s.get_int("num_hidden_layers");
  l->heads = s.get_int("num_attention_heads");
  l->kv_heads = s.get_int("num_key_value_heads", l->heads);
  const int default_head_dim = l->arch == LlmArch::Qwen3 ? 128 : l->heads > 0 ? l->hidden / l->heads : 0;
  l->head_dim = s.get_int("head_dim", default_head_dim);
  l->ffn = s.get_int("intermediate_size");
  l->vocab = s.get_int("vocab_size");
  // The tokenizer files decide BOS and EOS (model/special_tokens.cc), but ids the config states outside the
  // vocabulary say that config and weights belong to different models.
  for (const char* key : {"bos_token_id", "eos_token_id"}) {
    if (!s.has(key)) continue;
    const nlohmann::json& value = s.json[key];
    for (const nlohmann::json& id : value.is_array() ? value : nlohmann::json::array({value}))
      FOVEA_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < l->vocab, s.where, ".",
                  key, " ", excerpt(id.dump()), " is outside the vocabulary (vocab_size ", l->vocab, ")");
  }
  // A zero or negative epsilon / rope base loads and then answers NaN logits (token 0): refuse them here.
  l->rms_eps = float(s.get_positive("rms_norm_eps", 1e-6));
  double theta = s.get_positive("rope_theta", 10000.0);
  if (s.has("rope_parameters")) theta = s.child("rope_parameters").get_positive("rope_theta", theta);
  l->rope_theta = float(theta);
  l->max_position = s.get_int("max_position_embeddings", 32768);
  FOVEA_CHECK(l->max_position > 0, s.where, ".max_position_embeddings must be positive, got ", l->max_position);
  const std::string act = s.get_string("hidden_act", "silu");
  FOVEA_CHECK(act == "silu", s.where, ".hidden_act '", act, "' is not supported (silu only)");
  FOVEA_CHECK(!s.get_bool("use_sliding_window", false), s.where, ".use_sliding_window true is not supported");
}

// InternLM2's config carries rope_scaling {type: dynamic, factor: 2}: dynamic NTK only changes positions past
// max_position_embeddings, which requests never reach (the engine caps context). Llama-3 (InternVL2-76B's
// Hermes-2-Theta-Llama-3-70B) has rope_scaling null and plain rope with theta 500000. transformers 5 writes the
// same as rope_parameters {rope_type, rope_theta}. Anything else (linear, yarn, llama3, ...) is rejected.
void check_rope_scaling(const JsonSection& s) {
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!s.has(key)) continue;
    const JsonSection r = s.child(key);
    const std::string type = r.get_string("type", r.get_string("rope_type", "default"));
    FOVEA_CHECK(type == "dynamic" || type == "default", s.where, ".", key, " type '", type,
                "' is not supported (only plain rope and InternLM2's dynamic NTK, a no-op inside "
                "max_position_embeddings)");
  }
}

// LLM architectures of the InternVL family that Fovea does not run, with what is missing: named in the error.
const char* unsupported_llm(const std::string& name) {
  if (name == "Qwen3MoeForCausalLM" || name == "qwen3_moe") return "Qwen3-MoE (mixture of experts) is not supported";
  if (name == "GptOssForCausalLM" || name == "gpt_oss")
    return "GPT-OSS (mixture of experts, attention sinks, sliding windows) is not supported";
  if (name == "Phi3ForCausalLM" || name == "phi3") return "Phi-3 is not supported";
  if (name == "InternLM3ForCausalLM" || name == "internlm3") return "InternLM3 is not supported";
  return nullptr;
}

// Qwen3: per-head q/k norm; attention_bias would also put a bias on o_proj, which the runtime has no place for.
void read_qwen3(const JsonSection& s, LlmConfig* l) {
  l->qk_norm = true;
  FOVEA_CHECK(!s.get_bool("attention_bias", false), s.where,
              ".attention_bias true (biases on q/k/v/o) is not supported");
  l->qkv_bias = false;
}

// The ViT's shape and norm, spelled the same way in both formats' vision_config.
void read_vision_shape(const JsonSection& vis, VisionConfig* v) {
  v->hidden = vis.get_int("hidden_size");
  v->layers = vis.get_int("num_hidden_layers");
  v->heads = vis.get_int("num_attention_heads");
  v->mlp = vis.get_int("intermediate_size");
  v->image_size = vis.get_square("image_size", 448);
  v->patch_size = vis.get_square("patch_size", 14);
  v->norm_eps = float(vis.get_positive("layer_norm_eps", 1e-6));
}

// Only InternViT runs: another tower's config (SigLIP, CLIP) would be read as InternViT's sizes and fail later on its
// tensors. A config that leaves the key out is taken as InternViT's.
void check_vision_tower(const JsonSection& vis, const char* model_type, const char* architecture) {
  const std::string type = vis.get_string("model_type", model_type);
  FOVEA_CHECK(type == model_type, vis.where, ".model_type '", type, "': unknown vision tower (supported: ", model_type,
              ", InternViT)");
  const std::string arch = vis.first_architecture();
  FOVEA_CHECK(architecture == nullptr || arch.empty() || arch == architecture, vis.where, ".architectures[0] '", arch,
              "': unknown vision tower (supported: ", architecture, ")");
}

// norm_type: layer_norm (InternViT-300M) or rms_norm (InternViT-6B); the two formats default differently.
VitNorm read_vit_norm(const JsonSection& vis, const char* fallback) {
  const std::string norm = vis.get_string("norm_type", fallback);
  if (norm == "layer_norm") return VitNorm::LayerNorm;
  if (norm == "rms_norm") return VitNorm::RmsNorm;
  FOVEA_FAIL(vis.where, ".norm_type '", norm, "' is not supported (layer_norm, rms_norm)");
}

ChatTemplateKind template_from_name(const std::string& name, const std::string& where) {
  if (name == "internlm2-chat") return ChatTemplateKind::InternLM2Chat;
  if (name == "internvl2_5") return ChatTemplateKind::InternVL2_5;
  if (name == "Hermes-2") return ChatTemplateKind::Hermes2;
  FOVEA_FAIL(where, ": template '", name, "' is not supported (internlm2-chat, internvl2_5, Hermes-2)");
}

void parse_original(const JsonSection& root, ModelDesc* d) {
  d->format = CheckpointFormat::InternVLChat;
  const JsonSection llm = root.child("llm_config");
  const std::string arch = llm.first_architecture();
  if (arch == "InternLM2ForCausalLM") {
    d->llm.arch = LlmArch::InternLM2;
    FOVEA_CHECK(!llm.get_bool("bias", false), llm.where, ".bias true (InternLM2 with biases) is not supported");
  } else if (arch == "Qwen2ForCausalLM") {
    d->llm.arch = LlmArch::Qwen2;
  } else if (arch == "Qwen3ForCausalLM") {
    d->llm.arch = LlmArch::Qwen3;
  } else if (arch == "LlamaForCausalLM") {
    d->llm.arch = LlmArch::Llama;
  } else if (const char* why = unsupported_llm(arch)) {
    FOVEA_FAIL(llm.where, ".architectures[0] '", arch, "': ", why);
  } else {
    FOVEA_FAIL(llm.where, ".architectures[0] '", arch,
               "': unknown architecture (supported: InternLM2ForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
               "LlamaForCausalLM)");
  }
  read_llm_sizes(llm, &d->llm);
  check_rope_scaling(llm);
  d->llm.qkv_bias = d->llm.arch == LlmArch::Qwen2;
  if (d->llm.arch == LlmArch::Llama)
    FOVEA_CHECK(!llm.get_bool("attention_bias", false), llm.where, ".attention_bias true is not supported");
  if (d->llm.arch == LlmArch::Qwen3) read_qwen3(llm, &d->llm);
  d->llm.tie_embeddings = llm.get_bool("tie_word_embeddings", false);

  // Defaults are those of InternVL's InternVisionConfig (the InternViT-6B shape): real configs state all three.
  const JsonSection vis = root.child("vision_config");
  check_vision_tower(vis, "intern_vit_6b", "InternVisionModel");
  VisionConfig& v = d->vision;
  read_vision_shape(vis, &v);
  v.norm = read_vit_norm(vis, "rms_norm");
  v.qkv_bias = vis.get_bool("qkv_bias", false);
  v.qk_norm = vis.get_bool("qk_normalization", true);
  v.qk_norm_eps = v.norm_eps;
  const std::string act = vis.get_string("hidden_act", "gelu");
  FOVEA_CHECK(act == "gelu", vis.where, ".hidden_act '", act, "' is not supported (gelu only)");
  const int forced = root.get_int("force_image_size", v.image_size);
  FOVEA_CHECK(forced == v.image_size, root.where, ": force_image_size ", forced, " differs from the ViT's ",
              v.image_size, " (position embedding interpolation is not supported)");

  const int select_layer = root.get_int("select_layer", -1);
  FOVEA_CHECK(select_layer == -1, root.where, ": select_layer ", select_layer,
              " is not supported (only -1, the ViT's last layer)");
  const std::string ps = root.get_string("ps_version", "v1");
  FOVEA_CHECK(ps == "v2", root.where, ": ps_version '", ps, "' is not supported (only v2 pixel shuffle)");
  v.downsample_ratio = float(root.get_double("downsample_ratio", 0.5));
  d->chat_template = template_from_name(root.get_string("template", ""), root.where);
  d->template_named = true;
  d->max_dynamic_tiles = root.get_int("max_dynamic_patch", 12);
  d->min_dynamic_tiles = root.get_int("min_dynamic_patch", 1);
  d->use_thumbnail = root.get_bool("use_thumbnail", true);
  FOVEA_CHECK(root.get_bool("dynamic_image_size", true), root.where, ": dynamic_image_size false is not supported");
}

void parse_hf(const JsonSection& root, ModelDesc* d) {
  d->format = CheckpointFormat::HfInternVL;
  const JsonSection text = root.child("text_config");
  const std::string type = text.get_string("model_type", "");
  if (type == "llama") {
    d->llm.arch = LlmArch::Llama;
    FOVEA_CHECK(!text.get_bool("attention_bias", false) && !text.get_bool("mlp_bias", false), text.where,
                ": attention_bias / mlp_bias true is not supported");
  } else if (type == "qwen2") {
    d->llm.arch = LlmArch::Qwen2;
  } else if (type == "qwen3") {
    d->llm.arch = LlmArch::Qwen3;
  } else if (const char* why = unsupported_llm(type)) {
    FOVEA_FAIL(text.where, ".model_type '", type, "': ", why);
  } else {
    FOVEA_FAIL(text.where, ".model_type '", type, "': unknown architecture (supported: llama, qwen2, qwen3)");
  }
  read_llm_sizes(text, &d->llm);
  check_rope_scaling(text);
  d->llm.qkv_bias = d->llm.arch == LlmArch::Qwen2;
  if (d->llm.arch == LlmArch::Qwen3) read_qwen3(text, &d->llm);
  // transformers ties when the text config says so; the top-level flag is the fallback.
  d->llm.tie_embeddings = text.get_bool("tie_word_embeddings", root.get_bool("tie_word_embeddings", false));

  const JsonSection vis = root.child("vision_config");
  check_vision_tower(vis, "internvl_vision", nullptr);
  VisionConfig& v = d->vision;
  read_vision_shape(vis, &v);
  v.norm = read_vit_norm(vis, "layer_norm");  // transformers' InternVLVisionConfig defaults
  v.qkv_bias = vis.get_bool("attention_bias", false);
  v.qk_norm = vis.get_bool("use_qk_norm", false);
  v.qk_norm_eps = 1e-6f;  // InternVLVisionRMSNorm's default: transformers does not pass layer_norm_eps
  FOVEA_CHECK(vis.get_bool("use_mean_pooling", true), vis.where,
              ".use_mean_pooling false (a final ViT LayerNorm) is not supported");
  FOVEA_CHECK(vis.get_bool("use_absolute_position_embeddings", true), vis.where,
              ".use_absolute_position_embeddings false is not supported");
  const std::string act = vis.get_string("hidden_act", "gelu");
  FOVEA_CHECK(act == "gelu", vis.where, ".hidden_act '", act, "' is not supported (gelu only)");

  FOVEA_CHECK(!root.has("vision_feature_layer") || root.json["vision_feature_layer"] == -1, root.where,
              ": vision_feature_layer ", root.json.value("vision_feature_layer", nlohmann::json()).dump(),
              " is not supported (only -1)");
  const std::string strategy = root.get_string("vision_feature_select_strategy", "default");
  FOVEA_CHECK(strategy == "default", root.where, ": vision_feature_select_strategy '", strategy,
              "' is not supported (default: drop CLS)");
  const std::string proj_act = root.get_string("projector_hidden_act", "gelu");
  FOVEA_CHECK(proj_act == "gelu", root.where, ": projector_hidden_act '", proj_act, "' is not supported");
  v.downsample_ratio = float(root.get_double("downsample_ratio", 0.5));
  d->image_token_id = root.get_int("image_token_id", -1);
  // A config that names its template (an InternVL2 conversion, our benchmark's model) is taken at its word; else
  // the model's own ChatML template when the tokenizer files have one (resolve_special_tokens), else InternVL2.5's
  // (most -hf checkpoints are InternVL2.5/3 conversions, whose template puts "\n" after <|im_end|>).
  d->template_named = root.has("template");
  d->chat_template = d->template_named ? template_from_name(root.get_string("template", ""), root.where)
                                       : ChatTemplateKind::InternVL2_5;
}

// The tiling policy of -hf checkpoints lives in preprocessor_config.json (GotOcr2 image processor).
void read_hf_tiling(const std::string& dir, ModelDesc* d) {
  const fs::path path = fs::path(dir) / "preprocessor_config.json";
  if (!fs::exists(path)) return;
  const nlohmann::json json = read_json_file(path.string());
  const JsonSection s{json, path.string()};
  d->max_dynamic_tiles = s.get_int("max_patches", d->max_dynamic_tiles);
  d->min_dynamic_tiles = s.get_int("min_patches", d->min_dynamic_tiles);
  FOVEA_CHECK(s.get_bool("crop_to_patches", true), path.string(), ": crop_to_patches false is not supported");
}

}  // namespace

ModelDesc load_model_desc(const std::string& dir) {
  const fs::path path = fs::path(dir) / "config.json";
  FOVEA_CHECK(fs::exists(path), dir, ": no config.json (not a model directory)");
  const nlohmann::json json = read_json_file(path.string());
  FOVEA_CHECK(json.is_object(), path.string(), ": not a JSON object");
  const JsonSection root{json, path.string()};
  ModelDesc d;
  d.dir = dir;
  const std::string type = root.get_string("model_type", "");
  if (type == "internvl_chat") {
    parse_original(root, &d);
  } else if (type == "internvl") {
    parse_hf(root, &d);
    read_hf_tiling(dir, &d);
  } else {
    FOVEA_FAIL(path.string(), ": model_type '", type, "': unknown architecture (supported: internvl_chat, internvl)");
  }
  check_common_vision(d.vision, root.where + ": vision");
  check_llm(d.llm, root.where + ": llm");
  FOVEA_CHECK(std::fabs(d.vision.downsample_ratio - 0.5f) < 1e-6f, path.string(), ": downsample_ratio ",
              d.vision.downsample_ratio, " is not supported (only 0.5)");
  FOVEA_CHECK(d.min_dynamic_tiles >= 1 && d.max_dynamic_tiles >= d.min_dynamic_tiles, path.string(),
              ": bad dynamic tile range [", d.min_dynamic_tiles, ", ", d.max_dynamic_tiles, "]");
  // The ViT workspace is sized for max_dynamic_patch + 1 tiles: 2^31-1 overflowed, 100000 asked for 60 GB.
  FOVEA_CHECK(d.max_dynamic_tiles <= kMaxDynamicTiles, path.string(), ": max_dynamic_patch / max_patches ",
              d.max_dynamic_tiles, " is over the limit of ", kMaxDynamicTiles, " tiles");
  d.quantization = read_checkpoint_quantization(root);
  resolve_special_tokens(dir, &d);
  return d;
}

}  // namespace fovea

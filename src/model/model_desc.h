// One internal description of an InternVL checkpoint, whichever format it came in (original `internvl_chat`
// with InternLM2, Llama, Qwen2 or Qwen3, or transformers-native `internvl` with a Llama, Qwen2 or Qwen3 text
// config; InternViT-300M or InternViT-6B). Loading maps
// weights to the canonical names below and does layout changes (qkv fuse/split, gate/up fuse) once, at load.
//
// Canonical weight names (host tensors, original dtype unless a fusion created them):
//  vision (L = layer index):
//   vit.patch.weight [C, 3*p*p] (conv weight flattened in (channel, ky, kx) order), vit.patch.bias [C]
//   vit.cls [C], vit.pos [1 + (S/p)^2, C]
//   vit.L.norm1.{weight,bias} [C] (no bias with RMSNorm), vit.L.qkv.{weight [3C, C], bias [3C]} rows [q | k | v],
//   vit.L.q_norm, vit.L.k_norm [C] (InternViT-6B's q/k RMSNorm over all heads),
//   vit.L.proj.{weight [C, C], bias}, vit.L.ls1 [C], vit.L.norm2.{weight,bias},
//   vit.L.fc1.{weight [M, C], bias}, vit.L.fc2.{weight [C, M], bias}, vit.L.ls2 [C]
//  projector: proj.norm.{weight,bias} [4C], proj.fc1.{weight [H, 4C], bias}, proj.fc2.{weight [H, H], bias}
//  language model:
//   llm.embed [V, H]; llm.L.attn_norm [H];
//   llm.L.qkv.weight [(NH + 2*KV)*D, H] rows [all q heads | all k heads | all v heads], llm.L.qkv.bias (Qwen2);
//   llm.L.q_norm, llm.L.k_norm [D] (Qwen3's per-head q/k RMSNorm); llm.L.o.weight [H, NH*D]; llm.L.ffn_norm [H]; llm.L.gate_up.weight [2F, H] rows [gate | up];
//   llm.L.down.weight [H, F]; llm.norm [H]; llm.lm_head [V, H] (a copy of llm.embed's handle when tied)
//   With LoadOptions::keep_w4, a packed projection P (qkv, o, gate_up, down) is llm.L.P.w4.codes
//   [out, w4::code_words(in)] I32, llm.L.P.w4.params [out, in / group] I32 and, for act-order, llm.L.P.w4.perm
//   [in] I32 (backend/w4_layout.h) in place of llm.L.P.weight, rows in the same order as the dense weight's.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/quantization.h"
#include "model/weight_ref.h"

namespace fovea {

enum class LlmArch : uint8_t { InternLM2, Llama, Qwen2, Qwen3 };
// The ViT layers' norm1 / norm2: LayerNorm with bias (InternViT-300M) or RMSNorm without (InternViT-6B).
enum class VitNorm : uint8_t { LayerNorm, RmsNorm };
// ChatML: the model's own ChatML chat template (tokenizer_config.json), with ModelDesc::template_system.
enum class ChatTemplateKind : uint8_t { InternLM2Chat, InternVL2_5, Hermes2, ChatML };
enum class CheckpointFormat : uint8_t { InternVLChat, HfInternVL };

struct VisionConfig {
  int image_size = 448;
  int patch_size = 14;
  int hidden = 1024;
  int layers = 24;
  int heads = 16;
  int mlp = 4096;
  float norm_eps = 1e-6f;
  bool qkv_bias = true;
  VitNorm norm = VitNorm::LayerNorm;
  // InternViT-6B: q and k each RMSNorm-ed over all heads together (width C) before attention. Its epsilon is
  // layer_norm_eps in InternVL's own model, a fixed 1e-6 in transformers' (equal in every real config).
  bool qk_norm = false;
  float qk_norm_eps = 1e-6f;
  float downsample_ratio = 0.5f;
  int grid() const { return image_size / patch_size; }                  // 32
  int tokens() const { return grid() * grid() + 1; }                    // 1025 with CLS
  int tokens_per_tile() const { return (grid() / 2) * (grid() / 2); }  // 256 after pixel shuffle
};

struct LlmConfig {
  LlmArch arch = LlmArch::InternLM2;
  int hidden = 4096;
  int layers = 32;
  int heads = 32;
  int kv_heads = 8;
  int head_dim = 128;
  int ffn = 14336;
  int vocab = 92553;
  float rope_theta = 1e6f;
  float rms_eps = 1e-5f;
  bool qkv_bias = false;
  // Qwen3: q and k RMSNorm-ed per head (over head_dim, eps rms_eps) before rope.
  bool qk_norm = false;
  bool tie_embeddings = false;
  int max_position = 32768;
};

// What load_model did with a 4-bit checkpoint's LLM linears (empty for dense checkpoints and load_model_desc).
struct W4Loading {
  bool kept_packed = false;  // LoadOptions::keep_w4 on a packed checkpoint
  int packed_linears = 0;    // canonical linears stored as "<name>.w4.*" (model_desc.h's list)
  std::vector<std::string> dequantized;  // "<canonical linear>: <why>" for those that could not stay packed
};

// The most tiles per image a config may ask for (InternVL checkpoints use 6 to 40).
inline constexpr int kMaxDynamicTiles = 64;

struct ModelDesc {
  CheckpointFormat format = CheckpointFormat::InternVLChat;
  VisionConfig vision;
  LlmConfig llm;
  ChatTemplateKind chat_template = ChatTemplateKind::InternLM2Chat;
  // ChatML only: the system text the model's template writes when a request gives none (nullopt: no system turn).
  std::optional<std::string> template_system;
  bool template_named = false;  // config.json names its template ("template"): the model's own is not used
  int max_dynamic_tiles = 12;  // config's max_dynamic_patch, at most kMaxDynamicTiles
  int min_dynamic_tiles = 1;
  bool use_thumbnail = true;
  int image_token_id = 92546;  // <IMG_CONTEXT>
  int img_start_id = 92544;    // <img>
  int img_end_id = 92545;      // </img>
  int bos_id = 1;              // -1 when none is added (tokenizer_config's add_bos_token, else the arch's rule)
  std::vector<int> eos_ids;    // generation stops on any of these
  std::string dir;             // checkpoint directory (tokenizer files live here)
  // config.json's quantization_config: 4-bit AWQ / GPTQ linears, dequantized to bf16 at load unless
  // LoadOptions::keep_w4 (none: dense).
  CheckpointQuantization quantization;
  W4Loading w4;
};

// The canonical weights of a checkpoint, described and not yet read: each is a WeightRef (model/weight_ref.h)
// that makes its host tensor when loaded, so the whole model is mapped and checked against its config before any
// weight is read, and is then read one tensor at a time.
struct ModelWeights {
  std::map<std::string, WeightRef> tensors;       // canonical name -> weight
  std::vector<std::shared_ptr<void>> keep_alive;  // mmaps the tensors point into (the refs hold them too)
  const WeightRef& ref(const std::string& name) const;  // throws naming the missing tensor
  Tensor get(const std::string& name) const { return ref(name).load(); }  // reads it now
  bool has(const std::string& name) const { return tensors.count(name) != 0; }
  Shape shape_of(const std::string& name) const { return ref(name).shape; }
  // The same for two names stored once (a tied lm_head and the embedding).
  const void* storage_key(const std::string& name) const { return ref(name).key(); }
};

struct LoadedModel {
  ModelDesc desc;
  ModelWeights weights;
};

// Reads config.json and maps the safetensors (single file or sharded with model.safetensors.index.json) of `dir`,
// describing every canonical weight from the headers; no weight data is read until a ref is loaded. Every bad
// input (truncated file, overlapping or out-of-range offsets, unknown dtype, missing tensor, wrong shape, unknown
// architecture, a packing that does not fit) throws fovea::Error naming the file and the tensor; damaged values
// (NaN, infinity) are found when the tensor is read (model/weight_check.h).
struct LoadOptions {
  // The LLM's packed 4-bit linears (qkv, o, gate_up, down) stay packed, repacked into linear_w4's layout
  // (model/w4_repack.h) as "llm.L.<linear>.w4.codes" / ".w4.params" (/ ".w4.perm") instead of "...weight"; a
  // linear that cannot stay exactly packed is dequantized and listed in ModelDesc::w4.
  bool keep_w4 = false;
};
LoadedModel load_model(const std::string& dir, const LoadOptions& options = {});
ModelDesc load_model_desc(const std::string& dir);  // config only

}  // namespace fovea

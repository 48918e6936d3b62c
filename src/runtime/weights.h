// The model's weights on the backend: every canonical tensor (model/model_desc.h) the forward needs is allocated
// once in the backend's weight dtype (or E4M3 / 4-bit packed), filled by a WeightSource (runtime/weight_source.h:
// a checkpoint, random weights, or nothing when only planning memory) and grouped per layer for the forward.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <vector>

#include "backend/backend.h"
#include "model/model_desc.h"
#include "runtime/weight_source.h"

namespace fovea {

// An FP8 (E4M3) copy of a linear weight: the codes [N, K] and their dequantisation scales under `scaling`
// (backend/fp8_recipe.h: one per tensor, per output channel or per 128x128 block, each max|w| / 448).
struct Fp8Linear {
  Tensor codes, scale;
  Fp8Scaling scaling = Fp8Scaling::Tensor;
  bool empty() const { return codes.empty(); }
};

// Whether every layer's `linears` are FP8 with per-token activation scales (Fp8Scaling::Channel): the linears
// whose inputs a forward can take already quantized from their producers (Fp8Rows). False without layers.
template <typename Layer>
bool fp8_by_rows(const std::vector<Layer>& layers, std::initializer_list<Fp8Linear Layer::*> linears) {
  if (layers.empty()) return false;
  for (const Layer& layer : layers)
    for (Fp8Linear Layer::*linear : linears)
      if ((layer.*linear).empty() || (layer.*linear).scaling != Fp8Scaling::Channel) return false;
  return true;
}

// A linear kept 4-bit (W4A16, from an AWQ / GPTQ checkpoint loaded with LoadOptions::keep_w4): the packed weight
// and the workspace linear_w4 runs in, one device buffer shared by every W4 linear (sized for the largest).
struct W4Linear {
  W4Weight weight;
  Tensor workspace;
  bool empty() const { return weight.empty(); }
};

// y = act(x · W^T + bias) through be.linear, or be.linear_fp8_scaled with w8's recipe when the weight was
// quantized (w8 set, w empty).
void apply_linear(Backend& be, const Tensor& x, const Tensor& w, const Fp8Linear& w8, const Tensor& bias, Tensor& y,
                  Activation act = Activation::None);
// The same with a W4 weight: be.linear_w4 when w4 is set (w and w8 empty; no activation).
void apply_linear(Backend& be, const Tensor& x, const Tensor& w, const Fp8Linear& w8, const W4Linear& w4,
                  const Tensor& bias, Tensor& y);

// Calibration (fovea quantize): when set, every LLM projection (the apply_linear above with a W4Linear) first
// hands its weight and input to `observer` (a null check on the hot path otherwise). Set it only while no
// engine runs steps; the observer is called from the engine's thread.
using LinearInputObserver = void (*)(void* context, const Tensor& weight, const Tensor& input);
void set_linear_input_observer(LinearInputObserver observer, void* context);
// Whether an observer is set: the LLM forward then runs every layer on every row (calibration wants all of them).
bool linear_inputs_observed();

// With FP8 ViT weights qkv's and fc1's bf16 tensors are not uploaded (empty) and qkv8 / fc1_8 hold them; proj and
// fc2 stay in the weight dtype (weights.cc says why).
// InternViT-6B: norm*_b and qkv_b empty (RMSNorm, no qkv bias), q_norm / k_norm [C] set. proj and fc2 carry the
// layer scales ls1 / ls2: rows and biases multiplied by them at load (upload_vision). ls1 / ls2 themselves are
// kept only so that the loader's byte count (and the memory plan's, which must equal it) holds every upload.
struct VitLayerWeights {
  Tensor norm1_w, norm1_b, qkv_w, qkv_b, q_norm, k_norm, proj_w, proj_b, ls1;
  Tensor norm2_w, norm2_b, fc1_w, fc1_b, fc2_w, fc2_b, ls2;
  Fp8Linear qkv8, fc1_8;
};

struct VisionWeights {
  Tensor patch_w;  // [C, 3*p*p]
  Tensor patch_b;  // [C]
  Tensor cls;      // [C]
  Tensor pos;      // [1 + G*G, C]
  std::vector<VitLayerWeights> layers;
  Tensor proj_norm_w, proj_norm_b, proj_fc1_w, proj_fc1_b, proj_fc2_w, proj_fc2_b;
};

// With FP8 weights the four projections' bf16 tensors are not uploaded (empty) and the *8 fields hold them;
// with W4 weights (a packed projection of a 4-bit checkpoint) the *4 fields do.
struct LlmLayerWeights {
  Tensor attn_norm, qkv_w, qkv_b /* empty unless Qwen2 */, q_norm, k_norm /* [D], Qwen3 only */, o_w, ffn_norm,
      gate_up_w, down_w;
  Fp8Linear qkv8, o8, gate_up8, down8;
  W4Linear qkv4, o4, gate_up4, down4;
};

struct LlmWeights {
  Tensor embed;  // [V, H]
  std::vector<LlmLayerWeights> layers;
  Tensor norm;     // [H]
  Tensor lm_head;  // [V, H]; the same device tensor as embed when tied
};

struct W4Summary {
  int linears = 0;          // linears kept 4-bit on the device
  size_t bytes = 0;         // their device bytes (codes, params, perms)
  size_t bf16_bytes = 0;    // what the same linears take as bf16
  size_t workspace = 0;     // the shared linear_w4 workspace
};

struct DeviceWeights {
  VisionWeights vision;
  LlmWeights llm;
  size_t bytes = 0;  // device bytes taken by the weights (tied tensors counted once; the W4 workspace not)
  W4Summary w4;
};

// Allocates every weight the forward needs and has `source` fill it, one tensor at a time, checking each canonical
// tensor's shape against `desc`. Throws fovea::Error naming the tensor on a missing tensor or a wrong shape. fp8_llm:
// the LLM's four projections per layer are held as E4M3 codes with fp8_scaling's weight scales (a checkpoint's are
// quantized on the host, backend/fp8_recipe.h); fp8_vit: the same for the ViT layers' qkv and fc1 (the linears whose
// inputs their norms quantize). The patch embedding, the projector, embeddings, norms, biases and the LM head stay in
// the weight dtype. Projections the source holds 4-bit (WeightSource::has_w4) are uploaded packed (not with fp8_llm:
// that needs them dense), with one workspace for linear_w4.
DeviceWeights upload_weights(const ModelDesc& desc, WeightSource& source, Backend& backend, bool fp8_llm = false,
                             bool fp8_vit = false, Fp8Scaling fp8_scaling = Fp8Scaling::Channel);

}  // namespace fovea

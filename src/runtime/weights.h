// The model's weights on the backend: every canonical host tensor of a LoadedModel (model/model_desc.h) is
// uploaded once, converted to the backend's weight dtype, and grouped per layer for the forward.
#pragma once
#include <cstddef>
#include <vector>

#include "backend/backend.h"
#include "model/model_desc.h"

namespace fovea {

struct VitLayerWeights {
  Tensor norm1_w, norm1_b, qkv_w, qkv_b, proj_w, proj_b, ls1;
  Tensor norm2_w, norm2_b, fc1_w, fc1_b, fc2_w, fc2_b, ls2;
};

struct VisionWeights {
  Tensor patch_w;  // [C, 3*p*p]
  Tensor patch_b;  // [C]
  Tensor cls;      // [C]
  Tensor pos;      // [1 + G*G, C]
  std::vector<VitLayerWeights> layers;
  Tensor proj_norm_w, proj_norm_b, proj_fc1_w, proj_fc1_b, proj_fc2_w, proj_fc2_b;
};

struct LlmLayerWeights {
  Tensor attn_norm, qkv_w, qkv_b /* empty unless Qwen2 */, o_w, ffn_norm, gate_up_w, down_w;
};

struct LlmWeights {
  Tensor embed;  // [V, H]
  std::vector<LlmLayerWeights> layers;
  Tensor norm;     // [H]
  Tensor lm_head;  // [V, H]; the same device tensor as embed when tied
};

struct DeviceWeights {
  VisionWeights vision;
  LlmWeights llm;
  size_t bytes = 0;  // device bytes taken by the weights (tied tensors counted once)
};

// Uploads every weight the forward needs, checking each canonical tensor's shape against `model.desc`.
// Throws fovea::Error naming the tensor on a missing tensor or a wrong shape.
DeviceWeights upload_weights(const LoadedModel& model, Backend& backend);

}  // namespace fovea

// Checkpoint tensors -> the canonical names of model_desc.h, for both formats. Internal to src/model.
#pragma once
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "model/model_desc.h"
#include "model/safetensors.h"

namespace fovea {

// The first of `names` the checkpoint holds, else the first one (so a missing-tensor error names it).
std::string pick_name(const SafetensorsSet& set, std::initializer_list<std::string> names);

// Rows of `parts` stacked into a host tensor (new unless there is one part); parts must share dtype and the trailing
// dims (model/weight_ref.h's stack_rows, loaded now).
Tensor concat_rows(const std::vector<Tensor>& parts, const std::string& what);

// InternLM2's wqkv rows are grouped per KV head: for each group g, [q heads of g | k_g | v_g] x head_dim rows.
// Returns a copy with rows [all q heads | all k heads | all v heads] (what transformers' converter produces).
Tensor regroup_internlm2_wqkv(const Tensor& wqkv, const LlmConfig& llm);

// One checkpoint linear of a canonical one: its "X.weight" name (dense or packed) and [out, in] shape.
struct LinearPart {
  std::string name;
  Shape shape;
};
// A row reordering applied after stacking (InternLM2's wqkv regrouping), or empty.
using RowRegroup = std::function<Tensor(const Tensor&)>;
// Puts canonical linear `dst` ("llm.3.qkv"): the parts stacked by rows, then regrouped, when it is loaded (so
// `regroup` must own what it uses). With
// desc->w4.kept_packed and every part packed it is dst.w4.{codes,params,perm} (model_desc.h), else dst.weight
// (packed parts dequantized; a packed linear that could not stay packed is listed in desc->w4.dequantized).
void put_linear(const SafetensorsSet& set, const std::vector<LinearPart>& parts, const RowRegroup& regroup,
                ModelDesc* desc, ModelWeights* out, const std::string& dst);

void map_vision_weights(const SafetensorsSet& set, const ModelDesc& desc, ModelWeights* out);
void map_projector_weights(const SafetensorsSet& set, const ModelDesc& desc, ModelWeights* out);
// Updates desc->w4 (the LLM's packed linears kept 4-bit or not).
void map_llm_weights(const SafetensorsSet& set, ModelDesc* desc, ModelWeights* out);

}  // namespace fovea

// A checkpoint of random weights for a config, written under the checkpoint format's own tensor names: the original
// `internvl_chat` layout (vision_model.*, mlp1.*, language_model.* with InternLM2's or the HF LLM's names) or
// transformers' `internvl` one (vision_tower.*, multi_modal_projector.*, language_model.*, lm_head). The names and
// shapes are spelled out here from the two formats' model code, independently of the loader's mapping
// (model/weight_map*.cc), so a stand-in config that loads also checks that mapping.
#pragma once
#include <string>

#include "model/model_desc.h"

namespace fovea::test {

// Writes <dir>/model.safetensors (float32, values ~ N(0, 0.02), norm weights ~ 1, layer scales 0.1) for `desc` (its
// format, vision tower, LLM arch and sizes; always an untied lm_head).
void write_random_checkpoint(const ModelDesc& desc, const std::string& dir, uint64_t seed = 1);

}  // namespace fovea::test

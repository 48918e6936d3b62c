// The weights a config implies, without a checkpoint: every canonical tensor the forward asks for exists, with the
// shape it asks for; the config says which optional ones exist (qkv biases), whether the LM head is tied to the
// embedding, and (ConfigWeights::w4) whether the LLM's four projections are 4-bit. make_config_source writes nothing
// (the memory planner's view of a model); make_dummy_source writes deterministic random values on the device
// (--load-format dummy).
#pragma once
#include <cstdint>
#include <memory>

#include "runtime/weight_source.h"

namespace fovea {

struct ConfigWeights {
  // The LLM's qkv, o, gate_up and down projections held 4-bit (W4A16), as from a kept-packed AWQ / GPTQ checkpoint; a
  // projection whose input width the group (or 32) does not divide stays dense.
  bool w4 = false;
  int64_t w4_group = 128;  // input columns per scale group; <= 0: one group over the whole input
  uint64_t seed = 0;       // random values: the same seed gives the same bits on every backend
};

std::unique_ptr<WeightSource> make_config_source(const ModelDesc& desc, const ConfigWeights& options);
// The same with deterministic random values written on the device (Backend::fill_random): nothing is read and
// nothing passes through host memory. Their scales: dummy_weights.cc.
std::unique_ptr<WeightSource> make_dummy_source(const ModelDesc& desc, const ConfigWeights& options);

}  // namespace fovea

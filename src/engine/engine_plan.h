// How an engine sizes its runner for a model and checks that it fits the device, before any weight is loaded.
// Engine(config) and `fovea inspect --plan` share it, so the plan a user prints is the one the engine runs.
#pragma once
#include <memory>
#include <string>

#include "fovea/options.h"
#include "runtime/dummy_weights.h"
#include "runtime/memory_plan.h"

namespace fovea {

// What config.quantization asks of the weights: FP8 recipes set opts' fp8 fields; "w4a16" asks for the LLM's
// projections 4-bit (a 4-bit checkpoint kept packed, or 4-bit dummy weights). Throws on an unknown name.
struct QuantizationChoice {
  bool fp8_llm = false, fp8_vit = false;
  Fp8Scaling fp8_scaling = Fp8Scaling::Channel;
  bool w4 = false;
};
QuantizationChoice parse_quantization(const std::string& name);

// Whether a 4-bit checkpoint's (or 4-bit dummy) LLM linears stay packed: config.w4 and config.quantization.
bool keep_w4_packed(const EngineConfig& config, bool gpu);

// The weights --load-format dummy makes for `desc` under `config` (4-bit when the config declares AWQ / GPTQ and they
// stay packed, or with --quantization w4a16).
ConfigWeights dummy_weights_for(const EngineConfig& config, const ModelDesc& desc, bool gpu);

// The runner's options of an engine for `desc` on a GPU (or the CPU reference): step shape, pools, quantization;
// kv_blocks is config.kv_blocks (0: plan_engine sizes it).
RunnerOptions engine_runner_options(const EngineConfig& config, const ModelDesc& desc, bool gpu);

struct EnginePlan {
  RunnerOptions opts;  // what the runner is built with, kv_blocks decided
  MemoryPlan memory;
  size_t available = 0;  // device bytes the plan had to fit in; 0: unknown, not checked
  bool fits = true;
  std::string refusal;  // when it does not fit: what it needs, what is free, and what would fit
};

// Sizes the KV pool (config.kv_blocks, else the default budget: 40 GB of positions on a GPU, 512 MB on the CPU, cut to
// what `available` leaves, never below two steps of max_step_tokens) and checks the plan against `available` (0:
// unchecked). `source` says which weights exist (a checkpoint's, or the config's).
EnginePlan plan_engine(const EngineConfig& config, const ModelDesc& desc, const WeightSource& source,
                       const SizingTarget& target, size_t available);

class ModelRunner;

// The runner Engine(config) drives, made as it makes it: the backend config names, the weights (a checkpoint's or
// --load-format dummy's), the plan checked before anything is uploaded (a model that cannot fit throws the
// plan's refusal), then the runner, with the memory lines on stderr. `fovea bench --vit-alone` times the same.
struct BuiltRunner {
  std::unique_ptr<ModelRunner> runner;
  EnginePlan plan;
  int device = 0;
  bool gpu = false;
  BuiltRunner();
  BuiltRunner(BuiltRunner&&) noexcept;
  ~BuiltRunner();
};
BuiltRunner build_runner(const EngineConfig& config);

// One line per part: "weights 15.23 GiB, KV pool 40.00 GiB (...)".
std::string describe_plan(const MemoryPlan& plan, int block_size);

}  // namespace fovea

// fovea inspect --model DIR --plan [--quantization Q] [--gpu-memory SIZE] [--kv-blocks N]: the device memory an engine
// would plan for the model on one GPU (weights, KV pool, image pool, workspace, runtime reserve) in bf16, FP8 and
// 4-bit, and whether each fits; from config.json alone (runtime/memory_plan.h).
#pragma once
#include <cstddef>
#include <string>

#include "fovea/options.h"

namespace fovea {

// "141GB", "141GiB" or "141G" (all 2^30: GPU memory is quoted so), "512MiB", "80e9" (bytes). Throws otherwise.
size_t parse_byte_size(const std::string& text);

// The default --gpu-memory: an H200 (143,771 MiB) less about 1 GiB for its CUDA context, as the engine would find free.
inline constexpr size_t kDefaultPlanMemory = size_t(142747) << 20;

// Prints the plans; `config` carries the engine options that size them (quantization, kv_blocks, ...).
void print_memory_plan(const std::string& model_dir, const EngineConfig& config, size_t available);

}  // namespace fovea

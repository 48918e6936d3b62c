// Device memory of a runner, planned from the config and the options before anything is allocated or loaded.
// plan_memory builds the runner itself on a SizingBackend (runtime/sizing_backend.h) with a weight source that writes
// nothing, so weights, KV pool, image pool and workspace are what the real runner allocates, byte for byte, for any
// model kind the runner supports; the rounding is what cudaMalloc adds to those bytes (backend/cuda_allocation.h), and
// the reserve covers what a backend allocates outside Backend::alloc (on CUDA: the cuBLASLt and split-KV attention
// workspaces, the FP8 activation buffer, graphs).
#pragma once
#include <cstddef>
#include <string>

#include "runtime/internvl_runner.h"
#include "runtime/sizing_backend.h"
#include "runtime/weight_source.h"

namespace fovea {

struct MemoryPlan {
  size_t weights = 0;      // every weight as the runner holds it (bf16, E4M3 codes + scales, 4-bit packed)
  size_t kv_cache = 0;     // kv_blocks blocks (plus decode graphs' scratch block)
  size_t vision_pool = 0;  // image embeddings
  size_t workspace = 0;    // activations of the ViT and the LLM, index buffers, linear_w4's workspace
  size_t reserve = 0;      // the backend's own buffers outside alloc (runtime_reserve_bytes)
  size_t rounding = 0;     // what the device's allocator adds by rounding each tensor (cuda_allocation.h); 0 on the CPU
  int kv_blocks = 0;
  size_t kv_block_bytes = 0;  // one block over all layers, K and V
  size_t total() const { return weights + kv_cache + vision_pool + workspace + reserve + rounding; }
  size_t without_kv() const { return total() - kv_cache; }
};

// Plans a runner of `desc` with `opts` (opts.kv_blocks > 0) whose weights `source` describes (only what exists is asked
// of it; nothing is read or written).
MemoryPlan plan_memory(const ModelDesc& desc, const WeightSource& source, const RunnerOptions& opts,
                       const SizingTarget& target);

// What a backend of `device` allocates outside Backend::alloc for these options: on CUDA the split-KV attention
// partials (64 MiB) and cuBLASLt workspace (32 MiB), the FP8 activation buffer (the largest quantized linear input:
// rows x K codes plus scales), and 512 MiB for cuBLAS handles, CUDA graphs and allocator rounding; 0 on the CPU.
size_t runtime_reserve_bytes(const ModelDesc& desc, const RunnerOptions& opts, Device device);

// The CUDA backend as a plan target, for planning without a GPU (fovea inspect
// --plan): bf16 activations and weights, linear_w4's workspace estimated as its dequantize-and-GEMM path needs it (a
// bf16 copy of the largest 4-bit linear; the fused kernel's split partials are smaller at the shapes of this family).
SizingTarget cuda_sizing_target();
// The target of a live backend (its dtypes and its own linear_w4 workspace sizes).
SizingTarget sizing_target_of(const Backend& backend);

// "12.34 GiB".
std::string format_gib(size_t bytes);

}  // namespace fovea

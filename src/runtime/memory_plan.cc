#include "runtime/memory_plan.h"

#include <algorithm>
#include <cstdio>

#include "backend/cuda_allocation.h"

namespace fovea {
namespace {

constexpr size_t kMiB = size_t(1) << 20;
// The CUDA backend's own fixed buffers (cuda_backend.cc: 64 MiB of split-KV partials; gemm_lt.cc: 32 MiB of cuBLASLt
// workspace) and room for cuBLAS handles and recorded graphs (cudaMalloc's rounding of each tensor is planned apart,
// MemoryPlan::rounding).
constexpr size_t kCudaFixedBytes = 64 * kMiB + 32 * kMiB;
constexpr size_t kCudaSlackBytes = 512 * kMiB;

// Bytes of linear_fp8_scaled's activation buffer for an input of `rows` x `k` and `n` outputs (cuda_ops.cc).
size_t fp8_activation_bytes(int64_t rows, int64_t k, int64_t n, Fp8Scaling scaling) {
  const auto round256 = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const bool block = fp8_activation_blocks(scaling);
  const int64_t m = block ? (rows + 3) / 4 * 4 : rows;
  const int64_t groups = block ? (k + kFp8Block - 1) / kFp8Block : 1;
  const size_t codes = round256(size_t(m) * size_t(k));
  const size_t scales = scaling == Fp8Scaling::Tensor ? 0 : round256(size_t(m) * size_t(groups) * 4);
  const size_t padded_out = block ? size_t(m) * size_t(n) * 2 : 0;  // M not a multiple of 4: a scratch output
  return codes + scales + padded_out;
}

}  // namespace

size_t runtime_reserve_bytes(const ModelDesc& desc, const RunnerOptions& opts, Device device) {
  if (device != Device::CUDA) return 0;
  size_t fp8 = 0;
  const LlmConfig& l = desc.llm;
  if (opts.fp8_llm) {
    const int64_t t = opts.max_step_tokens, mlp = std::min<int64_t>(opts.mlp_rows, t);
    const int64_t q = int64_t(l.heads) * l.head_dim, qkv = int64_t(l.heads + 2 * l.kv_heads) * l.head_dim;
    fp8 = std::max({fp8_activation_bytes(t, l.hidden, qkv, opts.fp8_scaling),
                    fp8_activation_bytes(t, q, l.hidden, opts.fp8_scaling),
                    fp8_activation_bytes(mlp, l.hidden, 2 * int64_t(l.ffn), opts.fp8_scaling),
                    fp8_activation_bytes(mlp, l.ffn, l.hidden, opts.fp8_scaling)});
  }
  if (opts.fp8_vit) {
    const VisionConfig& v = desc.vision;
    const int64_t rows = int64_t(opts.max_step_tiles) * v.tokens();
    fp8 = std::max({fp8, fp8_activation_bytes(rows, v.hidden, 3 * int64_t(v.hidden), opts.fp8_scaling),
                    fp8_activation_bytes(rows, v.hidden, v.mlp, opts.fp8_scaling)});  // qkv, fc1
  }
  // The buffer grows to the largest input seen and keeps the smaller ones it replaced (a recorded graph may still read
  // them): at most about twice the largest.
  return kCudaFixedBytes + kCudaSlackBytes + 2 * fp8;
}

MemoryPlan plan_memory(const ModelDesc& desc, const WeightSource& source, const RunnerOptions& opts,
                       const SizingTarget& target) {
  FOVEA_CHECK(opts.kv_blocks > 0, "plan_memory: kv_blocks must be set (", opts.kv_blocks, ")");
  auto sizing = std::make_unique<SizingBackend>(target);
  const SizingBackend& counted = *sizing;  // owned by the runner below, which outlives every use
  const InternVLRunner runner(desc, make_shape_source(source), std::move(sizing), opts);
  const RunnerMemory& m = runner.memory();
  MemoryPlan plan;
  plan.rounding = counted.allocator_rounding();
  plan.weights = m.weights;
  plan.kv_cache = m.kv_cache;
  plan.vision_pool = m.vision_pool;
  plan.workspace = m.workspace;
  plan.reserve = runtime_reserve_bytes(desc, opts, target.device);
  plan.kv_blocks = opts.kv_blocks;
  plan.kv_block_bytes = kv_block_bytes(desc, target.compute_dtype, opts.block_size);
  return plan;
}

SizingTarget cuda_sizing_target() {
  SizingTarget t;
  t.device = Device::CUDA;
  t.compute_dtype = DType::BF16;
  t.weight_dtype = DType::BF16;
  t.w4_workspace = [](int64_t n, int64_t k, int64_t, bool) { return size_t(n) * size_t(k) * 2; };
  t.allocation_bytes = cuda_allocation_bytes;
  return t;
}

SizingTarget sizing_target_of(const Backend& backend) {
  SizingTarget t;
  t.device = backend.device();
  t.compute_dtype = backend.compute_dtype();
  t.weight_dtype = backend.weight_dtype();
  t.w4_workspace = [&backend](int64_t n, int64_t k, int64_t group, bool permuted) {
    return backend.linear_w4_workspace_bytes(n, k, group, permuted);
  };
  if (t.device == Device::CUDA) t.allocation_bytes = cuda_allocation_bytes;
  return t;
}

std::string format_gib(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / double(size_t(1) << 30));
  return text;
}

}  // namespace fovea

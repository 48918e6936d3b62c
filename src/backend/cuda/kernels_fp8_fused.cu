// The producers of an FP8 linear's input that quantize as they write (Backend::scale_add_norm_fp8, silu_mul_fp8):
// one block per row computes the row's values exactly as the bf16 kernel would (the norms' first pass of
// norm_rows.cuh, kernels_elementwise.cu's silu_times: same loop, same thread count, same sums), rounds each to
// bf16 as that kernel's store would, takes the row's max|v|, then writes the E4M3 codes and the row scale with the
// separate quantizer's arithmetic (fp8_codes.cuh). The codes therefore equal the unfused pair's byte for byte,
// and the activation is never written to global memory in bf16 nor read back by a quantization pass. The norm
// recomputes its row for the codes (8 KB rows: an L1/L2 hit); SiLU·mul keeps its row in shared memory.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/fp8_codes.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/norm_rows.cuh"

namespace fovea::cuda {
namespace {

constexpr int kSiluThreads = 256;

// With residual != null: residual += scale ⊙ x (scale null: 1; rounded to bf16, as stored), then the new residual
// is normalised; otherwise x is. LayerNorm (kLayer, beta) or RMSNorm. codes [rows, cols], scales [rows].
template <int W, bool kLayer>
__global__ void norm_fp8_kernel(bf16* residual, const bf16* x, const bf16* scale, const bf16* gamma,
                                const bf16* beta, float eps, uint8_t* codes, float* scales, int cols) {
  __shared__ float scratch[32];
  wait_for_upstream();
  release_downstream();
  const int64_t base = int64_t(blockIdx.x) * cols;
  const bf16* row = residual ? residual + base : x + base;
  float v[W], g[W], b[W];
  float2 stats;
  if constexpr (kLayer) stats = row_mean_rstd<W>(residual, x, scale, base, cols, eps, scratch);
  else stats.x = row_inverse_rms<W>(residual, x, scale, base, cols, eps, scratch);
  // The bf16 value the unfused norm would store, recomputed for each of the two passes below.
  const auto normed = [&](int c) {
    load_bf16<W>(row + c, v);
    load_bf16<W>(gamma + c, g);
    if constexpr (kLayer) load_bf16<W>(beta + c, b);
#pragma unroll
    for (int i = 0; i < W; ++i)
      v[i] = through_bf16(kLayer ? layer_norm_value(v[i], stats, g[i], b[i]) : rms_norm_value(v[i], stats.x, g[i]));
  };
  float absmax = 0.f;
  for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
    normed(c);
#pragma unroll
    for (int i = 0; i < W; ++i) absmax = fmaxf(absmax, fabsf(v[i]));
  }
  const float row_scale = fp8_scale_of(block_max(absmax, scratch));
  if (threadIdx.x == 0) scales[blockIdx.x] = row_scale;
  for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
    normed(c);
    store_fp8_codes<W>(codes + base + c, v, row_scale);
  }
}

// gate_up [rows, 2F] -> codes [rows, F], scales [rows] of bf16(silu(gate) * up). The row's bf16 values wait in
// shared memory (F * 2 bytes, dynamic) between the max and the codes: a row is 2F * 2 bytes of input, and with
// ~1,000 rows in flight (24 KB each at F = 12,288) recomputing them from gate_up missed L2 and read HBM twice (332
// us for 8,192 rows of Qwen3-8B on an H100 against 196 us for the bf16 silu_mul).
template <int W>
__global__ void silu_mul_fp8_kernel(const bf16* gate_up, uint8_t* codes, float* scales, int half_cols) {
  extern __shared__ __align__(16) unsigned char silu_stash[];
  bf16* values = reinterpret_cast<bf16*>(silu_stash);
  __shared__ float scratch[32];
  wait_for_upstream();
  release_downstream();
  const bf16* in = gate_up + int64_t(blockIdx.x) * 2 * half_cols;
  float g[W], u[W];
  float absmax = 0.f;
  for (int c = threadIdx.x * W; c < half_cols; c += blockDim.x * W) {
    load_bf16<W>(in + c, g);
    load_bf16<W>(in + half_cols + c, u);
#pragma unroll
    for (int i = 0; i < W; ++i) {
      g[i] = through_bf16(silu_times(g[i], u[i]));
      absmax = fmaxf(absmax, fabsf(g[i]));
    }
    store_bf16<W>(values + c, g);
  }
  // Each thread reads back only the chunks it stored, so the barrier inside block_max is all the ordering needed.
  const float scale = fp8_scale_of(block_max(absmax, scratch));
  if (threadIdx.x == 0) scales[blockIdx.x] = scale;
  uint8_t* out = codes + int64_t(blockIdx.x) * half_cols;
  for (int c = threadIdx.x * W; c < half_cols; c += blockDim.x * W) {
    load_bf16<W>(values + c, g);
    store_fp8_codes<W>(out + c, g, scale);
  }
}

// The widest SwiGLU row the stash holds: F = 49,152 (96 KB; Qwen2.5-72B's 29,568 is the family's widest).
constexpr int kSiluStashBytes = 96 << 10;

bool aligned8(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7u) == 0; }

}  // namespace

void launch_norm_fp8(bf16* residual, const bf16* x, const bf16* scale, bool layer, const bf16* gamma,
                     const bf16* beta, float eps, uint8_t* codes, float* scales, int rows, int cols,
                     cudaStream_t stream) {
  if (rows == 0) return;
  const int threads = norm_threads(cols);
  const bool vector = cols % 8 == 0 && (!residual || aligned16(residual)) && aligned16(x) &&
                      (!scale || aligned16(scale)) && aligned16(gamma) && (!beta || aligned16(beta)) &&
                      aligned8(codes);
  const auto go = [&](auto kernel) {
    launch_dependent(kernel, rows, threads, 0, stream, residual, x, scale, gamma, beta, eps, codes, scales, cols);
  };
  if (layer) vector ? go(norm_fp8_kernel<8, true>) : go(norm_fp8_kernel<1, true>);
  else vector ? go(norm_fp8_kernel<8, false>) : go(norm_fp8_kernel<1, false>);
}

void launch_silu_mul_fp8(const bf16* gate_up, uint8_t* codes, float* scales, int rows, int half_cols,
                         cudaStream_t stream) {
  if (rows == 0 || half_cols == 0) return;
  const int stash = half_cols * int(sizeof(bf16));
  FOVEA_CHECK(stash <= kSiluStashBytes, "silu_mul_fp8: rows of ", half_cols, " values exceed the ",
              kSiluStashBytes / int(sizeof(bf16)), " its shared-memory stash holds");
  if (half_cols % 8 == 0 && aligned16(gate_up) && aligned8(codes))
    launch_dependent(silu_mul_fp8_kernel<8>, rows, kSiluThreads, stash, stream, gate_up, codes, scales, half_cols);
  else
    launch_dependent(silu_mul_fp8_kernel<1>, rows, kSiluThreads, stash, stream, gate_up, codes, scales, half_cols);
}

void prepare_fp8_kernels() {
  allow_shared_memory(silu_mul_fp8_kernel<8>, kSiluStashBytes, false);
  allow_shared_memory(silu_mul_fp8_kernel<1>, kSiluStashBytes, false);
}

}  // namespace fovea::cuda

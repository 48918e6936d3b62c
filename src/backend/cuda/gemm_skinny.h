// The "skinny" GEMM of decode steps: y[M, N] = x[M, K] · W[N, K]^T with M <= 64, bf16 in and out, f32
// accumulation, no bias or activation. At such M the op is bound by reading W once from memory; cuBLASLt leaves
// much of the bandwidth unused when N gives fewer 128-wide output tiles than there are multiprocessors (the
// decoder's wqkv and wo). This kernel (sm_90a: wgmma, one m64n128 tile per block) streams W through shared
// memory with the tensor memory accelerator and splits K over a thread block cluster so that every shape fills the
// GPU; the splits' partial sums are added through distributed shared memory in a fixed order (deterministic, no
// workspace, one kernel, graph-capturable). See gemm_skinny.cu.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "backend/cuda/kernels.h"

namespace fovea::cuda {

constexpr int kSkinnyMaxRows = 64;    // M
constexpr int kSkinnyTileN = 128;     // W rows per block: N must be a multiple
constexpr int kSkinnyTileK = 64;      // K per pipeline stage: K must be a multiple
constexpr int kSkinnyMaxSplits = 8;   // K splits = blocks per cluster (the portable cluster size)

// Whether the kernel handles this shape (the caller also checks skinny_gemm_aligned).
inline bool skinny_gemm_supported(int64_t m, int64_t n, int64_t k) {
  return m >= 1 && m <= kSkinnyMaxRows && n >= kSkinnyTileN && n % kSkinnyTileN == 0 && k >= kSkinnyTileK &&
         k % kSkinnyTileK == 0 && n <= int64_t(kSkinnyTileN) * 65535 && k <= (int64_t(1) << 30);
}

// The tensor maps want 16-byte aligned bases: row views (Tensor::rows) may start less aligned than cudaMalloc's.
inline bool skinny_gemm_aligned(const void* x, const void* w, const void* y) {
  return ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(y)) & 15u) == 0;
}

// What the launcher needs to know about the device, found once by prepare_skinny_gemm outside graph captures.
struct SkinnyGemmDevice {
  // Clusters of each size (index = splits) that the device holds at once; all 0 where clusters are missing
  // (before sm_90) or the binary was not built for sm_90a (no wgmma), and then the kernel must not be used.
  int max_clusters[kSkinnyMaxSplits + 1] = {};
  bool usable() const { return max_clusters[1] > 0; }
};

// A weight shape [n, k] the skinny kernel is chosen for, and the list FOVEA_CUDA_SKINNY_GEMM names: unset, empty
// or "0" off (std::nullopt), "1" every supported shape (an empty list), "NxK,NxK,..." only those. Throws
// fovea::Error on anything else.
struct SkinnyWeightShape {
  int64_t n = 0, k = 0;
};
std::optional<std::vector<SkinnyWeightShape>> skinny_shapes_from_env();
bool skinny_shape_listed(const std::vector<SkinnyWeightShape>& shapes, int64_t n, int64_t k);

// Sets the kernels' shared-memory attributes and measures the cluster occupancy of `device_index` (call at
// start-up: a graph capture must not contain it).
SkinnyGemmDevice prepare_skinny_gemm(int device_index);

// The K splits the launcher uses for an N x K weight: the most (up to kSkinnyMaxSplits, at least one K stage
// each) for which all N / kSkinnyTileN clusters are resident at once, so that every multiprocessor streams W.
int skinny_gemm_splits(const SkinnyGemmDevice& device, int n, int k);

// y = x · W^T on `stream`; splits = 0 takes skinny_gemm_splits (the perf test passes others to compare).
void launch_skinny_gemm(const SkinnyGemmDevice& device, const bf16* x, const bf16* w, bf16* y, int m, int n, int k,
                        cudaStream_t stream, int splits = 0);

}  // namespace fovea::cuda

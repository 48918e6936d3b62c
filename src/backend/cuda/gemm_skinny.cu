// The skinny (decode-step) GEMM, y = x · W^T for M <= 64; see gemm_skinny.h for why.
//
// Layout. The product is computed transposed, y^T[N, M] = W[N, K] · x[M, K]^T, so that W is the mma.sync A
// operand (16 weight rows per instruction) and x the B operand (8 token rows): M pads to a multiple of 8, not 16,
// and W rows, K-contiguous in memory and in shared memory, load with plain ldmatrix, as do the x rows.
//
// A block (4 warps) owns kSkinnyTileN = 128 weight rows, 32 per warp, and one K range. Its W tile (128 x 64) and
// the matching x columns (the M rows, padded with zeros) stream through a kStages-deep cp.async ring; x is small
// and stays in L2, W is read once. The grid is (splits, N / 128) with clusters of `splits` blocks along x: the
// blocks of a cluster share an output tile and split K between them. Each leaves its f32 partial tile in its own
// shared memory; after a cluster barrier, each block sums its share of the tile's outputs over all partials in
// rank order (distributed shared memory) and writes bf16. Fixed order: the result does not depend on timing.
#include <cooperative_groups.h>

#include <algorithm>
#include <utility>

#include "backend/cuda/attention_mma.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_skinny.h"
#include "backend/cuda/kernel_utils.cuh"

namespace fovea::cuda {
namespace {

namespace cg = cooperative_groups;
using mma_detail::cp_async16;
using mma_detail::cp_async_commit;
using mma_detail::cp_async_wait;
using mma_detail::ldmatrix_x4;
using mma_detail::mma_bf16;
using mma_detail::pack_bf16;

constexpr int kThreads = 128;
constexpr int kWarpRows = kSkinnyTileN / (kThreads / 32);  // 32 weight rows per warp: two 16-row A tiles
constexpr int kStages = 4;  // 3 stages of W (48 KB) in flight per block, 2 blocks per multiprocessor
constexpr int kStride = kSkinnyTileK + 8;     // bf16 per shared row: +16 bytes keeps ldmatrix conflict-free
constexpr int kPartStride = kSkinnyTileN + 4;  // floats per partial row: +4 keeps the fragment stores conflict-free
constexpr int kChunksPerRow = kSkinnyTileK / 8;  // 16-byte copies per row of a stage
static_assert(kWarpRows == 32 && kSkinnyTileK % 16 == 0 && kSkinnyTileN * kChunksPerRow % kThreads == 0);

// Sizes for kMTiles 8-row tiles of x (M <= 8 * kMTiles).
template <int kMTiles>
struct SkinnyConfig {
  static constexpr int kXRows = (kMTiles * 8 + 15) / 16 * 16;  // one ldmatrix_x4 covers 16 x rows
  static constexpr int kStageElems = (kSkinnyTileN + kXRows) * kStride;
  static constexpr int kRingBytes = kStages * kStageElems * 2;
  static constexpr int kPartBytes = kMTiles * 8 * kPartStride * 4;
  static_assert(kPartBytes <= kRingBytes, "the partial tile reuses the ring");
  static constexpr int kSmemBytes = kRingBytes;
};

// cp_async16 of a W chunk with the hint to fetch the whole aligned 256 bytes into L2: a stage takes 128 bytes of
// each of 128 rows 8 KB or more apart, and the next stage of the same block wants the other half, so DRAM is read
// in 256-byte pieces instead of 128.
__device__ __forceinline__ void cp_async16_l2_256(void* dst, const void* src) {
  const uint32_t addr = uint32_t(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(addr), "l"(src));
}

// Issues the cp.async copies of K stage `kb` (W rows n0.., then the x rows, zeros past row m) into ring slot `dst`.
template <int kMTiles>
__device__ __forceinline__ void load_stage(__nv_bfloat16* dst, const __nv_bfloat16* __restrict__ x,
                                           const __nv_bfloat16* __restrict__ w, int m, int64_t k, int64_t n0,
                                           int kb) {
  using C = SkinnyConfig<kMTiles>;
  const int64_t k0 = int64_t(kb) * kSkinnyTileK;
#pragma unroll
  for (int i = 0; i < kSkinnyTileN * kChunksPerRow / kThreads; ++i) {
    const int chunk = int(threadIdx.x) + i * kThreads, row = chunk / kChunksPerRow, col = chunk % kChunksPerRow * 8;
    cp_async16_l2_256(dst + row * kStride + col, w + (n0 + row) * k + k0 + col);
  }
  __nv_bfloat16* x_dst = dst + kSkinnyTileN * kStride;
#pragma unroll
  for (int i = 0; i < C::kXRows * kChunksPerRow / kThreads; ++i) {
    const int chunk = int(threadIdx.x) + i * kThreads, row = chunk / kChunksPerRow, col = chunk % kChunksPerRow * 8;
    const bool valid = row < m;
    cp_async16(x_dst + row * kStride + col, valid ? x + row * k + k0 + col : x, valid);
  }
}

// acc[t][j] += W rows (warp's tile t) x x rows (8-row tile j) over one ring slot's 64 K columns.
template <int kMTiles>
__device__ __forceinline__ void multiply_stage(float (&acc)[2][kMTiles][4], const __nv_bfloat16* slot, int warp,
                                               int lane) {
  const __nv_bfloat16* w_tile = slot + warp * kWarpRows * kStride;
  const __nv_bfloat16* x_tile = slot + kSkinnyTileN * kStride;
#pragma unroll
  for (int ks = 0; ks < kSkinnyTileK / 16; ++ks) {
    uint32_t a[2][4];
#pragma unroll
    for (int t = 0; t < 2; ++t)
      ldmatrix_x4(a[t], w_tile + (t * 16 + (lane & 15)) * kStride + ks * 16 + (lane >> 4) * 8);
#pragma unroll
    for (int pair = 0; pair < (kMTiles + 1) / 2; ++pair) {
      // b[0], b[1]: x tile 2 * pair; b[2], b[3]: x tile 2 * pair + 1 (zeros or unused past kMTiles).
      uint32_t b[4];
      ldmatrix_x4(b, x_tile + (pair * 16 + (lane & 7) + ((lane >> 4) << 3)) * kStride + ks * 16 +
                         ((lane >> 3) & 1) * 8);
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        mma_bf16(acc[t][2 * pair], a[t], b[0], b[1]);
        if (2 * pair + 1 < kMTiles) mma_bf16(acc[t][2 * pair + 1], a[t], b[2], b[3]);
      }
    }
  }
}

template <int kMTiles>
__global__ void __launch_bounds__(kThreads, 2)
    skinny_gemm_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                       __nv_bfloat16* __restrict__ y, int m, int n, int k) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using C = SkinnyConfig<kMTiles>;
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* ring = reinterpret_cast<__nv_bfloat16*>(smem);
  cg::cluster_group cluster = cg::this_cluster();
  const int split = int(cluster.block_rank()), splits = int(cluster.num_blocks());
  const int64_t n0 = int64_t(blockIdx.y) * kSkinnyTileN;
  const int stages = k / kSkinnyTileK;
  const int kb_begin = split * stages / splits, count = (split + 1) * stages / splits - kb_begin;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;

  float acc[2][kMTiles][4] = {};
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < count) load_stage<kMTiles>(ring + s * C::kStageElems, x, w, m, k, n0, kb_begin + s);
    cp_async_commit();  // empty groups keep the wait counts uniform
  }
  for (int i = 0; i < count; ++i) {
    cp_async_wait<kStages - 2>();  // stage i has landed (for this thread) ...
    __syncthreads();               // ... for all threads, and slot (i - 1) % kStages is free again
    const int next = i + kStages - 1;
    if (next < count) load_stage<kMTiles>(ring + next % kStages * C::kStageElems, x, w, m, k, n0, kb_begin + next);
    cp_async_commit();
    multiply_stage<kMTiles>(acc, ring + i % kStages * C::kStageElems, warp, lane);
  }
  cp_async_wait<0>();
  __syncthreads();  // the ring becomes the partial tile

  // Partial tile part[row of x][weight row in the tile] (rows past m hold zeros and are not read).
  float* part = reinterpret_cast<float*>(smem);
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int j = 0; j < kMTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        part[(j * 8 + 2 * q + (e & 1)) * kPartStride + warp * kWarpRows + t * 16 + g + (e >> 1) * 8] = acc[t][j][e];
  cluster.sync();  // every block's partial tile is complete and visible to the cluster

  // The cluster's blocks take turns over the tile's quads (4 adjacent outputs), kThreads quads at a time; each
  // quad is the sum of all partials in rank order, so the result is the same whichever block finishes first.
  constexpr int kQuadsPerRow = kSkinnyTileN / 4;
  for (int u = split * kThreads + int(threadIdx.x); u < m * kQuadsPerRow; u += splits * kThreads) {
    const int row = u / kQuadsPerRow, col = u % kQuadsPerRow * 4;
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int r = 0; r < splits; ++r) {
      const float4 v = *reinterpret_cast<const float4*>(cluster.map_shared_rank(part, r) + row * kPartStride + col);
      sum.x += v.x;
      sum.y += v.y;
      sum.z += v.z;
      sum.w += v.w;
    }
    *reinterpret_cast<uint2*>(y + int64_t(row) * n + n0 + col) =
        make_uint2(pack_bf16(sum.x, sum.y), pack_bf16(sum.z, sum.w));
  }
  cluster.sync();  // no block leaves while another still reads its shared memory
#endif
}

template <int kMTiles>
cudaLaunchConfig_t launch_config(int splits, int tiles, cudaStream_t stream, cudaLaunchAttribute* cluster) {
  cluster->id = cudaLaunchAttributeClusterDimension;
  cluster->val.clusterDim.x = unsigned(splits);
  cluster->val.clusterDim.y = 1;
  cluster->val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(splits), unsigned(tiles));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = SkinnyConfig<kMTiles>::kSmemBytes;
  config.stream = stream;
  config.attrs = cluster;
  config.numAttrs = 1;
  return config;
}

template <int kMTiles>
void launch_tiles(const bf16* x, const bf16* w, bf16* y, int m, int n, int k, int splits, cudaStream_t stream) {
  cudaLaunchAttribute cluster;
  const cudaLaunchConfig_t config = launch_config<kMTiles>(splits, n / kSkinnyTileN, stream, &cluster);
  FOVEA_CUDA_CHECK(cudaLaunchKernelEx(&config, skinny_gemm_kernel<kMTiles>, x, w, y, m, n, k));
}

template <int... kMTiles>
void allow_all_shared_memory(std::integer_sequence<int, kMTiles...>) {
  (allow_shared_memory(skinny_gemm_kernel<kMTiles + 1>, SkinnyConfig<kMTiles + 1>::kSmemBytes, true), ...);
}

}  // namespace

SkinnyGemmDevice prepare_skinny_gemm(int device_index) {
  SkinnyGemmDevice device;
  int major = 0;
  FOVEA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_index));
  if (major < 9) return device;  // no thread block clusters: the caller keeps cuBLASLt
  allow_all_shared_memory(std::make_integer_sequence<int, kSkinnyMaxRows / 8>{});
  // Occupancy of the largest configuration (M = 64); smaller M need less shared memory, never fewer blocks.
  for (int splits = 1; splits <= kSkinnyMaxSplits; ++splits) {
    cudaLaunchAttribute cluster;
    const cudaLaunchConfig_t config = launch_config<kSkinnyMaxRows / 8>(splits, 1, nullptr, &cluster);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, skinny_gemm_kernel<kSkinnyMaxRows / 8>, &config) != cudaSuccess) {
      cudaGetLastError();  // a size the device cannot co-schedule: leave it at 0
      clusters = 0;
    }
    device.max_clusters[splits] = clusters;
  }
  return device;
}

int skinny_gemm_splits(const SkinnyGemmDevice& device, int n, int k) {
  const int tiles = n / kSkinnyTileN, most = std::min(kSkinnyMaxSplits, k / kSkinnyTileK);
  int splits = 1;
  for (int s = 2; s <= most; ++s)
    if (tiles <= device.max_clusters[s]) splits = s;
  return splits;
}

void launch_skinny_gemm(const SkinnyGemmDevice& device, const bf16* x, const bf16* w, bf16* y, int m, int n, int k,
                        cudaStream_t stream, int splits) {
  FOVEA_CHECK(device.usable() && skinny_gemm_supported(m, n, k), "skinny GEMM: unsupported M=", m, " N=", n,
              " K=", k);
  splits = splits > 0 ? std::min({splits, kSkinnyMaxSplits, k / kSkinnyTileK}) : skinny_gemm_splits(device, n, k);
  switch ((m + 7) / 8) {
    case 1: return launch_tiles<1>(x, w, y, m, n, k, splits, stream);
    case 2: return launch_tiles<2>(x, w, y, m, n, k, splits, stream);
    case 3: return launch_tiles<3>(x, w, y, m, n, k, splits, stream);
    case 4: return launch_tiles<4>(x, w, y, m, n, k, splits, stream);
    case 5: return launch_tiles<5>(x, w, y, m, n, k, splits, stream);
    case 6: return launch_tiles<6>(x, w, y, m, n, k, splits, stream);
    case 7: return launch_tiles<7>(x, w, y, m, n, k, splits, stream);
    default: return launch_tiles<8>(x, w, y, m, n, k, splits, stream);
  }
}

}  // namespace fovea::cuda

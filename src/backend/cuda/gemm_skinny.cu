// The skinny (decode-step) GEMM, y = x · W^T for M <= 64, on Hopper warpgroup MMA; see gemm_skinny.h for why.
//
// M <= 64 is exactly one wgmma M: a block computes the 64 x 128 tile D = x · W_tile^T with
// wgmma.mma_async m64n128k16, A = x (64 rows x 64 K columns of a stage, K-major) and B = the block's 128 weight
// rows (K-major: W's rows are K-contiguous), both read from shared memory in the 128-byte-swizzled layout of
// attention_wgmma.cuh. Rows of x past M are zeros; the D rows they give are never stored.
//
// A block is one consumer warpgroup plus one producer warp. The producer's lane 0 streams K stages (the W tile,
// 128 x 64, and the x columns) with the tensor memory accelerator into a kStages-deep ring: a "full" mbarrier
// per slot counts the bytes in, an "empty" one counts the consumer warps done with it, so no block-wide barrier
// stands in the loop. The consumer keeps one stage's wgmma group in flight while the next is issued.
//
// K is split over a thread-block cluster: the grid is (splits, N / 128) with clusters of `splits` blocks along x,
// which share an output tile. Each block leaves its f32 partial tile in its own shared memory (the ring, no longer
// needed); after a cluster barrier, each block sums its share of the tile over all partials in rank order
// (distributed shared memory) and writes bf16. Fixed order: the result does not depend on timing.
//
// Launched as a dependent launch (dependent_launch.cuh): W does not depend on anything upstream, so the producer
// copies the first kStages stages' W boxes before wait_for_upstream() and only x's after it; the weights start
// streaming while the kernel ahead (a norm, silu_mul, the attention) is still finishing.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>

#include "backend/cuda/attention_wgmma_pipelined.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/gemm_skinny.h"
#include "backend/cuda/kernel_utils.cuh"

namespace fovea::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kConsumerThreads = 128;               // one warpgroup issues the wgmma
constexpr int kThreads = kConsumerThreads + 32;     // + the producer warp
constexpr int kStages = 4;                          // 3 stages of W (48 KB) in flight per block, 2 blocks per SM
constexpr int kWBytes = kSkinnyTileN * kSkinnyTileK * 2;     // 16 KB: 128 weight rows of 128 bytes
constexpr int kXBytes = kSkinnyMaxRows * kSkinnyTileK * 2;   // 8 KB: 64 x rows of 128 bytes
constexpr int kSlotBytes = kWBytes + kXBytes;
constexpr int kBarrierBytes = 16 * kStages;                  // "full" and "empty" per slot
constexpr int kPartStride = kSkinnyTileN + 8;  // floats per partial row: +8 keeps the float2 stores conflict-free
// The ring, the barriers, and 1024 bytes to round the base up to the swizzle-atom boundary.
constexpr int kSmemBytes = kStages * kSlotBytes + kBarrierBytes + 1024;
static_assert(kSkinnyTileK == 64, "a stage is one 128-byte swizzle row of K");
static_assert(kSkinnyTileN == 128, "one m64n128 wgmma per K step");
static_assert(kSkinnyMaxRows * kPartStride * 4 <= kStages * kSlotBytes, "the partial tile reuses the ring");

// w_map: W [n, k] in 64 x 128 boxes; x_map: x [m, k] in 64 x x_rows boxes (x_rows = M rounded up to 8: rows of
// the slot past it are zeroed once here and never written again).
__global__ void __launch_bounds__(kThreads, 2)
    skinny_gemm_kernel(const __grid_constant__ CUtensorMap w_map, const __grid_constant__ CUtensorMap x_map,
                       __nv_bfloat16* __restrict__ y, int m, int n, int k, int x_rows) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace wgmma_detail;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* ring = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
  const uint32_t ring_addr = smem_addr(ring);
  const uint32_t full_bars = ring_addr + kStages * kSlotBytes, empty_bars = full_bars + 8 * kStages;
  auto w_slot = [&](int s) { return ring_addr + uint32_t(s * kSlotBytes); };
  auto x_slot = [&](int s) { return ring_addr + uint32_t(s * kSlotBytes + kWBytes); };

  cg::cluster_group cluster = cg::this_cluster();
  const int split = int(cluster.block_rank()), splits = int(cluster.num_blocks());
  const int n0 = int(blockIdx.y) * kSkinnyTileN;
  const int stages = k / kSkinnyTileK;
  const int kb_begin = split * stages / splits, count = (split + 1) * stages / splits - kb_begin;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      barrier_init(full_bars + 8 * s, 1);
      barrier_init(empty_bars + 8 * s, kConsumerThreads / 32);  // every consumer warp arrives once per stage
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // x rows past x_rows: zeros in every slot (the copies never reach them), seen by wgmma's async proxy.
  const int zero_bytes = (kSkinnyMaxRows - x_rows) * 128;
  for (int s = 0; s < kStages; ++s)
    for (int b = int(threadIdx.x) * 16; b < zero_bytes; b += kThreads * 16)
      *reinterpret_cast<uint4*>(ring + s * kSlotBytes + kWBytes + x_rows * 128 + b) = make_uint4(0, 0, 0, 0);
  fence_proxy_async();
  __syncthreads();

  float acc[kSkinnyTileN / 8][4] = {};  // D rows 16 * warp + g (+ 8), columns 8 * i + 2 * t (+ 1)
  if (warp == kConsumerThreads / 32) {
    // Producer: lane 0 waits for a slot to be free, announces its bytes and copies W's and x's boxes into it.
    // The first kStages slots are free from the start: their W boxes go out before the upstream wait.
    if (lane == 0) {
      const uint32_t bytes = uint32_t(kWBytes + x_rows * 128);
      const int early = min(count, kStages);
      for (int i = 0; i < early; ++i) {
        barrier_expect(full_bars + 8 * i, bytes);
        tensor_copy(w_slot(i), w_map, (kb_begin + i) * kSkinnyTileK, n0, full_bars + 8 * i);
      }
      wait_for_upstream();
      for (int i = 0; i < early; ++i)
        tensor_copy(x_slot(i), x_map, (kb_begin + i) * kSkinnyTileK, 0, full_bars + 8 * i);
      for (int i = early; i < count; ++i) {
        const int s = i % kStages;
        barrier_wait(empty_bars + 8 * s, (uint32_t(i / kStages) & 1u) ^ 1u);
        const uint32_t full = full_bars + 8 * s;
        const int k0 = (kb_begin + i) * kSkinnyTileK;
        barrier_expect(full, bytes);
        tensor_copy(w_slot(s), w_map, k0, n0, full);
        tensor_copy(x_slot(s), x_map, k0, 0, full);
      }
    }
  } else {
    for (int i = 0; i < count; ++i) {
      const int s = i % kStages;
      barrier_wait(full_bars + 8 * s, uint32_t(i / kStages) & 1u);
      fence();
#pragma unroll
      for (int ks = 0; ks < kSkinnyTileK / 16; ++ks)  // 16 K columns = 32 bytes of each swizzled row
        wgmma_ss<kSkinnyTileN>(acc, descriptor(x_slot(s) + ks * 32, 16, 1024),
                               descriptor(w_slot(s) + ks * 32, 16, 1024), 1);
      commit();
      wait_pending<1>();  // stage i - 1's group is done: its slot goes back to the producer
      if (i > 0 && lane == 0) barrier_arrive(empty_bars + 8 * ((i - 1) % kStages));
    }
    wait_all();
    pin(acc);
  }
  __syncthreads();  // every wgmma has read its slots: the ring becomes the partial tile
  // Every thread past the upstream wait before y is written (the producer lane already is; the rest return at
  // once), and the next kernel may be scheduled: what is left is the cluster's reduction.
  wait_for_upstream();
  release_downstream();

  // Partial tile part[row of x][weight row in the tile]; rows past m are neither written nor read.
  float* part = reinterpret_cast<float*>(ring);
  if (warp < kConsumerThreads / 32) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warp * 16 + g + 8 * h;
      if (row >= m) continue;
#pragma unroll
      for (int i = 0; i < kSkinnyTileN / 8; ++i)
        *reinterpret_cast<float2*>(part + row * kPartStride + 8 * i + 2 * t) =
            make_float2(acc[i][2 * h], acc[i][2 * h + 1]);
    }
  }
  cluster.sync();  // every block's partial tile is complete and visible to the cluster

  // The cluster's blocks take turns over the tile's quads (4 adjacent outputs), kThreads quads at a time; each
  // quad is the sum of all partials in rank order, so the result is the same whichever block finishes first.
  constexpr int kQuadsPerRow = kSkinnyTileN / 4;
  for (int u = split * kThreads + int(threadIdx.x); u < m * kQuadsPerRow; u += splits * kThreads) {
    const int row = u / kQuadsPerRow, col = u % kQuadsPerRow * 4;
    // All remote reads first (their latencies overlap), then the sum in rank order.
    float4 v[kSkinnyMaxSplits];
#pragma unroll
    for (int r = 0; r < kSkinnyMaxSplits; ++r)
      if (r < splits)
        v[r] = *reinterpret_cast<const float4*>(cluster.map_shared_rank(part, r) + row * kPartStride + col);
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int r = 0; r < kSkinnyMaxSplits; ++r) {
      if (r >= splits) break;
      sum.x += v[r].x;
      sum.y += v[r].y;
      sum.z += v[r].z;
      sum.w += v[r].w;
    }
    *reinterpret_cast<uint2*>(y + int64_t(row) * n + n0 + col) =
        make_uint2(mma_detail::pack_bf16(sum.x, sum.y), mma_detail::pack_bf16(sum.z, sum.w));
  }
  cluster.sync();  // no block leaves while another still reads its shared memory
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

// attrs: room for two (the cluster shape, and the dependent launch's when `dependent`).
cudaLaunchConfig_t launch_config(int splits, int tiles, cudaStream_t stream, cudaLaunchAttribute* attrs,
                                 bool dependent) {
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = unsigned(splits);
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(splits), unsigned(tiles));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSmemBytes;
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = 1;
  if (dependent) allow_early_start(config, attrs);
  return config;
}

}  // namespace

SkinnyGemmDevice prepare_skinny_gemm(int device_index) {
  SkinnyGemmDevice device;
  int major = 0;
  FOVEA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_index));
  if (major < 9 || !built_for_sm90a()) return device;  // no clusters or no wgmma: the caller keeps cuBLASLt
  allow_shared_memory(skinny_gemm_kernel, kSmemBytes, true);
  for (int splits = 1; splits <= kSkinnyMaxSplits; ++splits) {
    cudaLaunchAttribute attrs[2];
    const cudaLaunchConfig_t config = launch_config(splits, 1, nullptr, attrs, false);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, skinny_gemm_kernel, &config) != cudaSuccess) {
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
  const int x_rows = std::min(kSkinnyMaxRows, (m + 7) / 8 * 8);
  // W is read once: each 128-byte box row pulls its 256-byte neighbourhood into L2, the next stage's half.
  const CUtensorMap w_map = tensor_map(w, uint64_t(k), uint64_t(n), kSkinnyTileN, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  const CUtensorMap x_map = tensor_map(x, uint64_t(k), uint64_t(m), uint32_t(x_rows));
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t config = launch_config(splits, n / kSkinnyTileN, stream, attrs, true);
  FOVEA_CUDA_CHECK(cudaLaunchKernelEx(&config, skinny_gemm_kernel, w_map, x_map, y, m, n, k, x_rows));
}

std::optional<std::vector<SkinnyWeightShape>> skinny_shapes_from_env() {
  const char* value = std::getenv("FOVEA_CUDA_SKINNY_GEMM");
  const std::string text = value ? value : "";
  if (text.empty() || text == "0") return std::nullopt;
  std::vector<SkinnyWeightShape> shapes;
  if (text == "1") return shapes;
  std::stringstream list(text + ",");  // every item ends with a comma; a trailing one leaves an empty item
  std::string item;
  while (std::getline(list, item, ',')) {
    SkinnyWeightShape shape;
    char x = 0;
    std::stringstream parse(item);
    FOVEA_CHECK(parse >> shape.n >> x >> shape.k && x == 'x' && parse.peek() == EOF && shape.n > 0 && shape.k > 0,
                "FOVEA_CUDA_SKINNY_GEMM=", text, ": expected 0, 1 or weight shapes NxK,NxK,... (e.g. 6144x4096)");
    shapes.push_back(shape);
  }
  return shapes;
}

bool skinny_shape_listed(const std::vector<SkinnyWeightShape>& shapes, int64_t n, int64_t k) {
  if (shapes.empty()) return true;
  for (const SkinnyWeightShape& s : shapes)
    if (s.n == n && s.k == k) return true;
  return false;
}

}  // namespace fovea::cuda

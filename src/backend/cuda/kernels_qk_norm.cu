// In-place RMSNorm of the q and k parts of a packed qkv row (Backend::qk_rms_norm). A token's q part is cut into groups
// of q_group values (head_dim: Qwen3's per-head q_norm; heads * head_dim: InternViT-6B's norm over the whole
// projection), its k part into groups of k_group; every group is normalised with float32 statistics and scaled by its
// part's gamma. Small groups (up to kWarpGroupMax values) take one warp each, eight groups per block, so a prefill
// step's thousands of 128-value heads are not thousands of mostly idle blocks; larger groups take a block each, as the
// row norms do (kernels_norm.cu). Both read each value twice (sum of squares, then scale), the second read from L1, and
// write it once. qk_norm_rope_kv_write_kernel is Qwen3's whole step between the qkv linear and attention in one pass:
// one block per token, one warp per head at a time normalises a q or k head, rotates it (the rope of
// kernels_decoder.cu, same float32 inv_freq and angle), stores it back and, for k, into the cache; a v head is
// copied into the cache.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/kernels.h"

namespace fovea::cuda {
namespace {

constexpr int kWarpGroupMax = 512, kWarpsPerBlock = 8;

// Where group g (q groups first, then k groups) of token t starts, its length and its gamma.
struct QkGroups {
  bf16* qkv;
  const bf16* q_gamma;
  const bf16* k_gamma;
  int64_t row_width;  // (heads + 2 kv_heads) * head_dim
  int q_width, q_group, k_group, q_groups, k_groups;
  float eps;

  __device__ __forceinline__ int per_token() const { return q_groups + k_groups; }
  __device__ __forceinline__ bf16* start(int64_t t, int g) const {
    bf16* row = qkv + t * row_width;
    return g < q_groups ? row + int64_t(g) * q_group : row + q_width + int64_t(g - q_groups) * k_group;
  }
};

// One group's two passes, the threads of a warp or block taking W-value chunks from `first` by `stride`: the sum
// of squares of this thread's chunks, then x = x * inv_rms * gamma over them.
template <int W>
__device__ __forceinline__ float sum_squares(const bf16* x, int n, int first, int stride) {
  float v[W], sq = 0.f;
  for (int c = first; c < n; c += stride) {
    load_bf16<W>(x + c, v);
#pragma unroll
    for (int i = 0; i < W; ++i) sq += v[i] * v[i];
  }
  return sq;
}

template <int W>
__device__ __forceinline__ void scale_group(bf16* x, const bf16* gamma, int n, int first, int stride, float inv_rms) {
  float v[W], gm[W];
  for (int c = first; c < n; c += stride) {
    load_bf16<W>(x + c, v);
    load_bf16<W>(gamma + c, gm);
#pragma unroll
    for (int i = 0; i < W; ++i) v[i] = v[i] * inv_rms * gm[i];
    store_bf16<W>(x + c, v);
  }
}

template <int W>
__global__ void qk_norm_warp_kernel(QkGroups p, int64_t groups) {
  wait_for_upstream();
  release_downstream();
  const int64_t w = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (w >= groups) return;  // whole warps leave together: w is the same for all 32 lanes
  const int64_t t = w / p.per_token();
  const int g = int(w % p.per_token());
  const bool is_q = g < p.q_groups;
  const int n = is_q ? p.q_group : p.k_group;
  bf16* x = p.start(t, g);
  const float inv_rms = rsqrtf(warp_sum(sum_squares<W>(x, n, lane * W, 32 * W)) / float(n) + p.eps);
  scale_group<W>(x, is_q ? p.q_gamma : p.k_gamma, n, lane * W, 32 * W, inv_rms);
}

template <int W>
__global__ void qk_norm_block_kernel(QkGroups p) {
  __shared__ float scratch[32];
  wait_for_upstream();
  release_downstream();
  const int64_t t = blockIdx.x / p.per_token();
  const int g = int(blockIdx.x % p.per_token());
  const bool is_q = g < p.q_groups;
  const int n = is_q ? p.q_group : p.k_group;
  bf16* x = p.start(t, g);
  // Every thread has read its values before any writes them back: block_sum's barriers order the two passes.
  const float sq = sum_squares<W>(x, n, threadIdx.x * W, blockDim.x * W);
  const float inv_rms = rsqrtf(block_sum(sq, scratch) / float(n) + p.eps);
  scale_group<W>(x, is_q ? p.q_gamma : p.k_gamma, n, threadIdx.x * W, blockDim.x * W, inv_rms);
}

template <int W>
void launch_groups(const QkGroups& p, int64_t tokens, cudaStream_t stream) {
  const int64_t groups = tokens * (p.q_groups + p.k_groups);
  if (std::max(p.q_group, p.k_group) <= kWarpGroupMax) {
    const int64_t blocks = (groups + kWarpsPerBlock - 1) / kWarpsPerBlock;
    launch_dependent(qk_norm_warp_kernel<W>, unsigned(blocks), 32 * kWarpsPerBlock, 0, stream, p, groups);
  } else {
    // 3200-value groups (InternViT-6B) are 400 16-byte chunks: 416 threads read each chunk once.
    const int chunks = (std::max(p.q_group, p.k_group) + W - 1) / W;
    const int threads = std::min(1024, (chunks + 31) / 32 * 32);
    launch_dependent(qk_norm_block_kernel<W>, unsigned(groups), threads, 0, stream, p);
  }
}

// Lane l owns the rotated pairs (p, p + D/2) for p = l, l + 32, ... < D/2: at most kMaxPairsPerLane of them.
constexpr int kMaxPairsPerLane = 4;  // head_dim <= 256

struct FusedQkRope {
  bf16* qkv;
  const bf16* q_gamma;  // [head_dim]
  const bf16* k_gamma;
  const int* positions;
  const int* slots;
  bf16* k_cache;
  bf16* v_cache;
  int64_t num_slots;
  int* error_flag;
  int tokens, heads, kv_heads, head_dim;
  float eps, theta;
};

// One block per token: its threads first compute the rotation of every pair (p, p + D/2) once, sine and cosine
// into shared memory (the transcendentals were per head before: 48 times the work at Qwen3-8B's 32 + 8 + 8 heads,
// 313 us for a 10,107-token step on an H100 against 79 for its whole bf16 add_rms_norm); then each warp takes
// heads: normalises a q or k head, rotates it, stores it back and, for k, into the cache; copies a v head into the
// cache. Every value's arithmetic is the per-head version's, so the output is unchanged bit for bit.
__global__ void qk_norm_rope_kv_write_kernel(FusedQkRope p) {
  __shared__ float sines[32 * kMaxPairsPerLane], cosines[32 * kMaxPairsPerLane];
  wait_for_upstream();
  release_downstream();
  const int64_t t = blockIdx.x;
  const int half = p.head_dim / 2;
  const float pos = float(p.positions[t]);
  for (int pair = threadIdx.x; pair < half; pair += blockDim.x) {
    const float inv_freq = 1.f / powf(p.theta, float(2 * pair) / float(p.head_dim));
    sincosf(pos * inv_freq, &sines[pair], &cosines[pair]);
  }
  __syncthreads();
  int slot = p.slots[t];
  if (slot >= p.num_slots) {
    if (threadIdx.x == 0) *p.error_flag = 1;
    slot = -1;
  }
  const int total_heads = p.heads + 2 * p.kv_heads, lane = threadIdx.x & 31;
  for (int head = threadIdx.x / 32; head < total_heads; head += blockDim.x / 32) {
    bf16* x = p.qkv + (t * total_heads + head) * p.head_dim;
    const bool is_v = head >= p.heads + p.kv_heads;
    const int kv_head = head - p.heads - (is_v ? p.kv_heads : 0);
    bf16* cache_row = slot >= 0 && head >= p.heads
                          ? (is_v ? p.v_cache : p.k_cache) + (int64_t(slot) * p.kv_heads + kv_head) * p.head_dim
                          : nullptr;
    if (is_v) {
      if (cache_row)
        for (int i = lane; i < p.head_dim; i += 32) cache_row[i] = x[i];
      continue;
    }
    float lo[kMaxPairsPerLane], hi[kMaxPairsPerLane];
    float sq = 0.f;
#pragma unroll
    for (int j = 0; j < kMaxPairsPerLane; ++j) {
      const int pair = lane + 32 * j;
      lo[j] = hi[j] = 0.f;
      if (pair < half) {
        lo[j] = __bfloat162float(x[pair]);
        hi[j] = __bfloat162float(x[pair + half]);
        sq += lo[j] * lo[j] + hi[j] * hi[j];
      }
    }
    const float inv_rms = rsqrtf(warp_sum(sq) / float(p.head_dim) + p.eps);
    const bf16* gamma = head < p.heads ? p.q_gamma : p.k_gamma;
#pragma unroll
    for (int j = 0; j < kMaxPairsPerLane; ++j) {
      const int pair = lane + 32 * j;
      if (pair >= half) continue;
      const float a = lo[j] * inv_rms * __bfloat162float(gamma[pair]);
      const float b = hi[j] * inv_rms * __bfloat162float(gamma[pair + half]);
      const float s = sines[pair], c = cosines[pair];
      const bf16 out_lo = __float2bfloat16(a * c - b * s), out_hi = __float2bfloat16(b * c + a * s);
      x[pair] = out_lo;
      x[pair + half] = out_hi;
      if (cache_row) {
        cache_row[pair] = out_lo;
        cache_row[pair + half] = out_hi;
      }
    }
  }
}

}  // namespace

bool qk_norm_rope_fusable(int head_dim) { return head_dim % 2 == 0 && head_dim <= 64 * kMaxPairsPerLane; }

void launch_qk_norm_rope_kv_write(bf16* qkv, const bf16* q_gamma, const bf16* k_gamma, float eps, const int* positions,
                                  const int* slots, int tokens, int heads, int kv_heads, int head_dim, float theta,
                                  bf16* k_cache, bf16* v_cache, int64_t num_slots, int* error_flag,
                                  cudaStream_t stream) {
  if (tokens == 0) return;
  FusedQkRope p{qkv,        q_gamma, k_gamma, positions, slots,    k_cache, v_cache, num_slots,
                error_flag, tokens,  heads,   kv_heads,  head_dim, eps,     theta};
  launch_dependent(qk_norm_rope_kv_write_kernel, unsigned(tokens), 32 * kWarpsPerBlock, 0, stream, p);
}

void launch_qk_rms_norm(bf16* qkv, int tokens, int heads, int kv_heads, int head_dim, int q_group, int k_group,
                        const bf16* q_gamma, const bf16* k_gamma, float eps, cudaStream_t stream) {
  if (tokens == 0) return;
  QkGroups p{};
  p.qkv = qkv;
  p.q_gamma = q_gamma;
  p.k_gamma = k_gamma;
  p.row_width = int64_t(heads + 2 * kv_heads) * head_dim;
  p.q_width = heads * head_dim;
  p.q_group = q_group;
  p.k_group = k_group;
  p.q_groups = p.q_width / q_group;
  p.k_groups = kv_heads * head_dim / k_group;
  p.eps = eps;
  const bool vector = head_dim % 8 == 0 && q_group % 8 == 0 && k_group % 8 == 0 && aligned16(qkv) &&
                      aligned16(q_gamma) && aligned16(k_gamma);
  if (vector)
    launch_groups<8>(p, tokens, stream);
  else
    launch_groups<1>(p, tokens, stream);
}

}  // namespace fovea::cuda

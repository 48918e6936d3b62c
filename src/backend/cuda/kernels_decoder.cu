// Decoder-side small kernels: rotary embedding, KV-cache writes, and the two LM-head reductions.
#include <algorithm>
#include <cfloat>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/device_info.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/kernels.h"

namespace fovea::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per (token, kPairs rotated pairs (x[i], x[i + D/2]), i = kPairs * threadIdx.x ...): the angles' sines
// and cosines are computed once and applied to those pairs of every rotated head (q and k) in the block's head
// range, so the transcendental work is a fraction of one thread per element. kPairs = 8 moves 16-byte vectors (a
// warp reads a head's halves as 128-byte runs: with one 2-byte pair per thread the fused rope + KV write of an
// 8,192-token prefill ran at under half the copy bandwidth); kPairs = 1 serves any head_dim and alignment. Each
// element's arithmetic is the same for either width. inv_freq and the angle are computed in float32 the way the
// Hugging Face reference computes them. blockDim.y tokens share a block; blockIdx.y picks the range of
// heads_per_chunk rotated heads (see rope_heads_per_chunk for why).
constexpr int kRopeThreads = 256, kHeadsInFlight = 4;
// With kWriteCache (the fused rope + kv_write of a decoder layer) the block's head range covers the v heads too:
// rotated k heads are also stored to k_cache[slots[t]], v heads copied to v_cache[slots[t]] (negative slots are
// padding and skipped; slots past the cache set *error_flag), exactly what launch_kv_write would write after
// launch_rope, in one pass.
struct RopeCacheWrite {
  bf16* k_cache = nullptr;
  bf16* v_cache = nullptr;
  const int* slots = nullptr;
  int64_t num_slots = 0;
  int* error_flag = nullptr;
  int heads = 0, kv_heads = 0;
};

template <int N>
__device__ __forceinline__ void load_raw(const bf16* src, bf16* v) {
  if constexpr (N == 8) {
    *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(src);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = src[i];
  }
}

template <int N>
__device__ __forceinline__ void store_raw(bf16* dst, const bf16* v) {
  if constexpr (N == 8) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(v);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) dst[i] = v[i];
  }
}

template <bool kWriteCache, int kPairs>
__global__ void rope_kernel(bf16* qkv, const int* positions, int tokens, int rotated_heads, int total_heads,
                            int heads_per_chunk, int head_dim, float theta, RopeCacheWrite cache) {
  wait_for_upstream();
  release_downstream();
  const int half = head_dim / 2;
  const int pair0 = threadIdx.x * kPairs;
  const int t = blockIdx.x * blockDim.y + threadIdx.y;
  if (t >= tokens || pair0 >= half) return;
  float s[kPairs], c[kPairs];
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const float inv_freq = 1.f / powf(theta, float(2 * (pair0 + i)) / float(head_dim));
    const float angle = __fmul_rn(float(positions[t]), inv_freq);
    sincosf(angle, &s[i], &c[i]);
  }
  bf16* row = qkv + int64_t(t) * total_heads * head_dim;
  int slot = -1;
  if constexpr (kWriteCache) {
    slot = cache.slots[t];
    if (slot >= cache.num_slots) {
      *cache.error_flag = 1;
      slot = -1;
    }
  }
  const int last_head = kWriteCache ? total_heads : rotated_heads;
  const int first = blockIdx.y * heads_per_chunk, last = min(last_head, first + heads_per_chunk);
  // kHeadsInFlight heads' loads are issued before any of their stores (the stores to qkv could alias later loads
  // as far as the compiler knows, so it would not hoist them itself).
  for (int h0 = first; h0 < last; h0 += kHeadsInFlight) {
    alignas(16) bf16 lo[kHeadsInFlight][kPairs], hi[kHeadsInFlight][kPairs];
#pragma unroll
    for (int u = 0; u < kHeadsInFlight; ++u) {
      if (h0 + u >= last) break;
      const bf16* x = row + (h0 + u) * head_dim + pair0;
      load_raw<kPairs>(x, lo[u]);
      load_raw<kPairs>(x + half, hi[u]);
    }
#pragma unroll
    for (int u = 0; u < kHeadsInFlight; ++u) {
      const int head = h0 + u;
      if (head >= last) break;
      if (head < rotated_heads) {
#pragma unroll
        for (int i = 0; i < kPairs; ++i) {
          const float a = __bfloat162float(lo[u][i]), b = __bfloat162float(hi[u][i]);
          // Spelled out so that every width rounds alike (b * s and b * c rounded, each then fused with the
          // other product), as the compiler had contracted the plain expressions for the one-pair kernel.
          lo[u][i] = __float2bfloat16(__fmaf_rn(a, c[i], -__fmul_rn(b, s[i])));
          hi[u][i] = __float2bfloat16(__fmaf_rn(a, s[i], __fmul_rn(b, c[i])));
        }
        bf16* x = row + head * head_dim + pair0;
        store_raw<kPairs>(x, lo[u]);
        store_raw<kPairs>(x + half, hi[u]);
      }
      if constexpr (kWriteCache) {
        if (slot >= 0 && head >= cache.heads) {
          const bool is_v = head >= cache.heads + cache.kv_heads;
          const int kv_head = head - cache.heads - (is_v ? cache.kv_heads : 0);
          bf16* dst = (is_v ? cache.v_cache : cache.k_cache) +
                      (int64_t(slot) * cache.kv_heads + kv_head) * head_dim + pair0;
          store_raw<kPairs>(dst, lo[u]);
          store_raw<kPairs>(dst + half, hi[u]);
        }
      }
    }
  }
}

// A decode step has few tokens (64 tokens of head_dim 128 are 2 blocks of 32 tokens), so one chunk would leave
// most SMs idle while each thread walks every head (48 for InternLM2 with the cache write). With fewer than
// kRopeBlocksPerSm token blocks per SM the heads are split into equal chunks over blockIdx.y, about as many as
// bring the grid to that size (rounding to equal chunks gives a little less). Each chunk recomputes the same
// inv_freq, sine and cosine, so every element's arithmetic, and output, is the same for any chunk count; the
// recomputation is kPairs transcendentals per thread against its walk over the chunk's heads. Once the tokens
// alone fill the GPU (kRopeBlocksPerSm token blocks per SM: 16,896 tokens of head_dim 128 on a 132-SM H100 or
// H200) there is one chunk, and the transcendentals are computed once per (token, pair).
constexpr int kRopeBlocksPerSm = 4;
int rope_heads_per_chunk(int token_blocks, int rotated_heads) {
  static const int target_blocks = kRopeBlocksPerSm * current_sm_count();
  const int chunks = std::min(rotated_heads, std::max(1, (target_blocks + token_blocks - 1) / token_blocks));
  return (rotated_heads + chunks - 1) / chunks;
}

// One thread per kChunk elements of one token's K or V row (kv_heads * head_dim elements). kChunk 8 copies
// 16-byte vectors and needs kv_width to be a multiple of 8 (rows 16-byte aligned); kChunk 1 serves any width.
template <int kChunk>
__global__ void kv_write_kernel(const bf16* qkv, const int* slots, int tokens, int heads, int kv_heads,
                                int head_dim, bf16* k_cache, bf16* v_cache, int64_t num_slots, int* error_flag) {
  wait_for_upstream();
  release_downstream();
  const int kv_width = kv_heads * head_dim, chunks = kv_width / kChunk;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(tokens) * 2 * chunks) return;
  const int c = int(i % chunks) * kChunk;
  const int which = int((i / chunks) % 2);  // 0: K, 1: V
  const int64_t t = i / (2 * chunks);
  const int slot = slots[t];
  if (slot < 0) return;
  if (slot >= num_slots) {
    *error_flag = 1;
    return;
  }
  const int64_t row_width = int64_t(heads + 2 * kv_heads) * head_dim;
  const bf16* src = qkv + t * row_width + int64_t(heads + which * kv_heads) * head_dim + c;
  bf16* dst = (which ? v_cache : k_cache) + int64_t(slot) * kv_width + c;
  if constexpr (kChunk == 8) *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  else *dst = *src;
}

template <typename T>
__device__ __forceinline__ float as_float(T v) {
  if constexpr (sizeof(T) == 4) return v;
  else return __bfloat162float(v);
}

// One block of kArgmaxThreads per row; ties keep the lowest index. Each thread reads 4 strided elements per
// round (independent loads in flight): a decode step's 64 rows of 92,553 logits are only 64 blocks, so the
// parallelism has to come from inside the row (256 threads and one load at a time took 85 µs on the H200).
constexpr int kArgmaxThreads = 1024, kArgmaxUnroll = 4;
template <typename T>
__global__ void __launch_bounds__(kArgmaxThreads) argmax_kernel(const T* logits, int vocab, int* ids) {
  __shared__ float best_value[kArgmaxThreads];
  __shared__ int best_index[kArgmaxThreads];
  wait_for_upstream();
  release_downstream();
  const T* row = logits + int64_t(blockIdx.x) * vocab;
  float value = -INFINITY;
  int index = vocab;  // sentinel: larger than any real index
  for (int base = threadIdx.x; base < vocab; base += kArgmaxUnroll * kArgmaxThreads) {
    float x[kArgmaxUnroll];
#pragma unroll
    for (int u = 0; u < kArgmaxUnroll; ++u) {
      const int v = base + u * kArgmaxThreads;
      x[u] = v < vocab ? as_float(row[v]) : -INFINITY;
    }
    // Each thread walks increasing indices, so a strict > keeps its lowest index; the first element is always
    // taken, so an all -inf row still yields an index.
#pragma unroll
    for (int u = 0; u < kArgmaxUnroll; ++u) {
      const int v = base + u * kArgmaxThreads;
      if (v < vocab && (x[u] > value || index == vocab)) {
        value = x[u];
        index = v;
      }
    }
  }
  best_value[threadIdx.x] = value;
  best_index[threadIdx.x] = index;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float ov = best_value[threadIdx.x + stride];
      const int oi = best_index[threadIdx.x + stride];
      const float mv = best_value[threadIdx.x];
      const int mi = best_index[threadIdx.x];
      if (oi != vocab && (mi == vocab || ov > mv || (ov == mv && oi < mi))) {
        best_value[threadIdx.x] = ov;
        best_index[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) ids[blockIdx.x] = best_index[0];
}

template <typename T>
__global__ void log_softmax_gather_kernel(const T* logits, int vocab, const int* ids, int k, float* out,
                                          int* error_flag) {
  __shared__ float scratch[32];
  wait_for_upstream();
  release_downstream();
  const T* row = logits + int64_t(blockIdx.x) * vocab;
  float m = -INFINITY;
  for (int v = threadIdx.x; v < vocab; v += blockDim.x) m = fmaxf(m, as_float(row[v]));
  m = block_max(m, scratch);
  float sum = 0.f;
  for (int v = threadIdx.x; v < vocab; v += blockDim.x) sum += __expf(as_float(row[v]) - m);
  const float log_norm = m + logf(block_sum(sum, scratch));
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    int id = ids[int64_t(blockIdx.x) * k + j];
    if (id < 0 || id >= vocab) {
      *error_flag = 1;
      id = id < 0 ? 0 : vocab - 1;
    }
    out[int64_t(blockIdx.x) * k + j] = as_float(row[id]) - log_norm;
  }
}

}  // namespace

namespace {

template <bool kWriteCache, int kPairs>
void launch_rope_kernel(bf16* qkv, const int* positions, int tokens, int rotated_heads, int total_heads,
                        int covered_heads, int head_dim, float theta, const RopeCacheWrite& cache,
                        cudaStream_t stream) {
  const int lanes = head_dim / 2 / kPairs;
  const dim3 block(lanes, std::max(1, kRopeThreads / lanes));
  const int token_blocks = int((int64_t(tokens) + block.y - 1) / block.y);
  const int heads_per_chunk = rope_heads_per_chunk(token_blocks, covered_heads);
  const dim3 grid(token_blocks, (covered_heads + heads_per_chunk - 1) / heads_per_chunk);
  launch_dependent(rope_kernel<kWriteCache, kPairs>, grid, block, 0, stream, qkv, positions, tokens, rotated_heads,
                   total_heads, heads_per_chunk, head_dim, theta, cache);
}

template <bool kWriteCache>
void launch_rope_heads(bf16* qkv, const int* positions, int tokens, int heads, int kv_heads, int head_dim,
                       float theta, const RopeCacheWrite& cache, cudaStream_t stream) {
  const int rotated_heads = heads + kv_heads, total_heads = heads + 2 * kv_heads;
  const int covered_heads = kWriteCache ? total_heads : rotated_heads;
  if (tokens == 0 || head_dim < 2 || covered_heads == 0) return;
  // 16-byte vectors: each half-head run starts at a multiple of head_dim / 2 elements from an aligned base.
  const bool vector = head_dim % 16 == 0 && aligned16(qkv) &&
                      (!kWriteCache || (aligned16(cache.k_cache) && aligned16(cache.v_cache)));
  if (vector)
    launch_rope_kernel<kWriteCache, 8>(qkv, positions, tokens, rotated_heads, total_heads, covered_heads, head_dim,
                                       theta, cache, stream);
  else
    launch_rope_kernel<kWriteCache, 1>(qkv, positions, tokens, rotated_heads, total_heads, covered_heads, head_dim,
                                       theta, cache, stream);
}

}  // namespace

void launch_rope(bf16* qkv, const int* positions, int tokens, int heads, int kv_heads, int head_dim, float theta,
                 cudaStream_t stream) {
  launch_rope_heads<false>(qkv, positions, tokens, heads, kv_heads, head_dim, theta, RopeCacheWrite{}, stream);
}

void launch_rope_kv_write(bf16* qkv, const int* positions, const int* slots, int tokens, int heads, int kv_heads,
                          int head_dim, float theta, bf16* k_cache, bf16* v_cache, int64_t num_slots,
                          int* error_flag, cudaStream_t stream) {
  const RopeCacheWrite cache{k_cache, v_cache, slots, num_slots, error_flag, heads, kv_heads};
  launch_rope_heads<true>(qkv, positions, tokens, heads, kv_heads, head_dim, theta, cache, stream);
}

void launch_kv_write(const bf16* qkv, const int* slots, int tokens, int heads, int kv_heads, int head_dim,
                     bf16* k_cache, bf16* v_cache, int64_t num_slots, int* error_flag, cudaStream_t stream) {
  // Every source and destination offset is a multiple of head_dim: 16-byte vectors need head_dim % 8 == 0.
  const bool vector = head_dim % 8 == 0;
  const int64_t work = int64_t(tokens) * 2 * (kv_heads * head_dim / (vector ? 8 : 1));
  if (work == 0) return;
  if (vector)
    launch_dependent(kv_write_kernel<8>, blocks_for(work, kThreads), kThreads, 0, stream, qkv, slots, tokens, heads,
                     kv_heads, head_dim, k_cache, v_cache, num_slots, error_flag);
  else
    launch_dependent(kv_write_kernel<1>, blocks_for(work, kThreads), kThreads, 0, stream, qkv, slots, tokens, heads,
                     kv_heads, head_dim, k_cache, v_cache, num_slots, error_flag);
}

void launch_argmax(const void* logits, bool logits_f32, int rows, int vocab, int* ids, cudaStream_t stream) {
  if (rows == 0) return;
  if (logits_f32)
    launch_dependent(argmax_kernel<float>, rows, kArgmaxThreads, 0, stream, static_cast<const float*>(logits), vocab,
                     ids);
  else
    launch_dependent(argmax_kernel<bf16>, rows, kArgmaxThreads, 0, stream, static_cast<const bf16*>(logits), vocab,
                     ids);
}

void launch_log_softmax_gather(const void* logits, bool logits_f32, int rows, int vocab, const int* ids, int k,
                               float* out, int* error_flag, cudaStream_t stream) {
  if (rows == 0 || k == 0) return;
  if (logits_f32)
    launch_dependent(log_softmax_gather_kernel<float>, rows, kThreads, 0, stream, static_cast<const float*>(logits),
                     vocab, ids, k, out, error_flag);
  else
    launch_dependent(log_softmax_gather_kernel<bf16>, rows, kThreads, 0, stream, static_cast<const bf16*>(logits),
                     vocab, ids, k, out, error_flag);
}

}  // namespace fovea::cuda

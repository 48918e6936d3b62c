// Split-KV decode attention for steps whose query rows of one (sequence, KV head) fit a single 16-row mma tile
// (max_q_len * group <= 16: a q_len = 1 decode for group <= 16, or a short multi-token step). The general kernel
// (attention_mma.cuh) gives each warp its own 16 query rows, so in decode only warp 0 computes and the block
// keeps two 64-key stages in flight. Here every warp holds the same 16 query rows and walks its own key tiles of
// the block's split (warp w: tiles w, w + kWarps, ...), each with a private cp.async pipeline of kStages 16-key
// stages, so the whole block streams K and V. The warps' online-softmax states are merged through shared memory
// at the end, into the final bf16 output (one split) or the split's partial in split_out / split_stats, laid out
// exactly as the general kernel leaves them so that the same combine kernel merges the splits.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/attention_mma.cuh"
#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/kernels.h"

namespace fovea::cuda {

// Host side (attention_decode.cu). Which kernel a paged step takes, and how many splits: `use` is false when the
// step does not fit one tile or the head dim is not a multiple of 8 up to 128.
struct SplitDecodePlan {
  bool use = false;
  int splits = 1, split_keys = 0;  // split_keys: a multiple of the 16-key warp tile
};
SplitDecodePlan plan_split_decode(const PagedAttentionArgs& a, int group, int max_splits);
// Launches over (split, KV head, sequence) with p.num_splits / p.split_keys / split_out set as the plan says.
void launch_split_decode(const AttentionProblem& p, int num_seqs, cudaStream_t stream);
// Raises the kernel's shared-memory limits and measures its occupancy, once; the first paged launch
// calls it too, but calling it at backend construction keeps that out of any graph recording.
void prepare_split_decode_kernels();

template <int kPadDim, int kNumWarps, int kNumStages>
struct SplitDecodeConfig {
  static constexpr int kPad = kPadDim;  // head_dim padded up to 32, 64 or 128 with zeros
  static constexpr int kWarps = kNumWarps;
  static constexpr int kStages = kNumStages;  // per warp; kStages - 1 tiles load while one is computed on
  static constexpr int kRows = 16;            // query rows, shared by every warp
  static constexpr int kKeys = 16;            // keys per warp tile
  static constexpr int kStride = kPad + 8;    // bf16 per smem row: +16 bytes keeps ldmatrix free of bank conflicts
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kStageElems = 2 * kKeys * kStride;  // K tile then V tile
  static constexpr int kWarpElems = kStages * kStageElems;
  static constexpr int kAccStride = kPad + 8;  // floats per row of a warp's partial output in the merge scratch
  static constexpr int pipeline_bytes() { return kWarps * kWarpElems * 2; }
  // Merge scratch (overlays the pipelines once every warp is done): partial outputs, (max, sum) per warp and
  // row, then one weight per row and warp.
  static constexpr int merge_bytes() { return (kWarps * kRows * kAccStride + kWarps * kRows * 2 + kRows * kWarps) * 4; }
  static constexpr int smem_bytes() { return pipeline_bytes() > merge_bytes() ? pipeline_bytes() : merge_bytes(); }
  // Blocks per multiprocessor the shared memory allows (228 KiB, 1 KiB of it reserved per block).
  static constexpr int kBlocksPerSm = 228 * 1024 / (smem_bytes() + 1024) > 0 ? 228 * 1024 / (smem_bytes() + 1024) : 1;
};

namespace decode_detail {

// 4 bytes (two bf16) of a query row, or zeros past head_dim / for a padding row (null).
__device__ __forceinline__ uint32_t query_pair(const __nv_bfloat16* row, int col, int head_dim) {
  return row && col < head_dim ? __ldg(reinterpret_cast<const unsigned int*>(row + col)) : 0u;
}

// One warp starts copying the K and V rows of keys [key0, key0 + 16) into its stage. Lane j < 16 resolves key
// key0 + j through the block table once (kv_row_offset) and the warp shares the offsets by shuffles. Keys at or
// past key_end, rows the block table cannot name and columns past head_dim become zeros (a masked key's V row
// must not be NaN garbage: 0 * NaN would poison the output).
template <class C>
__device__ __forceinline__ void load_warp_tile(__nv_bfloat16* sK, __nv_bfloat16* sV, const AttentionProblem& p,
                                               const SequenceSpan& span, int seq, int kv_head, int key0, int key_end,
                                               int lane) {
  constexpr int kChunks = C::kPad / 8;  // 16-byte chunks per row
  constexpr int kPerLane = C::kKeys * kChunks / 32;
  static_assert(C::kKeys * kChunks % 32 == 0, "a tile must split evenly over the warp's lanes");
  const int pos = key0 + lane % C::kKeys;
  const int64_t my_offset = pos < key_end ? kv_row_offset(p, span, seq, pos, kv_head) : -1;
  const __nv_bfloat16* k_base = kv_base(p, 0);
  const __nv_bfloat16* v_base = kv_base(p, 1);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int chunk = lane + 32 * i;
    const int row = chunk / kChunks, col = (chunk % kChunks) * 8;
    const int64_t offset = __shfl_sync(0xffffffffu, my_offset, row);
    const bool valid = offset >= 0 && col < p.head_dim;
    mma_detail::cp_async16(sK + row * C::kStride + col, valid ? k_base + offset + col : p.qkv, valid);
    mma_detail::cp_async16(sV + row * C::kStride + col, valid ? v_base + offset + col : p.qkv, valid);
  }
}

}  // namespace decode_detail

template <class C>
__global__ void __launch_bounds__(C::kThreads, C::kBlocksPerSm) split_decode_attention(AttentionProblem p) {
  using namespace mma_detail;
  using namespace decode_detail;
  constexpr int kStride = C::kStride, kSteps = C::kPad / 16, kDimTiles = C::kPad / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  wait_for_upstream();  // the step's q and this token's K/V come from the kernels just before
  release_downstream();

  const int seq = blockIdx.z, kv_head = blockIdx.y, split = blockIdx.x;
  const bool split_mode = p.num_splits > 1;
  const SequenceSpan span = sequence_span(p, seq);
  const int rows = min(C::kRows, span.q_len * p.group);  // real query rows; the rest of the tile is padding
  if (rows <= 0) return;
  // Keys of this split: the sequence's own keys in equal whole-tile shares (a recorded step plans for its padded
  // context, so p.split_keys would leave the later splits of a shorter sequence empty).
  const int split_keys =
      split_mode ? ((span.kv_len + C::kKeys - 1) / C::kKeys + p.num_splits - 1) / p.num_splits * C::kKeys : 0;
  const int key_begin = split_mode ? split * split_keys : 0;
  const int key_end = split_mode ? min(span.kv_len, key_begin + split_keys) : span.kv_len;
  if (split_mode && key_begin >= key_end) {  // nothing here (a short sequence in a long step): an empty partial
    for (int r = threadIdx.x; r < rows; r += C::kThreads) {
      const int64_t slot = ((int64_t(seq) * p.kv_heads + kv_head) * p.num_splits + split) * p.split_rows + r;
      p.split_stats[2 * slot] = -INFINITY;
      p.split_stats[2 * slot + 1] = 0.f;
    }
    return;
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int first_tile = key_begin / C::kKeys + warp;  // split_keys is a multiple of kKeys
  const int end_tile = (key_end + C::kKeys - 1) / C::kKeys;
  const int my_tiles = first_tile < end_tile ? (end_tile - first_tile + C::kWarps - 1) / C::kWarps : 0;
  __nv_bfloat16* stages = reinterpret_cast<__nv_bfloat16*>(smem_raw) + warp * C::kWarpElems;
  auto stage_k = [&](int i) { return stages + (i % C::kStages) * C::kStageElems; };
  auto stage_v = [&](int i) { return stage_k(i) + C::kKeys * kStride; };
  auto tile_key0 = [&](int i) { return (first_tile + i * C::kWarps) * C::kKeys; };

  // Pipeline: group i = this warp's i-th tile; every loop step commits one group (possibly empty), so "at most
  // kStages - 1 groups pending" always means "tile i has landed".
#pragma unroll
  for (int i = 0; i < C::kStages - 1; ++i) {
    if (i < my_tiles) load_warp_tile<C>(stage_k(i), stage_v(i), p, span, seq, kv_head, tile_key0(i), key_end, lane);
    cp_async_commit();
  }

  // This thread's rows g and g + 8 of the tile: row R is token R / group of q head kv_head * group + R % group.
  // Their Q fragments come straight from global memory (no block barrier before the loop); padding rows are
  // zeros, are never masked (so never all -inf) and are never written.
  const __nv_bfloat16* q_row[2];
  int key_limit[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    const bool real = r < rows;
    q_row[h] = real ? query_ptr(p, span, r / p.group, kv_head * p.group + r % p.group) : nullptr;
    key_limit[h] = real ? min(span.limit(r / p.group), span.kv_len - 1) : INT_MAX;
  }
  const int min_limit = min(span.limit(0), span.kv_len - 1);  // tiles wholly at or below it need no mask
  uint32_t q_frag[kSteps][4];
#pragma unroll
  for (int k = 0; k < kSteps; ++k) {
    const int col = k * 16 + 2 * t;
    q_frag[k][0] = query_pair(q_row[0], col, p.head_dim);
    q_frag[k][1] = query_pair(q_row[1], col, p.head_dim);
    q_frag[k][2] = query_pair(q_row[0], col + 8, p.head_dim);
    q_frag[k][3] = query_pair(q_row[1], col + 8, p.head_dim);
  }

  float acc[kDimTiles][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY};  // in score units, as online_softmax keeps it
  float row_sum[2] = {0.f, 0.f};               // this thread's columns only until the end

  for (int i = 0; i < my_tiles; ++i) {
    const int ahead = i + C::kStages - 1;
    if (ahead < my_tiles)
      load_warp_tile<C>(stage_k(ahead), stage_v(ahead), p, span, seq, kv_head, tile_key0(ahead), key_end, lane);
    cp_async_commit();
    cp_async_wait<C::kStages - 1>();
    __syncwarp();  // every lane's copies of tile i are visible to the whole warp
    const __nv_bfloat16* sK = stage_k(i);
    const __nv_bfloat16* sV = stage_v(i);
    const int key0 = tile_key0(i);

    // S = Q·K^T for 16 rows x 16 keys, then the online softmax and O += P·V (attention_mma.cuh's helpers).
    float s[2][4] = {};
#pragma unroll
    for (int k = 0; k < kSteps; ++k) qk_step<2, kStride>(s, q_frag[k], sK + k * 16, lane);
    // Masks: the kv_len boundary, or the causal edge of a multi-token step.
    if (key0 + C::kKeys - 1 > min_limit) mask_scores(s, key0, t, key_limit);
    // The accumulators follow the running max only when some row's max moved: a factor of exactly 1 (max
    // unchanged) or a still-zero accumulator (first tile) makes the multiply an identity, and once the
    // largest scores are seen most tiles move no max, so the warp skips 64 multiplies per thread.
    float correction[2];
    softmax_weights<true>(s, row_max, row_sum, p.scale_log2, correction);
    if (i > 0 && !__all_sync(0xffffffffu, correction[0] == 1.f && correction[1] == 1.f))
      rescale_output(acc, correction);
    accumulate_pv<2, kDimTiles, kStride>(acc, s, sV, lane);
    __syncwarp();  // the whole warp is done reading this stage before a later step refills it
  }
  cp_async_wait<0>();  // only empty groups can be pending, but the scratch below overlays every stage

  // Merge the warps: each leaves its rows' (max, sum) and unnormalised output in shared memory.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
  }
  __syncthreads();  // every warp is out of its pipeline
  float* warp_acc = reinterpret_cast<float*>(smem_raw);                // [kWarps][kRows][kAccStride]
  float* warp_stats = warp_acc + C::kWarps * C::kRows * C::kAccStride;  // [kWarps][kRows][2]
  float* weights = warp_stats + C::kWarps * C::kRows * 2;               // [kRows][kWarps]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    if (r >= rows) continue;
    if (t == 0) {  // the max in exp2 units, as split_stats holds it
      warp_stats[(warp * C::kRows + r) * 2] = row_max[h] == -INFINITY ? -INFINITY : row_max[h] * p.scale_log2;
      warp_stats[(warp * C::kRows + r) * 2 + 1] = row_sum[h];
    }
    float* dst = warp_acc + (warp * C::kRows + r) * C::kAccStride + 2 * t;
#pragma unroll
    for (int d = 0; d < kDimTiles; ++d)
      *reinterpret_cast<float2*>(dst + d * 8) = make_float2(acc[d][2 * h], acc[d][2 * h + 1]);
  }
  __syncthreads();
  const int64_t first_slot = ((int64_t(seq) * p.kv_heads + kv_head) * p.num_splits + split) * p.split_rows;
  if (threadIdx.x < rows) {  // one thread per row: the weights 2^(m_w - max m), and the row's total
    const int r = threadIdx.x;
    float top = -INFINITY;
    for (int w = 0; w < C::kWarps; ++w) top = fmaxf(top, warp_stats[(w * C::kRows + r) * 2]);
    float total = 0.f;
    for (int w = 0; w < C::kWarps; ++w) {
      const float m = warp_stats[(w * C::kRows + r) * 2];
      const float weight = m == -INFINITY ? 0.f : exp2f(m - top);
      weights[r * C::kWarps + w] = weight;
      total += weight * warp_stats[(w * C::kRows + r) * 2 + 1];
    }
    if (split_mode) {
      p.split_stats[2 * (first_slot + r)] = top;
      p.split_stats[2 * (first_slot + r) + 1] = total;
    } else {  // fold the normalisation into the weights
      const float inv = total > 0.f ? 1.f / total : 0.f;
      for (int w = 0; w < C::kWarps; ++w) weights[r * C::kWarps + w] *= inv;
    }
  }
  __syncthreads();
  const int pairs_per_row = p.head_dim / 2;
  for (int item = threadIdx.x; item < rows * pairs_per_row; item += C::kThreads) {
    const int r = item / pairs_per_row, col = (item % pairs_per_row) * 2;
    float2 sum = make_float2(0.f, 0.f);
#pragma unroll
    for (int w = 0; w < C::kWarps; ++w) {
      const float weight = weights[r * C::kWarps + w];
      if (weight == 0.f) continue;
      const float2 part = *reinterpret_cast<const float2*>(warp_acc + (w * C::kRows + r) * C::kAccStride + col);
      sum.x += weight * part.x;
      sum.y += weight * part.y;
    }
    if (split_mode) {
      *reinterpret_cast<float2*>(p.split_out + (first_slot + r) * p.head_dim + col) = sum;
    } else {
      __nv_bfloat16* out = output_ptr(p, span, r / p.group, kv_head * p.group + r % p.group);
      *reinterpret_cast<__nv_bfloat162*>(out + col) = __floats2bfloat162_rn(sum.x, sum.y);
    }
  }
}

}  // namespace fovea::cuda

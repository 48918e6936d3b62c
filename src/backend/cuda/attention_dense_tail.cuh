// The ragged ends of dense (ViT) attention, done on CUDA cores instead of in whole tensor-core tiles.
//
// A ViT tile has 1,025 tokens: 16 · 64 patches plus the class token. The pipelined wgmma kernel walks 64-row
// query tiles and 64- or 128-key tiles, so that last token costs a 17th (9th) key tile in every block — one key
// of 64 (128) — and a 17th (9th) block per (image, head) for one query row: about 6% (11%) of the kernel's
// tensor-core and softmax work spent on padding. Here:
// - fold_tail_keys: a block whose keys end a few past a tile boundary (kMaxFoldedKeys) folds those last keys into
//   its rows' online softmax with CUDA-core dot products, after its last tile (the pipelined kernel's producer
//   then stops one tile earlier);
// - dense_attention_tail_rows: the query rows past the last whole row tile (at most kMaxTailRows of them) are
//   computed by their own small kernel, one block per (row, head, image), and the wgmma grid drops that tile.
// Same arithmetic as the tiles: fp32 scores of bf16 inputs, exp2 with the max subtracted, the running sums in
// fp32, P rounded to bf16 before it weights V (as the tile path packs it for P·V).
#pragma once
#include <cuda_bf16.h>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/attention_mma.cuh"
#include "backend/cuda/attention_wgmma.cuh"
#include "backend/cuda/kernel_utils.cuh"

namespace fovea::cuda {

constexpr int kMaxFoldedKeys = 4;  // keys past the last whole tile folded in on CUDA cores (else one more tile)
constexpr int kMaxTailRows = 8;    // query rows past the last whole row tile given to the tail-row kernel

// Keys [first, end) of the dense problem `p`, into the rows this thread holds (rows block_row and block_row + 8
// of the block's Q tile in shared memory, columns d * 8 + 2t, + 1 of each 8-column group): the state st and
// accumulators acc are the tile loop's, final (no wgmma in flight).
template <class C>
__device__ __forceinline__ void fold_tail_keys(const AttentionProblem& p, const SequenceSpan& span, int seq,
                                               int kv_head, const unsigned char* q_smem, int block_row, int t,
                                               int first, int end, wgmma_detail::RowState& st,
                                               float (&acc)[C::kPad / 8][4]) {
  for (int pos = first; pos < end; ++pos) {
    const __nv_bfloat16* k_row = kv_ptr(p, span, seq, pos, kv_head, 0);
    const __nv_bfloat16* v_row = kv_ptr(p, span, seq, pos, kv_head, 1);
    float score[2] = {0.f, 0.f};
#pragma unroll
    for (int d = 0; d < C::kPad / 8; ++d) {
      const float2 k = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(k_row + d * 8 + 2 * t));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const unsigned char* q = q_smem + wgmma_detail::swizzled(C::kRows, block_row + 8 * h, d) + 4 * t;
        const float2 qv = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(q));
        score[h] = fmaf(qv.y, k.y, fmaf(qv.x, k.x, score[h]));
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // the quad's four threads hold the row's 64 (128) columns between them
      score[h] += __shfl_xor_sync(0xffffffffu, score[h], 1);
      score[h] += __shfl_xor_sync(0xffffffffu, score[h], 2);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (pos > st.key_limit[h]) continue;  // a padding row
      const float new_max = fmaxf(st.max[h], score[h]);
      const float base = new_max * p.scale_log2;
      const float correction =
          st.max[h] == -INFINITY ? 0.f : mma_detail::exp2_of<true>(st.max[h] * p.scale_log2 - base);
      const float weight = mma_detail::exp2_of<true>(fmaf(score[h], p.scale_log2, -base));
      st.max[h] = new_max;
      // Each thread's sum holds its own columns' weights (store_rows adds the quad's): the key counts once.
      st.sum[h] = st.sum[h] * correction + (t == 0 ? weight : 0.f);
      const float rounded = __bfloat162float(__float2bfloat16(weight));
#pragma unroll
      for (int d = 0; d < C::kPad / 8; ++d) {
        const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(v_row + d * 8 + 2 * t));
        acc[d][2 * h] = fmaf(rounded, v.x, acc[d][2 * h] * correction);
        acc[d][2 * h + 1] = fmaf(rounded, v.y, acc[d][2 * h + 1] * correction);
      }
    }
  }
}

// Query rows first_row + blockIdx.x of image blockIdx.z, head blockIdx.y, over all keys (dense: non-causal,
// group 1). 128 threads in key groups of kDim / 8 lanes, each lane 8 dims; group j takes keys j, j + groups, ...
// with its own online softmax; the groups merge through shared memory at the end.
template <int kDim>
__global__ void __launch_bounds__(128) dense_attention_tail_rows(AttentionProblem p, int first_row) {
  static_assert(kDim == 64 || kDim == 128, "the dense wgmma kernels' head dims");
  constexpr int kLanes = kDim / 8, kGroups = 128 / kLanes;
  __shared__ float group_acc[kGroups][kDim];
  __shared__ float group_max[kGroups], group_sum[kGroups];
  const int token = first_row + int(blockIdx.x), head = blockIdx.y, seq = blockIdx.z;
  const SequenceSpan span = sequence_span(p, seq);
  if (token >= span.q_len) return;  // uniform per block
  const int group = threadIdx.x / kLanes, lane = threadIdx.x % kLanes, first = lane * 8;
  float q[8], acc[8] = {};
  load_bf16<8>(query_ptr(p, span, token, head) + first, q);
  const int last_key = min(span.limit(token), span.kv_len - 1);
  float row_max = -INFINITY, row_sum = 0.f;
  for (int base = 0; base <= last_key; base += kGroups) {  // uniform trip count: the shuffles need whole warps
    const int pos = base + group;
    const bool visible = pos <= last_key;
    float k[8] = {}, v[8] = {};
    if (visible) {
      load_bf16<8>(kv_ptr(p, span, seq, pos, head, 0) + first, k);
      load_bf16<8>(kv_ptr(p, span, seq, pos, head, 1) + first, v);
    }
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) dot = fmaf(q[i], k[i], dot);
#pragma unroll
    for (int o = kLanes / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    if (!visible) continue;
    const float score = dot * p.scale_log2, new_max = fmaxf(row_max, score);
    const float correction = row_max == -INFINITY ? 0.f : exp2f(row_max - new_max);
    const float weight = exp2f(score - new_max);
    const float rounded = __bfloat162float(__float2bfloat16(weight));
    row_sum = row_sum * correction + weight;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = fmaf(rounded, v[i], acc[i] * correction);
    row_max = new_max;
  }
  if (lane == 0) {
    group_max[group] = row_max;
    group_sum[group] = row_sum;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) group_acc[group][first + i] = acc[i];
  __syncthreads();
  if (threadIdx.x >= kDim) return;
  float top = -INFINITY;
  for (int g = 0; g < kGroups; ++g) top = fmaxf(top, group_max[g]);
  float total = 0.f, out = 0.f;
  for (int g = 0; g < kGroups; ++g) {
    if (group_max[g] == -INFINITY) continue;  // a group that saw no key
    const float w = exp2f(group_max[g] - top);
    total = fmaf(w, group_sum[g], total);
    out = fmaf(w, group_acc[g][threadIdx.x], out);
  }
  output_ptr(p, span, token, head)[threadIdx.x] = __float2bfloat16(total > 0.f ? out / total : 0.f);
}

}  // namespace fovea::cuda

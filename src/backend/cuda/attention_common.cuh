// What the dense (ViT) and paged (decoder) attention kernels share: one description of the problem, and where
// a query, a key/value row and an output row live for either layout. A block works on one sequence (or image),
// one KV head and a tile of "query rows"; query row R is token R / group of q head kv_head * group + R % group,
// so the q heads that share a KV head share each loaded K/V tile (GQA) and a decode step (one token) still
// fills group rows of the tile.
#pragma once
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>

namespace fovea::cuda {

struct AttentionProblem {
  const __nv_bfloat16* qkv;
  __nv_bfloat16* out;
  int64_t qkv_row;  // elements per token row of qkv
  int heads, kv_heads, head_dim, group;
  float scale_log2;  // softmax scale times log2(e): the kernels use exp2
  bool paged;
  // dense: every image has `tokens` queries and keys, non-causal; K and V come from qkv.
  int tokens;
  // dense, pipelined wgmma kernel only: the keys of the first `lead` tokens of every image are taken apart so that
  // the rest are whole key tiles (InternViT: 1,025 = 16 x 64 + the class token); they are folded into each row
  // after the tiles. 0: none apart.
  int lead = 0;
  // paged: causal; K and V come from the cache through the block table.
  const __nv_bfloat16* k_cache;
  const __nv_bfloat16* v_cache;
  const int* cu_q;
  const int* ctx_len;
  const int* block_table;
  int max_blocks_per_seq, block_size;
  int64_t num_blocks;
  // Split-KV (decode with long contexts): when num_splits > 1 the grid's x walks splits of split_keys keys
  // (one row tile only); each block leaves its rows' unnormalised output and (max, sum) in split_out /
  // split_stats, indexed [seq][kv_head][split][row < split_rows], and a combine kernel merges the splits.
  int num_splits = 1, split_keys = 0, split_rows = 0;
  float* split_out = nullptr;    // [..][head_dim]
  float* split_stats = nullptr;  // [..][2]: max (already times scale_log2, -inf if nothing seen), sum
  // (The split-KV decode kernel, attention_decode.cuh, ignores split_keys: each sequence divides its own kv_len
  // evenly over the splits.)
};

// The span of one sequence: its queries are tokens [q_begin, q_begin + q_len) of qkv; it has kv_len keys; query
// j may see keys 0..first_limit + j (non-causal: first_limit = kv_len - 1 and the limit does not grow).
struct SequenceSpan {
  int q_begin, q_len, kv_len;
  int first_limit;
  bool causal;
  __device__ int limit(int j) const { return causal ? first_limit + j : first_limit; }
};

__device__ __forceinline__ SequenceSpan sequence_span(const AttentionProblem& p, int seq) {
  SequenceSpan s;
  if (p.paged) {
    s.q_begin = p.cu_q[seq];
    s.q_len = p.cu_q[seq + 1] - s.q_begin;
    s.kv_len = p.ctx_len[seq];
    s.first_limit = s.kv_len - s.q_len;
    s.causal = true;
  } else {
    s.q_begin = seq * p.tokens;
    s.q_len = p.tokens;
    s.kv_len = p.tokens;
    s.first_limit = p.tokens - 1;
    s.causal = false;
  }
  return s;
}

__device__ __forceinline__ const __nv_bfloat16* query_ptr(const AttentionProblem& p, const SequenceSpan& s, int j,
                                                          int head) {
  return p.qkv + int64_t(s.q_begin + j) * p.qkv_row + int64_t(head) * p.head_dim;
}

__device__ __forceinline__ __nv_bfloat16* output_ptr(const AttentionProblem& p, const SequenceSpan& s, int j,
                                                     int head) {
  return p.out + int64_t(s.q_begin + j) * p.heads * p.head_dim + int64_t(head) * p.head_dim;
}

// Key (which = 0) or value (which = 1) row of key position `pos`; null when the block table points outside the
// cache (then the caller treats the row as zeros instead of reading out of bounds).
__device__ __forceinline__ const __nv_bfloat16* kv_ptr(const AttentionProblem& p, const SequenceSpan& s, int seq,
                                                       int pos, int kv_head, int which) {
  if (!p.paged) {
    const int64_t col = int64_t(p.heads + which * p.kv_heads + kv_head) * p.head_dim;
    return p.qkv + int64_t(s.q_begin + pos) * p.qkv_row + col;
  }
  const int logical_block = pos / p.block_size;
  if (logical_block >= p.max_blocks_per_seq) return nullptr;
  const int block = p.block_table[int64_t(seq) * p.max_blocks_per_seq + logical_block];
  if (block < 0 || block >= p.num_blocks) return nullptr;
  const int64_t row = int64_t(block) * p.block_size + pos % p.block_size;
  const __nv_bfloat16* cache = which ? p.v_cache : p.k_cache;
  return cache + (row * p.kv_heads + kv_head) * p.head_dim;
}

// Element offset of key position `pos`'s K row from kv_base(p, 0) — and of its V row from kv_base(p, 1) — or -1
// when the block table points outside the cache. One lookup serves both K and V.
__device__ __forceinline__ int64_t kv_row_offset(const AttentionProblem& p, const SequenceSpan& s, int seq, int pos,
                                                 int kv_head) {
  if (!p.paged) return int64_t(s.q_begin + pos) * p.qkv_row + int64_t(kv_head) * p.head_dim;
  const int logical_block = pos / p.block_size;
  if (logical_block >= p.max_blocks_per_seq) return -1;
  const int block = p.block_table[int64_t(seq) * p.max_blocks_per_seq + logical_block];
  if (block < 0 || block >= p.num_blocks) return -1;
  const int64_t row = int64_t(block) * p.block_size + pos % p.block_size;
  return (row * p.kv_heads + kv_head) * p.head_dim;
}

__device__ __forceinline__ const __nv_bfloat16* kv_base(const AttentionProblem& p, int which) {
  if (p.paged) return which ? p.v_cache : p.k_cache;
  return p.qkv + int64_t(p.heads + which * p.kv_heads) * p.head_dim;
}

}  // namespace fovea::cuda

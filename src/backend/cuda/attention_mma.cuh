// The tensor-core flash-attention kernel (mma.sync m16n8k16, bf16 in, f32 accumulate), templated on its tile
// configuration so that variants can be timed against each other (attention.cu picks one). A block holds
// kWarps * 16 query rows (see attention_common.cuh for what a row is) and walks the keys in 64-key tiles that
// are copied with cp.async kStages deep, so the next tiles load while this one is computed on.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/attention_common.cuh"

namespace fovea::cuda {

template <int kPadDim, int kNumWarps, int kNumStages, bool kFastSoftmax, int kMinBlocksPerSm = 0,
          bool kQueriesInSmem = false>
struct MmaConfig {
  static constexpr int kPad = kPadDim;  // head_dim padded up to 32, 64 or 128 with zeros
  static constexpr int kWarps = kNumWarps;
  static constexpr int kStages = kNumStages;
  static constexpr bool kFast = kFastSoftmax;  // ex2.approx, and masking only on tiles that need it
  static constexpr int kRows = 16 * kWarps;
  static constexpr int kKeys = 64;
  static constexpr int kStride = kPad + 8;  // +16 bytes per row keeps ldmatrix free of bank conflicts
  static constexpr int kThreads = kWarps * 32;
  // Blocks per multiprocessor to cap registers for (0: by default 2 for 8-warp blocks at small head dims, i.e.
  // 128 registers, else no cap).
  static constexpr int kMinBlocks = kMinBlocksPerSm ? kMinBlocksPerSm : (kWarps == 8 && kPad <= 64) ? 2 : 1;
  // Re-read the Q fragments from shared memory (ldmatrix) at every key tile instead of holding them in
  // registers: kPad / 4 fewer registers per thread, so that a lower register cap (more blocks per SM) holds.
  static constexpr bool kQInSmem = kQueriesInSmem;
  static constexpr int smem_bytes() { return (kRows + 2 * kStages * kKeys) * kStride * 2; }
};

namespace mma_detail {

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  const uint32_t addr = uint32_t(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  const uint32_t addr = uint32_t(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// 16-byte asynchronous copy global -> shared; with valid == false it writes 16 zero bytes and reads nothing
// (src_size 0); `src` then only has to be some valid address.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const uint32_t addr = uint32_t(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

template <bool kFast>
__device__ __forceinline__ float exp2_of(float x) {
  if constexpr (kFast) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));  // ex2(-inf) = +0, as the masking needs
    return y;
  } else {
    return exp2f(x);
  }
}

// The per-tile math both mma.sync kernels share (this one and attention_decode.cuh). A thread holds rows g
// (accumulator elements 0, 1) and g + 8 (elements 2, 3) of its warp's 16 rows; s[n] are the scores of the
// tile's keys n * 8 .. n * 8 + 7 (columns 2t, 2t + 1 of each), acc[d] the output dims d * 8 .. d * 8 + 7.

// S += Q·K^T over kTiles 8-key tiles for one 16-dim k-step; sK points at the step's first column of key 0.
// One ldmatrix gives the B fragments of key tiles n and n + 1.
template <int kTiles, int kStride>
__device__ __forceinline__ void qk_step(float (&s)[kTiles][4], const uint32_t (&q)[4], const __nv_bfloat16* sK,
                                        int lane) {
#pragma unroll
  for (int n = 0; n < kTiles; n += 2) {
    uint32_t k_frag[4];
    ldmatrix_x4(k_frag, sK + (n * 8 + (lane & 7) + ((lane >> 4) << 3)) * kStride + ((lane >> 3) & 1) * 8);
    mma_bf16(s[n], q, k_frag[0], k_frag[1]);
    mma_bf16(s[n + 1], q, k_frag[2], k_frag[3]);
  }
}

// Scores of keys past a row's last visible key (key_limit) become -inf; key0 is the tile's first key.
template <int kTiles>
__device__ __forceinline__ void mask_scores(float (&s)[kTiles][4], int key0, int t, const int (&key_limit)[2]) {
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (key0 + n * 8 + 2 * t + (e & 1) > key_limit[e / 2]) s[n][e] = -INFINITY;
  }
}

// Writes this thread's columns of row h (0: g, 1: g + 8) of the accumulators, times inv, as bf16.
template <int kDimTiles>
__device__ __forceinline__ void store_output_row(__nv_bfloat16* out, const float (&acc)[kDimTiles][4], int h,
                                                 float inv, int t, int head_dim) {
#pragma unroll
  for (int d = 0; d < kDimTiles; ++d) {
    const int col = d * 8 + 2 * t;
    if (col < head_dim)
      *reinterpret_cast<__nv_bfloat162*>(out + col) = __floats2bfloat162_rn(acc[d][2 * h] * inv, acc[d][2 * h + 1] * inv);
  }
}

// Online softmax over one tile, first half: raises the running max (in score units) by the tile's, turns the
// scores into weights 2^(score * scale_log2 - max * scale_log2), rescales the running sums (this thread's
// columns only) and returns in `correction` the factor the output accumulators must be rescaled by. The
// pipelined wgmma kernel applies it later, once the previous tile's P·V has landed in the accumulators.
template <bool kFast, int kTiles>
__device__ __forceinline__ void softmax_weights(float (&s)[kTiles][4], float (&row_max)[2], float (&row_sum)[2],
                                                float scale_log2, float (&correction)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int n = 0; n < kTiles; ++n) tile_max = fmaxf(tile_max, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float new_max = fmaxf(row_max[h], tile_max);
    // A row with nothing visible yet keeps max -inf; use 0 as its base so exp2 gives 0, not NaN.
    const float base = new_max == -INFINITY ? 0.f : new_max * scale_log2;
    correction[h] = row_max[h] == -INFINITY ? 0.f : exp2_of<kFast>(row_max[h] * scale_log2 - base);
    row_max[h] = new_max;
    row_sum[h] *= correction[h];
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
      s[n][2 * h] = exp2_of<kFast>(fmaf(s[n][2 * h], scale_log2, -base));
      s[n][2 * h + 1] = exp2_of<kFast>(fmaf(s[n][2 * h + 1], scale_log2, -base));
      row_sum[h] += s[n][2 * h] + s[n][2 * h + 1];
    }
  }
}

// Second half: the output accumulators follow the running max.
template <int kDimTiles>
__device__ __forceinline__ void rescale_output(float (&acc)[kDimTiles][4], const float (&correction)[2]) {
#pragma unroll
  for (int d = 0; d < kDimTiles; ++d) {
    acc[d][0] *= correction[0];
    acc[d][1] *= correction[0];
    acc[d][2] *= correction[1];
    acc[d][3] *= correction[1];
  }
}

// Both halves at once, for kernels whose accumulators are not in flight.
template <bool kFast, int kTiles, int kDimTiles>
__device__ __forceinline__ void online_softmax(float (&s)[kTiles][4], float (&acc)[kDimTiles][4], float (&row_max)[2],
                                               float (&row_sum)[2], float scale_log2) {
  float correction[2];
  softmax_weights<kFast>(s, row_max, row_sum, scale_log2, correction);
  rescale_output(acc, correction);
}

// O += P·V over the tile's kTiles / 2 16-key k-steps; sV points at key 0's row. The S accumulators of key tiles
// 2k and 2k + 1 are exactly the A fragment of k-step k.
template <int kTiles, int kDimTiles, int kStride>
__device__ __forceinline__ void accumulate_pv(float (&acc)[kDimTiles][4], const float (&s)[kTiles][4],
                                              const __nv_bfloat16* sV, int lane) {
#pragma unroll
  for (int k = 0; k < kTiles / 2; ++k) {
    const uint32_t p_frag[4] = {pack_bf16(s[2 * k][0], s[2 * k][1]), pack_bf16(s[2 * k][2], s[2 * k][3]),
                                pack_bf16(s[2 * k + 1][0], s[2 * k + 1][1]),
                                pack_bf16(s[2 * k + 1][2], s[2 * k + 1][3])};
#pragma unroll
    for (int d = 0; d < kDimTiles; d += 2) {
      uint32_t v_frag[4];
      ldmatrix_x4_trans(v_frag, sV + (k * 16 + (lane & 15)) * kStride + d * 8 + (lane >> 4) * 8);
      mma_bf16(acc[d], p_frag, v_frag[0], v_frag[1]);
      mma_bf16(acc[d + 1], p_frag, v_frag[2], v_frag[3]);
    }
  }
}

// Starts copying the block's query rows into sQ. Padding rows and columns past head_dim become zeros (padded
// dims must add nothing to Q·K).
template <class C>
__device__ __forceinline__ void load_queries(__nv_bfloat16* sQ, const AttentionProblem& p, const SequenceSpan& span,
                                             int row0, int kv_head) {
  constexpr int kChunks = C::kPad / 8;
#pragma unroll
  for (int i = 0; i < C::kRows * kChunks / C::kThreads; ++i) {
    const int chunk = threadIdx.x + i * C::kThreads;
    const int row = chunk / kChunks, col = (chunk % kChunks) * 8;
    const int token = (row0 + row) / p.group;
    const bool valid = col < p.head_dim && token < span.q_len;
    const __nv_bfloat16* src =
        valid ? query_ptr(p, span, token, kv_head * p.group + (row0 + row) % p.group) + col : p.qkv;
    cp_async16(sQ + row * C::kStride + col, src, valid);
  }
}

// Starts copying the K and V rows of keys [key0, key0 + 64) into one stage. Keys at or past kv_end, rows the
// block table cannot name, and columns past head_dim become zeros (masked V rows must not be NaN garbage).
template <class C>
__device__ __forceinline__ void load_keys(__nv_bfloat16* sK, __nv_bfloat16* sV, const AttentionProblem& p,
                                          const SequenceSpan& span, int seq, int kv_head, int key0, int kv_end) {
  constexpr int kChunks = C::kPad / 8;
  const __nv_bfloat16* k_base = kv_base(p, 0);
  const __nv_bfloat16* v_base = kv_base(p, 1);
#pragma unroll
  for (int i = 0; i < C::kKeys * kChunks / C::kThreads; ++i) {
    const int chunk = threadIdx.x + i * C::kThreads;
    const int row = chunk / kChunks, col = (chunk % kChunks) * 8;
    const int pos = key0 + row;
    const int64_t offset = col < p.head_dim && pos < kv_end ? kv_row_offset(p, span, seq, pos, kv_head) : -1;
    const bool valid = offset >= 0;
    cp_async16(sK + row * C::kStride + col, valid ? k_base + offset + col : p.qkv, valid);
    cp_async16(sV + row * C::kStride + col, valid ? v_base + offset + col : p.qkv, valid);
  }
}

}  // namespace mma_detail

template <class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks) flash_attention_mma(AttentionProblem p) {
  using namespace mma_detail;
  constexpr int kStride = C::kStride, kSteps = C::kPad / 16, kKeyTiles = C::kKeys / 8, kDimTiles = C::kPad / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  auto stage_k = [&](int tile) { return sQ + (C::kRows + 2 * (tile % C::kStages) * C::kKeys) * kStride; };
  auto stage_v = [&](int tile) { return stage_k(tile) + C::kKeys * kStride; };

  const int seq = blockIdx.z, kv_head = blockIdx.y;
  const SequenceSpan span = sequence_span(p, seq);
  const bool split_mode = p.num_splits > 1;
  const int split = split_mode ? int(blockIdx.x) : 0;
  // Causal blocks late in a sequence see the most keys: schedule them first so the grid's tail is short.
  const int row_tile = split_mode ? 0 : p.paged ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int row0 = row_tile * C::kRows;
  if (row0 / p.group >= span.q_len) return;  // whole block past this sequence's queries (uniform exit)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int last_token = min(span.q_len - 1, (row0 + C::kRows - 1) / p.group);
  int kv_end = min(span.kv_len, span.limit(last_token) + 1);
  int first_tile = 0;
  if (split_mode) {  // split_keys is a multiple of kKeys
    first_tile = split * p.split_keys / C::kKeys;
    kv_end = min(kv_end, (split + 1) * p.split_keys);
  }
  const int end_tile = max(first_tile, (kv_end + C::kKeys - 1) / C::kKeys);

  // Pipeline: group 0 = Q, group 1 + i = key tile i; every loop step commits one group (possibly empty), so
  // "wait until at most kStages - 1 groups are pending" always means "tile `tile` has landed".
  load_queries<C>(sQ, p, span, row0, kv_head);
  cp_async_commit();
#pragma unroll
  for (int i = 0; i < C::kStages - 1; ++i) {
    const int tile = first_tile + i;
    if (tile < end_tile) load_keys<C>(stage_k(tile), stage_v(tile), p, span, seq, kv_head, tile * C::kKeys, kv_end);
    cp_async_commit();
  }
  cp_async_wait<C::kStages - 1>();  // Q has landed
  __syncthreads();

  // This thread's two rows (g and g + 8 of its warp's 16) and the last key each may see (-1: padding row).
  const int my_row[2] = {row0 + warp * 16 + g, row0 + warp * 16 + g + 8};
  int key_limit[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int token = my_row[h] / p.group;
    key_limit[h] = token < span.q_len ? min(span.limit(token), span.kv_len - 1) : -1;
  }
  const bool warp_active = (row0 + warp * 16) / p.group < span.q_len;
  const int warp_key_limit = min(span.kv_len - 1, span.limit(min(span.q_len - 1, (row0 + warp * 16 + 15) / p.group)));
  // Tiles wholly below every row's limit need no mask.
  int warp_min_limit = min(key_limit[0], key_limit[1]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) warp_min_limit = min(warp_min_limit, __shfl_xor_sync(0xffffffffu, warp_min_limit, o));

  uint32_t q_frag[C::kQInSmem ? 1 : kSteps][4];
#pragma unroll
  for (int k = 0; k < (C::kQInSmem ? 0 : kSteps); ++k) {
    const __nv_bfloat16* base = sQ + (warp * 16 + g) * kStride + k * 16 + 2 * t;
    q_frag[k][0] = *reinterpret_cast<const uint32_t*>(base);
    q_frag[k][1] = *reinterpret_cast<const uint32_t*>(base + 8 * kStride);
    q_frag[k][2] = *reinterpret_cast<const uint32_t*>(base + 8);
    q_frag[k][3] = *reinterpret_cast<const uint32_t*>(base + 8 * kStride + 8);
  }

  float acc[kDimTiles][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

  for (int tile = first_tile; tile < end_tile; ++tile) {
    const int ahead = tile + C::kStages - 1;
    if (ahead < end_tile) load_keys<C>(stage_k(ahead), stage_v(ahead), p, span, seq, kv_head, ahead * C::kKeys, kv_end);
    cp_async_commit();
    cp_async_wait<C::kStages - 1>();
    __syncthreads();  // tile `tile` is visible to every warp
    const int key0 = tile * C::kKeys;
    const __nv_bfloat16* sK = stage_k(tile);
    const __nv_bfloat16* sV = stage_v(tile);
    // Warps with nothing visible in this tile (padding rows, causal future) skip the math but keep the
    // barriers: the condition is warp-uniform, not block-uniform.
    if (warp_active && key0 <= warp_key_limit) {
      float s[kKeyTiles][4] = {};
#pragma unroll
      for (int k = 0; k < kSteps; ++k) {
        uint32_t q_use[4];
        if constexpr (C::kQInSmem) {  // A fragment: matrices (rows 0-7 | 8-15) x (cols 0-7 | 8-15) of the k-step
          ldmatrix_x4(q_use, sQ + (warp * 16 + (lane & 15)) * kStride + k * 16 + (lane >> 4) * 8);
        } else {
#pragma unroll
          for (int i = 0; i < 4; ++i) q_use[i] = q_frag[k][i];
        }
        qk_step<kKeyTiles, kStride>(s, q_use, sK + k * 16, lane);
      }
      const bool needs_mask = !C::kFast || key0 + C::kKeys - 1 > warp_min_limit;
      if (needs_mask) mask_scores(s, key0, t, key_limit);
      online_softmax<C::kFast>(s, acc, row_max, row_sum, p.scale_log2);
      accumulate_pv<kKeyTiles, kDimTiles, kStride>(acc, s, sV, lane);
    }
    __syncthreads();  // everyone is done with this stage before a later step refills it
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
    const int token = my_row[h] / p.group;
    if (token >= span.q_len) continue;
    if (split_mode) {
      const int local_row = my_row[h] - row0;  // < split_rows, since token < q_len <= max_q_len
      const int64_t slot = ((int64_t(seq) * p.kv_heads + kv_head) * p.num_splits + split) * p.split_rows + local_row;
      if (t == 0) {
        p.split_stats[2 * slot] = row_max[h] == -INFINITY ? -INFINITY : row_max[h] * p.scale_log2;
        p.split_stats[2 * slot + 1] = row_sum[h];
      }
      float* dst = p.split_out + slot * p.head_dim;
#pragma unroll
      for (int d = 0; d < kDimTiles; ++d) {
        const int col = d * 8 + 2 * t;
        if (col < p.head_dim) *reinterpret_cast<float2*>(dst + col) = make_float2(acc[d][2 * h], acc[d][2 * h + 1]);
      }
      continue;
    }
    const float inv = row_sum[h] > 0.f ? 1.f / row_sum[h] : 0.f;
    store_output_row(output_ptr(p, span, token, kv_head * p.group + my_row[h] % p.group), acc, h, inv, t, p.head_dim);
  }
}

}  // namespace fovea::cuda

// Flash attention for both layouts (see attention_common.cuh): online softmax over 64-key tiles, no score
// matrix in memory. The tensor-core kernel (mma.sync m16n8k16, bf16 in, f32 accumulate) serves head dims up
// to 128, padded to 32, 64 or 128 with zeros, with K/V tiles double-buffered through cp.async; a SIMT kernel (one warp per query row) serves head dims up to 256.
#include <cmath>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/kernels.h"

namespace fovea::cuda {
namespace {

constexpr int kTileRows = 64;  // query rows per block: 4 warps x 16
constexpr int kTileKeys = 64;  // keys per step
constexpr int kWarps = 4;

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
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

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  const uint32_t addr = uint32_t(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// 16-byte asynchronous copy global -> shared; with valid == false it writes 16 zero bytes and reads nothing
// (src_size 0), `src` then only has to be some valid address.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const uint32_t addr = uint32_t(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Starts copying a 64-row tile of head_dim-long rows into shared memory (row stride kPad + 8 elements, which
// keeps ldmatrix free of bank conflicts). Rows for which row_ptr returns null and columns past head_dim become
// zeros: padded dims must add nothing to Q·K, and masked V rows must not be NaN garbage.
template <int kPad, typename RowPtr>
__device__ __forceinline__ void load_tile_async(__nv_bfloat16* tile, int head_dim, const void* any_valid,
                                                RowPtr row_ptr) {
  constexpr int kStride = kPad + 8, kChunks = kPad / 8;
  constexpr int kPerThread = kTileRows * kChunks / (kWarps * 32);
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int chunk = threadIdx.x + i * kWarps * 32;
    const int row = chunk / kChunks, col = (chunk % kChunks) * 8;
    const __nv_bfloat16* src = col < head_dim ? row_ptr(row) : nullptr;
    cp_async16(tile + row * kStride + col, src ? src + col : any_valid, src != nullptr);
  }
}

template <int kPad>
__global__ void __launch_bounds__(kWarps * 32) flash_attention_mma(AttentionProblem p) {
  constexpr int kStride = kPad + 8, kSteps = kPad / 16, kKeyTiles = kTileKeys / 8, kDimTiles = kPad / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // Q tile, then two stages of (K tile, V tile): the next tile's copy runs while this one is computed on.
  __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  auto stage_k = [&](int stage) { return sQ + (kTileRows + 2 * stage * kTileKeys) * kStride; };
  auto stage_v = [&](int stage) { return stage_k(stage) + kTileKeys * kStride; };

  const int seq = blockIdx.z, kv_head = blockIdx.y;
  const SequenceSpan span = sequence_span(p, seq);
  // Causal blocks late in a sequence see the most keys: schedule them first so the grid's tail is short.
  const int row_tile = p.paged ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int row0 = row_tile * kTileRows;
  if (row0 / p.group >= span.q_len) return;  // whole block past this sequence's queries (uniform exit)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int last_token = min(span.q_len - 1, (row0 + kTileRows - 1) / p.group);
  const int kv_end = min(span.kv_len, span.limit(last_token) + 1);

  load_tile_async<kPad>(sQ, p.head_dim, p.qkv, [&](int r) -> const __nv_bfloat16* {
    const int token = (row0 + r) / p.group;
    if (token >= span.q_len) return nullptr;
    return query_ptr(p, span, token, kv_head * p.group + (row0 + r) % p.group);
  });
  cp_async_commit();
  auto issue_kv = [&](int tile) {
    const int key0 = tile * kTileKeys;
    for (int which = 0; which < 2; ++which) {
      load_tile_async<kPad>(which ? stage_v(tile & 1) : stage_k(tile & 1), p.head_dim, p.qkv,
                            [&](int r) -> const __nv_bfloat16* {
                              const int pos = key0 + r;
                              return pos < kv_end ? kv_ptr(p, span, seq, pos, kv_head, which) : nullptr;
                            });
    }
  };
  const int num_tiles = (kv_end + kTileKeys - 1) / kTileKeys;
  if (num_tiles > 0) issue_kv(0);
  cp_async_commit();
  cp_async_wait<1>();  // Q has landed; tile 0 may still be in flight
  __syncthreads();

  // This thread's two rows (g and g + 8 of its warp's 16) and the last key each may see (-1: padding row).
  const int my_row[2] = {row0 + warp * 16 + g, row0 + warp * 16 + g + 8};
  int key_limit[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int token = my_row[h] / p.group;
    key_limit[h] = token < span.q_len ? min(span.limit(token), span.kv_len - 1) : -1;
  }
  const int warp_first_token = (row0 + warp * 16) / p.group;
  const bool warp_active = warp_first_token < span.q_len;
  const int warp_key_limit = min(span.kv_len - 1, span.limit(min(span.q_len - 1, (row0 + warp * 16 + 15) / p.group)));

  uint32_t q_frag[kSteps][4];
#pragma unroll
  for (int k = 0; k < kSteps; ++k) {
    const __nv_bfloat16* base = sQ + (warp * 16 + g) * kStride + k * 16 + 2 * t;
    q_frag[k][0] = *reinterpret_cast<const uint32_t*>(base);
    q_frag[k][1] = *reinterpret_cast<const uint32_t*>(base + 8 * kStride);
    q_frag[k][2] = *reinterpret_cast<const uint32_t*>(base + 8);
    q_frag[k][3] = *reinterpret_cast<const uint32_t*>(base + 8 * kStride + 8);
  }

  float acc[kDimTiles][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

  for (int tile = 0; tile < num_tiles; ++tile) {
    if (tile + 1 < num_tiles) issue_kv(tile + 1);
    cp_async_commit();  // possibly empty, so that wait<1> always means "all but the newest group"
    cp_async_wait<1>();
    __syncthreads();  // tile `tile` is visible to every warp
    const int key0 = tile * kTileKeys;
    const __nv_bfloat16* sK = stage_k(tile & 1);
    const __nv_bfloat16* sV = stage_v(tile & 1);
    // Warps with nothing visible in this tile (padding rows, causal future) skip the math but keep the
    // barriers: the condition is warp-uniform, not block-uniform.
    if (warp_active && key0 <= warp_key_limit) {
      float s[kKeyTiles][4] = {};
#pragma unroll
      for (int k = 0; k < kSteps; ++k) {
#pragma unroll
        for (int n = 0; n < kKeyTiles; n += 2) {
          // One ldmatrix gives the B fragments of key tiles n and n + 1 for this k-step.
          uint32_t k_frag[4];
          ldmatrix_x4(k_frag, sK + (n * 8 + (lane & 7) + ((lane >> 4) << 3)) * kStride + k * 16 + ((lane >> 3) & 1) * 8);
          mma_bf16(s[n], q_frag[k], k_frag[0], k_frag[1]);
          mma_bf16(s[n + 1], q_frag[k], k_frag[2], k_frag[3]);
        }
      }
      // Mask, then the online-softmax update for rows g (h = 0) and g + 8 (h = 1).
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2, key = key0 + n * 8 + 2 * t + (e & 1);
          if (key > key_limit[h]) s[n][e] = -INFINITY;
          tile_max[h] = fmaxf(tile_max[h], s[n][e]);
        }
      }
      float correction[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
        const float new_max = fmaxf(row_max[h], tile_max[h]);
        // A row with nothing visible yet keeps max -inf; use 0 as its base so exp2 gives 0, not NaN.
        const float base = new_max == -INFINITY ? 0.f : new_max * p.scale_log2;
        correction[h] = row_max[h] == -INFINITY ? 0.f : exp2f(row_max[h] * p.scale_log2 - base);
        row_max[h] = new_max;
        row_sum[h] *= correction[h];
#pragma unroll
        for (int n = 0; n < kKeyTiles; ++n) {
          s[n][2 * h] = exp2f(s[n][2 * h] * p.scale_log2 - base);
          s[n][2 * h + 1] = exp2f(s[n][2 * h + 1] * p.scale_log2 - base);
          row_sum[h] += s[n][2 * h] + s[n][2 * h + 1];
        }
      }
#pragma unroll
      for (int d = 0; d < kDimTiles; ++d) {
        acc[d][0] *= correction[0];
        acc[d][1] *= correction[0];
        acc[d][2] *= correction[1];
        acc[d][3] *= correction[1];
      }
      // O += P·V: the S accumulators of key tiles 2k and 2k+1 are exactly the A fragment of k-step k.
#pragma unroll
      for (int k = 0; k < kTileKeys / 16; ++k) {
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
    __syncthreads();  // everyone is done with this stage before the next iteration refills it
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
    const int token = my_row[h] / p.group;
    if (token >= span.q_len) continue;
    const float inv = row_sum[h] > 0.f ? 1.f / row_sum[h] : 0.f;
    __nv_bfloat16* out = output_ptr(p, span, token, kv_head * p.group + my_row[h] % p.group);
#pragma unroll
    for (int d = 0; d < kDimTiles; ++d) {
      const int col = d * 8 + 2 * t;
      if (col < p.head_dim)
        *reinterpret_cast<__nv_bfloat162*>(out + col) =
            __floats2bfloat162_rn(acc[d][2 * h] * inv, acc[d][2 * h + 1] * inv);
    }
  }
}

// Generic path: one warp per (query token, q head); lane l owns dims [8l, 8l + 8). Any head_dim <= 256 that is
// a multiple of 8. Slow (no data reuse across rows) but simple, and it checks the fast path's indexing.
__global__ void flash_attention_simt(AttentionProblem p, int rows_per_seq) {
  const int warp_global = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  const int seq = blockIdx.y;
  if (warp_global >= rows_per_seq) return;
  const SequenceSpan span = sequence_span(p, seq);
  const int token = warp_global / p.heads, head = warp_global % p.heads;
  if (token >= span.q_len) return;
  const int kv_head = head / p.group;
  const bool owns = lane * 8 < p.head_dim;
  float q[8] = {}, acc[8] = {};
  if (owns) load_bf16<8>(query_ptr(p, span, token, head) + lane * 8, q);
  const int limit = min(span.limit(token), span.kv_len - 1);
  float row_max = -INFINITY, row_sum = 0.f;
  for (int pos = 0; pos <= limit; ++pos) {
    const __nv_bfloat16* k_row = kv_ptr(p, span, seq, pos, kv_head, 0);
    const __nv_bfloat16* v_row = kv_ptr(p, span, seq, pos, kv_head, 1);
    float k[8] = {}, v[8] = {};
    if (owns && k_row) load_bf16<8>(k_row + lane * 8, k);
    if (owns && v_row) load_bf16<8>(v_row + lane * 8, v);
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) dot += q[i] * k[i];
    const float score = warp_sum(dot) * p.scale_log2;
    const float new_max = fmaxf(row_max, score);
    const float correction = exp2f(row_max - new_max), weight = exp2f(score - new_max);
    row_sum = row_sum * correction + weight;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = acc[i] * correction + weight * v[i];
    row_max = new_max;
  }
  if (!owns) return;
  const float inv = row_sum > 0.f ? 1.f / row_sum : 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] *= inv;
  store_bf16<8>(output_ptr(p, span, token, head) + lane * 8, acc);
}

template <int kPad>
constexpr int mma_smem_bytes() {
  return (kTileRows + 4 * kTileKeys) * (kPad + 8) * 2;  // Q + 2 stages of K and V
}

template <int kPad>
void set_smem_limit() {
  FOVEA_CUDA_CHECK(cudaFuncSetAttribute(flash_attention_mma<kPad>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        mma_smem_bytes<kPad>()));
}

template <int kPad>
void launch_mma(const AttentionProblem& p, int num_seqs, int max_q_len, cudaStream_t stream) {
  const int row_tiles = int((int64_t(max_q_len) * p.group + kTileRows - 1) / kTileRows);
  const dim3 grid(row_tiles, p.kv_heads, num_seqs);
  flash_attention_mma<kPad><<<grid, kWarps * 32, mma_smem_bytes<kPad>(), stream>>>(p);
  FOVEA_CUDA_CHECK_LAUNCH();
}

void launch(const AttentionProblem& p, int num_seqs, int max_q_len, cudaStream_t stream) {
  if (num_seqs == 0 || max_q_len == 0) return;
  if (p.head_dim <= 32) return launch_mma<32>(p, num_seqs, max_q_len, stream);
  if (p.head_dim <= 64) return launch_mma<64>(p, num_seqs, max_q_len, stream);
  if (p.head_dim <= 128) return launch_mma<128>(p, num_seqs, max_q_len, stream);
  const int rows_per_seq = max_q_len * p.heads, threads = 128;
  const dim3 grid(blocks_for(int64_t(rows_per_seq) * 32, threads), num_seqs);
  flash_attention_simt<<<grid, threads, 0, stream>>>(p, rows_per_seq);
  FOVEA_CUDA_CHECK_LAUNCH();
}

AttentionProblem base_problem(const bf16* qkv, bf16* out, int heads, int kv_heads, int head_dim) {
  AttentionProblem p{};
  p.qkv = qkv;
  p.out = out;
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.head_dim = head_dim;
  p.group = heads / kv_heads;
  p.qkv_row = int64_t(heads + 2 * kv_heads) * head_dim;
  p.scale_log2 = float(1.0 / std::sqrt(double(head_dim)) * 1.4426950408889634);
  return p;
}

}  // namespace

void prepare_attention_kernels() {
  set_smem_limit<32>();
  set_smem_limit<64>();
  set_smem_limit<128>();
}

void launch_attention_dense(const DenseAttentionArgs& a, cudaStream_t stream) {
  AttentionProblem p = base_problem(a.qkv, a.out, a.heads, a.heads, a.head_dim);
  p.paged = false;
  p.tokens = a.tokens;
  launch(p, a.batch, a.tokens, stream);
}

void launch_paged_attention(const PagedAttentionArgs& a, cudaStream_t stream) {
  AttentionProblem p = base_problem(a.qkv, a.out, a.heads, a.kv_heads, a.head_dim);
  p.paged = true;
  p.k_cache = a.k_cache;
  p.v_cache = a.v_cache;
  p.cu_q = a.cu_q;
  p.ctx_len = a.ctx_len;
  p.block_table = a.block_table;
  p.max_blocks_per_seq = a.max_blocks_per_seq;
  p.block_size = a.block_size;
  p.num_blocks = a.num_blocks;
  launch(p, a.num_seqs, a.max_q_len, stream);
}

}  // namespace fovea::cuda

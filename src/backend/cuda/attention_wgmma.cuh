// Hopper (sm_90a) flash attention on warpgroup MMA (wgmma): the same problem and row mapping as the mma.sync
// kernel (attention_common.cuh), for dense (ViT) and non-split paged (prefill) steps.
//
// A block holds kGroups warpgroups of 64 query rows each. K/V tiles of kKeys keys land in shared memory kStages
// deep, in the 128-byte-swizzled layout wgmma reads directly: row r (a query or a key) of 64 bf16 = 128 bytes,
// its 16-byte chunk c stored at chunk c ^ (r % 8); a 128-wide head dim is two such column blocks one after the
// other. Every thread issues 16-byte cp.async copies (the pipelined kernel, attention_wgmma_pipelined.cuh, has
// the tensor memory accelerator copy them: copy_stage below).
// Per key tile each warpgroup issues S = Q·K^T (A and B from shared memory, K-major) and, after the online
// softmax in registers, O += P·V with P from registers (its accumulator layout is exactly the A-fragment layout)
// and V from shared memory read N-major (transposed B). The S and O accumulators are the mma.sync m16n8
// fragments of each warp's 16 rows, so the softmax is the mma.sync kernel's. One __syncthreads per tile frees
// the stage the next copy goes to.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/attention_mma.cuh"

namespace fovea::cuda {

// What both wgmma kernels' configurations share: the tile shapes and their shared-memory bytes.
template <int kPadDim, int kNumGroups, int kKeyTile, int kNumStages>
struct WgmmaTiles {
  static_assert(kPadDim == 64 || kPadDim == 128, "head dim padded to 64 or 128");
  static_assert(kKeyTile == 64 || kKeyTile == 128, "64- or 128-key tiles");
  static_assert(kNumStages >= 2, "at least double buffering");
  static constexpr int kPad = kPadDim;
  static constexpr int kGroups = kNumGroups;
  static constexpr int kRows = 64 * kNumGroups;
  static constexpr int kKeys = kKeyTile;
  static constexpr int kStages = kNumStages;
  static constexpr int kChunks = kPad / 8;  // 16-byte chunks per row
  static constexpr int kQBytes = kRows * kPad * 2;
  static constexpr int kTileBytes = kKeys * kPad * 2;  // K or V of one stage
  // Q, K and V of every stage, the mbarriers, and 1024 bytes to round the dynamic shared-memory base up to the
  // 1024-byte swizzle-atom boundary.
  static constexpr int smem_bytes_with(int barrier_bytes) {
    return kQBytes + 2 * kStages * kTileBytes + barrier_bytes + 1024;
  }
};

template <int kPadDim, int kNumGroups, int kKeyTile, int kNumStages>
struct WgmmaConfig : WgmmaTiles<kPadDim, kNumGroups, kKeyTile, kNumStages> {
  static constexpr bool kTma = false;        // K/V by cp.async (no tensor maps to make)
  static constexpr bool kPipelined = false;  // flash_attention_wgmma (WgmmaPipeConfig: the pipelined kernel)
  static constexpr int kThreads = 128 * kNumGroups;
  static constexpr int smem_bytes() { return WgmmaConfig::smem_bytes_with(0); }
};

namespace wgmma_detail {

// Byte offset of 16-byte chunk c of row r in a swizzled tile of `rows` rows (see the file comment).
__device__ __forceinline__ uint32_t swizzled(int rows, int r, int c) {
  return uint32_t((c >> 3) * rows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride byte offsets (>> 4).
__device__ __forceinline__ uint64_t descriptor(uint32_t addr, uint32_t leading, uint32_t stride) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t((leading >> 4) & 0x3FFF) << 16) |
         (uint64_t((stride >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// cp.async writes are generic-proxy writes; wgmma reads through the async proxy.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Keeps the compiler from moving accesses of accumulator registers across wgmma issue and wait.
template <int N>
__device__ __forceinline__ void pin(float (&d)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}

// d (64 x N, f32; [N / 8][4]: the m16n8 fragments of each warp's 16 rows) = or += A (64 x 16, smem, K-major)
// · B (16 x N, smem, K-major). The wrappers below are generated (one operand per accumulator register).
template <int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], uint64_t desc_a, uint64_t desc_b, int accumulate);
// d (64 x N, f32) += A (64 x 16, registers) · B (16 x N, smem, N-major).
template <int N>
__device__ __forceinline__ void wgmma_rs_tb(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t desc_b);

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <>
__device__ __forceinline__ void wgmma_ss<64>(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_rs_tb<64>(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

template <>
__device__ __forceinline__ void wgmma_ss<128>(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_rs_tb<128>(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

__device__ __forceinline__ void barrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// The arrival of this phase, announcing `bytes` of copies that will complete on the barrier.
__device__ __forceinline__ void barrier_expect(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void barrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// Box (x = column, y = row) of a 2-D tensor map into shared memory, 128-byte swizzled by the map.
__device__ __forceinline__ void tensor_copy(uint32_t dst, const CUtensorMap& map, int x, int y, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

// Starts copying rows [0, rows) of a tile into swizzled shared memory; `src_of(row)` gives the row's source (null:
// zeros). Columns past head_dim become zeros.
template <class C, class SrcOf>
__device__ __forceinline__ void load_tile(unsigned char* dst, int rows, const AttentionProblem& p, SrcOf src_of) {
  for (int chunk = threadIdx.x; chunk < rows * C::kChunks; chunk += C::kThreads) {
    const int row = chunk / C::kChunks, c = chunk % C::kChunks;
    const __nv_bfloat16* src = c * 8 < p.head_dim ? src_of(row) : nullptr;
    mma_detail::cp_async16(dst + swizzled(rows, row, c), src ? src + c * 8 : p.qkv, src != nullptr);
  }
}

}  // namespace wgmma_detail

namespace wgmma_detail {

// Per-thread softmax state of its two rows (g and g + 8 of its warp's 16).
struct RowState {
  float max[2] = {-INFINITY, -INFINITY}, sum[2] = {0.f, 0.f};
  int key_limit[2];  // last key each row may see (-1: padding row)
  int warp_min_limit;  // tiles wholly at or below it need no mask
};

// The state of this thread's rows my_row[0..1] (query rows of the block's numbering).
__device__ __forceinline__ RowState make_row_state(const AttentionProblem& p, const SequenceSpan& span,
                                                   const int (&my_row)[2]) {
  RowState st;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int token = my_row[h] / p.group;
    st.key_limit[h] = token < span.q_len ? min(span.limit(token), span.kv_len - 1) : -1;
  }
  st.warp_min_limit = min(st.key_limit[0], st.key_limit[1]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    st.warp_min_limit = min(st.warp_min_limit, __shfl_xor_sync(0xffffffffu, st.warp_min_limit, o));
  return st;
}

// Warpgroup-uniform: the key tiles its 64 rows from group_row0 on may see are a prefix [0, result) of the
// block's end_tile tiles (0 when it holds only padding rows); tile i starts at key lead + i * keys_per_tile.
__device__ __forceinline__ int visible_tiles(const AttentionProblem& p, const SequenceSpan& span, int group_row0,
                                             int end_tile, int keys_per_tile, int lead = 0) {
  if (group_row0 / p.group >= span.q_len) return 0;
  const int group_key_limit = min(span.kv_len - 1, span.limit(min(span.q_len - 1, (group_row0 + 63) / p.group)));
  return min(end_tile, max(0, (group_key_limit - lead) / keys_per_tile + 1));
}

// Normalises this thread's two rows by their softmax sums and writes them as bf16.
template <int kDimTiles>
__device__ __forceinline__ void store_rows(const AttentionProblem& p, const SequenceSpan& span, RowState& st,
                                           const float (&acc)[kDimTiles][4], const int (&my_row)[2], int kv_head,
                                           int t) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    st.sum[h] += __shfl_xor_sync(0xffffffffu, st.sum[h], 1);
    st.sum[h] += __shfl_xor_sync(0xffffffffu, st.sum[h], 2);
    const int token = my_row[h] / p.group;
    if (token >= span.q_len) continue;
    const float inv = st.sum[h] > 0.f ? 1.f / st.sum[h] : 0.f;
    mma_detail::store_output_row(output_ptr(p, span, token, kv_head * p.group + my_row[h] % p.group), acc, h, inv,
                                 t, p.head_dim);
  }
}

// Issues S = Q·K^T for one key tile (asynchronously; the caller waits).
template <class C>
__device__ __forceinline__ void issue_scores(float (&s)[C::kKeys / 8][4], uint32_t q_addr, uint32_t k_addr) {
  pin(s);
  fence();
#pragma unroll
  for (int k = 0; k < C::kPad / 16; ++k) {
    const uint32_t column = uint32_t(k / 4), within = uint32_t(k % 4) * 32;
    wgmma_ss<C::kKeys>(s, descriptor(q_addr + column * C::kRows * 128 + within, 16, 1024),
                       descriptor(k_addr + column * C::kKeys * 128 + within, 16, 1024), k > 0);
  }
  commit();
}

// S's accumulators of key columns 16k..16k+15 are the A fragment of P·V's k-step k.
template <int kKeys>
__device__ __forceinline__ void pack_weights(uint32_t (&p)[kKeys / 16][4], const float (&s)[kKeys / 8][4]) {
#pragma unroll
  for (int k = 0; k < kKeys / 16; ++k) {
    p[k][0] = mma_detail::pack_bf16(s[2 * k][0], s[2 * k][1]);
    p[k][1] = mma_detail::pack_bf16(s[2 * k][2], s[2 * k][3]);
    p[k][2] = mma_detail::pack_bf16(s[2 * k + 1][0], s[2 * k + 1][1]);
    p[k][3] = mma_detail::pack_bf16(s[2 * k + 1][2], s[2 * k + 1][3]);
  }
}

// Issues O += P·V with P packed; P's registers must stay untouched until the group completes. All fragments are
// packed before the fence, so that no register feeding a queued wgmma changes between issues (else the compiler
// has to insert a warpgroup.arrive before each one).
template <class C>
__device__ __forceinline__ void issue_packed_values(float (&acc)[C::kPad / 8][4], const uint32_t (&p)[C::kKeys / 16][4],
                                                    uint32_t v_addr) {
  pin(acc);
  fence();
#pragma unroll
  for (int k = 0; k < C::kKeys / 16; ++k)
    wgmma_rs_tb<C::kPad>(acc, p[k], descriptor(v_addr + uint32_t(k) * 16 * 128, C::kKeys * 128, 1024));
  commit();
}

// Issues O += P·V for one key tile, P taken from S's accumulators.
template <class C>
__device__ __forceinline__ void issue_values(float (&acc)[C::kPad / 8][4], const float (&s)[C::kKeys / 8][4],
                                             uint32_t v_addr) {
  uint32_t p_frag[C::kKeys / 16][4];
  pack_weights<C::kKeys>(p_frag, s);
  issue_packed_values<C>(acc, p_frag, v_addr);
}

}  // namespace wgmma_detail

// k_map / v_map: dense, both over qkv [tokens, qkv_row] with 64 x kKeys boxes; paged, over the caches
// [num_blocks * block_size, kv_heads * head_dim] with 64 x block_size boxes (attention.cu makes them).
// Lane `lane` of the copying warp issues its share of key tile `tile`'s K and V boxes into the stage at k_dst /
// v_dst, counted on `bar` (lane 0 announced the stage's bytes): dense, one box per 64-column block; paged, one per
// cache page. Pages the block table cannot name are read past the end of the cache: the copy engine fills them
// with zeros (and still counts their bytes).
template <class C>
__device__ __forceinline__ void copy_stage(const AttentionProblem& p, const CUtensorMap& k_map,
                                           const CUtensorMap& v_map, int seq, int kv_head, int kv_end, int tile,
                                           int lane, uint32_t k_dst, uint32_t v_dst, uint32_t bar) {
  const int key0 = p.lead + tile * C::kKeys;  // lead: dense only (0 when paged)
  if (!p.paged) {
    if (lane >= C::kPad / 64) return;
    const int y = seq * p.tokens + key0;
    wgmma_detail::tensor_copy(k_dst + lane * C::kKeys * 128, k_map, (p.heads + kv_head) * p.head_dim + lane * 64, y, bar);
    wgmma_detail::tensor_copy(v_dst + lane * C::kKeys * 128, v_map, (p.heads + p.kv_heads + kv_head) * p.head_dim + lane * 64, y,
                bar);
    return;
  }
  const int page = lane, pages = C::kKeys / p.block_size;
  if (page >= pages) return;
  const int logical = key0 / p.block_size + page;
  int block = logical < p.max_blocks_per_seq ? p.block_table[int64_t(seq) * p.max_blocks_per_seq + logical] : -1;
  if (block < 0 || block >= p.num_blocks || key0 + page * p.block_size >= kv_end) block = int(p.num_blocks);
  const int y = block * p.block_size;
#pragma unroll
  for (int cb = 0; cb < C::kPad / 64; ++cb) {
    const uint32_t offset = uint32_t(cb * C::kKeys * 128 + page * p.block_size * 128);
    wgmma_detail::tensor_copy(k_dst + offset, k_map, kv_head * p.head_dim + cb * 64, y, bar);
    wgmma_detail::tensor_copy(v_dst + offset, v_map, kv_head * p.head_dim + cb * 64, y, bar);
  }
}

// Folds the keys [0, p.lead) a dense problem took apart into this thread's two rows, after the whole tiles: the
// score of each from Q in shared memory (this thread's 2 of every 8 dims, summed over its quad), then the online
// softmax step of a one-key tile (softmax_weights' arithmetic; the weight stays in float, not rounded to bf16 as
// a tile's P is for its MMA). q_tile: the block's Q (swizzled, C::kRows rows); block_row[h]: row h's index in it.
template <class C>
__device__ __forceinline__ void fold_lead_keys(const AttentionProblem& p, const SequenceSpan& span, int seq,
                                               int kv_head, const unsigned char* q_tile, const int (&block_row)[2],
                                               wgmma_detail::RowState& st, float (&acc)[C::kPad / 8][4], int t) {
  constexpr int kDimTiles = C::kPad / 8;
  for (int key = 0; key < p.lead; ++key) {
    const __nv_bfloat16* k_row = kv_ptr(p, span, seq, key, kv_head, 0);
    const __nv_bfloat16* v_row = kv_ptr(p, span, seq, key, kv_head, 1);
    float2 k[kDimTiles], v[kDimTiles];
#pragma unroll
    for (int d = 0; d < kDimTiles; ++d) {
      k[d] = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(k_row + d * 8 + 2 * t));
      v[d] = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(v_row + d * 8 + 2 * t));
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float dot = 0.f;
#pragma unroll
      for (int d = 0; d < kDimTiles; ++d) {
        const float2 q = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(
            q_tile + wgmma_detail::swizzled(C::kRows, block_row[h], d) + 4 * t));
        dot = fmaf(q.x, k[d].x, fmaf(q.y, k[d].y, dot));
      }
      dot += __shfl_xor_sync(0xffffffffu, dot, 1);
      dot += __shfl_xor_sync(0xffffffffu, dot, 2);
      if (key > st.key_limit[h]) continue;  // a padding row (none when the tiles are whole)
      const float new_max = fmaxf(st.max[h], dot), base = new_max * p.scale_log2;
      const float correction =
          st.max[h] == -INFINITY ? 0.f : mma_detail::exp2_of<true>(st.max[h] * p.scale_log2 - base);
      const float weight = mma_detail::exp2_of<true>(fmaf(dot, p.scale_log2, -base));
      st.max[h] = new_max;
      st.sum[h] = st.sum[h] * correction + (t == 0 ? weight : 0.f);  // the quad's partial sums add up later
#pragma unroll
      for (int d = 0; d < kDimTiles; ++d) {
        acc[d][2 * h] = fmaf(acc[d][2 * h], correction, weight * v[d].x);
        acc[d][2 * h + 1] = fmaf(acc[d][2 * h + 1], correction, weight * v[d].y);
      }
    }
  }
}

// A wgmma kernel's dynamic shared memory: Q, then K and V of each stage, then the mbarriers; the base is rounded
// up to the 1024-byte swizzle-atom boundary (smem_bytes() reserves the 1024 bytes).
template <class C>
struct WgmmaSmem {
  unsigned char* q;
  __device__ explicit WgmmaSmem(unsigned char* raw) {
    const uint32_t address = uint32_t(__cvta_generic_to_shared(raw));
    q = raw + ((1024u - (address & 1023u)) & 1023u);
  }
  __device__ unsigned char* k(int tile) const { return q + C::kQBytes + 2 * (tile % C::kStages) * C::kTileBytes; }
  __device__ unsigned char* v(int tile) const { return k(tile) + C::kTileBytes; }
  __device__ unsigned char* barriers() const { return q + C::kQBytes + 2 * C::kStages * C::kTileBytes; }
};

__device__ __forceinline__ uint32_t smem_addr(const void* ptr) { return uint32_t(__cvta_generic_to_shared(ptr)); }

template <class C>
__global__ void __launch_bounds__(C::kThreads, 1) flash_attention_wgmma(AttentionProblem p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace wgmma_detail;
  extern __shared__ unsigned char smem_raw[];
  const WgmmaSmem<C> smem(smem_raw);

  const int seq = blockIdx.z, kv_head = blockIdx.y;
  const SequenceSpan span = sequence_span(p, seq);
  // Causal blocks late in a sequence see the most keys: schedule them first so the grid's tail is short.
  const int row_tile = p.paged ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int row0 = row_tile * C::kRows;
  if (row0 / p.group >= span.q_len) return;  // whole block past this sequence's queries (uniform exit)
  const int group_index = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int last_token = min(span.q_len - 1, (row0 + C::kRows - 1) / p.group);
  const int kv_end = min(span.kv_len, span.limit(last_token) + 1);
  const int end_tile = max(0, (kv_end + C::kKeys - 1) / C::kKeys);

  auto load_keys = [&](int tile) {
    const int key0 = tile * C::kKeys;
    auto row_src = [&](int which) {
      return [&, which](int row) -> const __nv_bfloat16* {
        const int pos = key0 + row;
        if (pos >= kv_end) return nullptr;
        const int64_t offset = kv_row_offset(p, span, seq, pos, kv_head);
        return offset < 0 ? nullptr : kv_base(p, which) + offset;
      };
    };
    load_tile<C>(smem.k(tile), C::kKeys, p, row_src(0));
    load_tile<C>(smem.v(tile), C::kKeys, p, row_src(1));
  };

  // Pipeline: group 0 = Q, group 1 + i = key tile i; one group (possibly empty) is committed per step.
  load_tile<C>(smem.q, C::kRows, p, [&](int row) -> const __nv_bfloat16* {
    const int token = (row0 + row) / p.group;
    return token < span.q_len ? query_ptr(p, span, token, kv_head * p.group + (row0 + row) % p.group) : nullptr;
  });
  mma_detail::cp_async_commit();
#pragma unroll
  for (int i = 0; i < C::kStages - 1; ++i) {
    if (i < end_tile) load_keys(i);
    mma_detail::cp_async_commit();
  }

  const int group_row0 = row0 + group_index * 64;
  const int my_row[2] = {group_row0 + warp * 16 + g, group_row0 + warp * 16 + g + 8};
  RowState st = make_row_state(p, span, my_row);
  const int visible_end = visible_tiles(p, span, group_row0, end_tile, C::kKeys);

  float acc[C::kPad / 8][4] = {};
  const uint32_t q_addr = smem_addr(smem.q) + uint32_t(group_index) * 64 * 128;

  for (int tile = 0; tile < end_tile; ++tile) {
    // Q and tile `tile` have landed.
    mma_detail::cp_async_wait<C::kStages - 2>();
    fence_proxy_async();
    __syncthreads();  // ... for every thread; and every warpgroup is done with tile - 1's stage
    const int ahead = tile + C::kStages - 1;
    if (ahead < end_tile) load_keys(ahead);
    mma_detail::cp_async_commit();
    if (tile >= visible_end) continue;  // nothing visible for this warpgroup's rows
    float s[C::kKeys / 8][4];
    issue_scores<C>(s, q_addr, smem_addr(smem.k(tile)));
    wait_all();
    pin(s);
    if (tile * C::kKeys + C::kKeys - 1 > st.warp_min_limit) mma_detail::mask_scores(s, tile * C::kKeys, t, st.key_limit);
    mma_detail::online_softmax<true>(s, acc, st.max, st.sum, p.scale_log2);
    issue_values<C>(acc, s, smem_addr(smem.v(tile)));
    wait_all();
    pin(acc);
  }
  mma_detail::cp_async_wait<0>();  // blocks with no key tile never waited for their Q copy

  store_rows(p, span, st, acc, my_row, kv_head, t);
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

// A 2-D tensor map over a row-major bf16 matrix [rows, cols], read in boxes of 64 columns x box_rows rows that
// land 128-byte swizzled (the layout of this file's tiles); reads past the end are zeros. Host side, in
// attention.cu.
CUtensorMap tensor_map(const void* base, uint64_t cols, uint64_t rows, uint32_t box_rows,
                       CUtensorMapL2promotion promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B);

// 1 when this binary's attention kernels were built for sm_90a (wgmma available), written by a one-thread probe.
__global__ void wgmma_probe(int* built_for_sm90a);
// Runs the probe once (outside graph captures): whether this binary's wgmma kernels exist (attention.cu).
bool built_for_sm90a();

}  // namespace fovea::cuda

// W4A16 on the GPU: y = x · W^T with W kept as 4-bit codes (Backend::linear_w4, W4Weight in backend.h, bit layout
// in backend/w4_layout.h).
//
// The layout and why. A decode step reads every weight once, so its GEMMs are bound by weight bytes; keeping W
// as 4-bit codes moves ~4x fewer bytes than bf16 if the codes can be turned into tensor-core operands without
// a second pass. So the codes are stored the way mma.sync m16n8k16 consumes them: row n of W is one row of
// 32-bit words (K contiguous, 32 columns per 4 words), and word t of each 32-column chunk holds exactly the 8 codes
// lane t (mod 4) of a B fragment needs for the chunk's two 16-column steps, nibbles i and i + 4 being the two bf16
// halves of one fragment register. A thread then reads one conflict-free 32-bit word from shared memory per n and
// 32 columns and makes each bf16x2 register with one mask-and-or: the code q lands in the mantissa of
// bf16 128 + q. Rows stay rows, so the loader's row operations (InternLM2's wqkv regrouping, q/k/v and
// gate/up concatenation) apply to codes and params unchanged. Scales and zero points sit in one 32-bit word per
// (n, group), the scale kept in its checkpoint's 16-bit format (AWQ and GPTQ write F16) so nothing is rounded.
//
// Exactness. The bf16 path dequantizes on the host: w = bf16(float(q - z) * s). With a 16-bit scale, (q - z) * s
// has at most 15 significant bits, so it is exact in float and that path rounds exactly once. The fused kernel
// computes the same value in bf16x2 arithmetic: d = (128 + q) - (128 + z) is exact; s = s_hi + s_lo with s_hi the
// scale truncated to bf16 and s_lo the (at most 3-bit) rest; d · s_lo is exact (at most 7 bits); fma(d, s_hi,
// d · s_lo) rounds the exact d · s once to bf16. Same bits as the host, so linear_w4 differs from linear() on the
// dequantized weight only by the order of the float32 sums. (A float32 scale that is not a 16-bit value is not
// kept packed: the loader dequantizes that linear and says so.)
//
// Act-order (GPTQ desc_act). Groups must be contiguous along the stored K for the kernels to walk them, so the
// loader sorts W's columns by group (a permutation `perm`, stable within a group). x is then gathered with the
// same permutation (one small kernel into the workspace) before the fused kernel; the large-M path instead
// dequantizes W straight back into the original column order through inverse_perm, so x is used as it is.
//
// Small M (decode, M <= kW4FusedMaxRows = 64): the fused kernel. A block owns 128 weight rows and all M rows of
// x; K is streamed in 128-column stages through a cp.async ring (codes 8 KB, params and the x columns per stage),
// dequantized in registers as above and multiplied with mma.sync m16n8k16 (bf16 in, f32 accumulate). When N / 128
// gives too few blocks for the SMs, K is split over gridDim.y (at most two blocks per SM in one wave); the splits
// write float32 partial tiles into the workspace and a second kernel adds them in split order plus the bias
// (deterministic, no atomics). Nothing is allocated and nothing waits on the host: graph-capturable.
//
// The kernel is the second version (gemm_w4_v2.cu; the first, v1, and its FOVEA_W4_KERNEL switch were removed:
// the last tree with them is commit fb2dff3). v1 measured on the H200 slower than the bf16 GEMM it replaces
// (w13 4096 -> 28672, M = 1: 77 us vs 59.6; M = 64: 132 vs 62): Nsight Compute showed
// ~930 instructions per warp and stage where the dequantization needs ~200 (the copy loops' trip counts and the
// group positions were runtime values: divisions, remainder loops and branches in every stage), and at most 12
// warps per SM (4-warp blocks, 3 per SM by shared memory; 1 at M = 64 with 162 registers), 7 achieved, so the
// dependent bf16x2 chains stalled with nothing else to issue. v2 (gemm_w4_v2.cu) keeps the layout, the exact
// arithmetic and the 128 x 128 block tile, and changes what those measurements pointed at:
//  - 8 warps x 16 rows (two n8 tiles): half the accumulators, so 127 registers at M = 64 and <= 80 at M <= 16;
//  - templated on the groups per stage (1, 2, 4, 8) besides the m16 tiles, so every copy loop and every group
//    boundary is a compile-time constant (~330 instructions per warp and stage for half v1's rows);
//  - the mask-and-or in one lop3 (the compiler emits LOP3 + LOP3 for two immediates);
//  - 4 stages at M <= 32, 3 at M = 64 (x's tile is 17 KB there): two blocks, 16 warps, per SM at every M, three
//    at M <= 16; the split count (two blocks per SM) is unchanged, so the workspace is too;
//  - launched as a dependent launch (dependent_launch.cuh): the first stages' weights stream in before
//    griddepcontrol.wait, since nothing upstream writes them; x only after it.
// At M <= 16 the remaining cost is the dequantization itself (sub, mul, fma + lop3 + a shift per two weights);
// at M = 64 the x fragments every warp re-reads from shared memory and mma.sync issue.
//
// Large M (prefill) and shapes the fused kernel does not take: the bf16 weight is dequantized into the workspace
// (the same float arithmetic as the host), then the ordinary bf16 linear (cuBLASLt) runs on it, as vLLM's AWQ
// path does above 256 tokens. The per-column kernel (one thread per 8 columns with a 64-bit index, a division and a
// code and param lookup per output) took 446 us for w13, instruction-bound; w4_dequantize_chunks_kernel (K a
// multiple of 32, no act-order) gives a thread one 32-column chunk: one 16-byte load of its four code words, its
// one or two params read once, 2^23 + q built as a float bit pattern (no int-to-float conversion), four 16-byte
// stores, so it should be bound by the 2 bytes per weight it writes. Act-order and K not a multiple of 32 keep
// the per-column kernel.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/kernels.h"

namespace fovea::cuda {

constexpr int kW4FusedMaxRows = 64;  // decode-sized M: the fused kernel
constexpr int kW4TileN = 128;        // weight rows per block
constexpr int kW4TileK = 128;        // K columns per pipeline stage: K must be a multiple for the fused kernel
constexpr int kW4MaxSplits = 16;

// Whether the fused kernel takes this shape (else the dequantize + cuBLASLt path, which takes every shape).
// `x_aligned`: x's base is 16-byte aligned (cp.async).
bool w4_fused_supported(int64_t m, int64_t n, int64_t k, int64_t group, bool x_aligned);
// K splits of the fused kernel for an N x K weight on `sm_count` multiprocessors.
int w4_fused_splits(int64_t n, int64_t k, int sm_count);

// Workspace layout (bytes from its start): the large-M path's bf16 weight [N, K] at 0; the fused path's gathered
// x [64, K] bf16 at 0 (act-order only) and its float32 partials [splits, M, N] after it, 256-byte aligned.
size_t w4_dequantized_bytes(int64_t n, int64_t k);
size_t w4_partials_offset(int64_t k, bool permuted);
size_t w4_workspace_bytes(int64_t n, int64_t k, int64_t group, bool permuted, int sm_count);

// Raises the fused kernels' shared-memory limits; call once per backend before the first launch (outside graph
// captures).
void prepare_w4_kernels();

// out[r, c] = x[r, perm[c]] for r < m, c < k (perm values clamped into [0, k)).
void launch_w4_gather_columns(const bf16* x, const int* perm, bf16* out, int m, int k, cudaStream_t stream);
// w[n, c] = bf16(float(q - z) * s) of stored column inverse_perm[c] (or c when null), for all n < rows, c < k.
void launch_w4_dequantize(const uint32_t* codes, const uint32_t* params, const int* inverse_perm, bf16* w, int rows,
                          int k, int group, cudaStream_t stream);
// y[m, n] = x · W^T + bias (bias may be null) on the fused kernel; `partials` holds splits * m * n floats when
// splits > 1 (else unused).
void launch_w4_fused(const bf16* x, const uint32_t* codes, const uint32_t* params, const bf16* bias, bf16* y,
                     float* partials, int m, int n, int k, int group, int splits, cudaStream_t stream);

}  // namespace fovea::cuda

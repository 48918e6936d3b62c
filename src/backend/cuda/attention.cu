// Flash attention for both layouts (see attention_common.cuh): online softmax over key tiles, no score matrix
// in memory. Dispatch: on sm_90a, dense and non-split paged steps with more than 64 query rows per (sequence, KV
// head) run the pipelined wgmma kernel (attention_wgmma_pipelined.cuh; attention_wgmma.cuh's unpipelined one
// where TMA cannot serve the shape); split-KV decode steps whose rows fit a 16-row tile run
// attention_decode.cuh's kernel; the rest runs the mma.sync kernel (attention_mma.cuh, head dims up to 128 that
// are multiples of 8, padded to 32/64/128 with zeros: its cp.async copies move 16-byte chunks); a SIMT kernel
// (one warp per query row, below) serves every other even head dim up to 256.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cmath>
#include <algorithm>
#include <type_traits>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/attention_mma.cuh"
#include "backend/cuda/attention_wgmma.cuh"
#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/attention_wgmma_pipelined.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/kernels.h"

namespace fovea::cuda {
namespace {

// Generic path: one warp per (query token, q head); lane l owns dims [8l, 8l + 8). Any even head_dim <= 256.
// Slow (no data reuse across rows) but simple, and it checks the fast path's indexing. When head_dim is not a
// multiple of 8, rows are not 16-byte aligned and a lane's last chunk is partial, so elements load one by one.
__device__ __forceinline__ void load_dims(const __nv_bfloat16* row, int first, int head_dim, bool vector, float* v) {
  if (vector) return load_bf16<8>(row + first, v);
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = first + i < head_dim ? __bfloat162float(row[first + i]) : 0.f;
}

__global__ void flash_attention_simt(AttentionProblem p, int rows_per_seq) {
  const int warp_global = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  const int seq = blockIdx.y;
  if (warp_global >= rows_per_seq) return;
  const SequenceSpan span = sequence_span(p, seq);
  const int token = warp_global / p.heads, head = warp_global % p.heads;
  if (token >= span.q_len) return;
  const int kv_head = head / p.group;
  const int first = lane * 8;
  const bool owns = first < p.head_dim, vector = p.head_dim % 8 == 0;
  float q[8] = {}, acc[8] = {};
  if (owns) load_dims(query_ptr(p, span, token, head), first, p.head_dim, vector, q);
  const int limit = min(span.limit(token), span.kv_len - 1);
  float row_max = -INFINITY, row_sum = 0.f;
  for (int pos = 0; pos <= limit; ++pos) {
    const __nv_bfloat16* k_row = kv_ptr(p, span, seq, pos, kv_head, 0);
    const __nv_bfloat16* v_row = kv_ptr(p, span, seq, pos, kv_head, 1);
    float k[8] = {}, v[8] = {};
    if (owns && k_row) load_dims(k_row, first, p.head_dim, vector, k);
    if (owns && v_row) load_dims(v_row, first, p.head_dim, vector, v);
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
  __nv_bfloat16* out = output_ptr(p, span, token, head);
  if (vector) return store_bf16<8>(out + first, acc);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (first + i < p.head_dim) out[first + i] = __float2bfloat16(acc[i]);
}

// mma.sync tile configurations, chosen by the 2026-11-29 sweeps (bench/results/cuda_ops_2026-11-29.md, runs 3
// and 4): 8-warp blocks (128 query rows, 2 stages) were fastest for the ViT and for prefill (200 and 168 TFLOP/s
// against 159 and 120 for 4-warp blocks); 4-warp blocks with the fast softmax were fastest for split-KV decode
// (1.9 TB/s against 1.4). At head dim 128 the 8-warp block re-reads Q from shared memory and caps registers at
// 128 so that two blocks share a multiprocessor (run 4: paged prefill 168 -> 188 TFLOP/s); at head dim 64 the
// same change was 2% slower for the ViT, so there Q stays in registers. On sm_90a, dense and non-split paged
// steps with more than 64 query rows per (sequence, KV head) go to the wgmma kernels instead. The configurations
// the sweeps measured slower were removed (the last tree with them and their FOVEA_CUDA_ATTN_VARIANT* switches:
// commit fb2dff3).
template <int kPad>
using PrefillConfig =
    std::conditional_t<kPad == 128, MmaConfig<128, 8, 2, true, 2, true>, MmaConfig<kPad, 8, 2, true>>;
template <int kPad>
using DecodeConfig = MmaConfig<kPad, 4, 2, true>;
bool g_wgmma_built = false;  // the binary's kernels were compiled for sm_90a and the device runs them

// Unpipelined wgmma configurations (warpgroups of 64 rows, keys per tile, stages; K/V by cp.async), from the
// 2026-11-29 sweep (bench/results/cuda_ops_2026-11-29.md, runs 8 and 10): they serve what the pipelined kernel's
// TMA copies cannot (head dims padded to 64/128, paged block sizes not dividing the key tile; tma_fits).
template <int kPad>
using Wgmma21 = WgmmaConfig<kPad, 2, 64, 2>;
template <int kPad>
using Wgmma22 = WgmmaConfig<kPad, 3, 64, 2>;
// Pipelined (attention_wgmma_pipelined.cuh: producer warp(group), mbarrier stages, softmax overlapping P·V):
// <head dim, consumer warpgroups, keys per tile, stages, blocks per SM, consumer registers (0: no setmaxnreg)>.
// The 2026-11-29 session-3 sweep (bench/results/cuda_ops_2026-11-29.md, run 11): at head dim 128, two consumer
// warpgroups on 128-key tiles with three stages and a register-donating producer warpgroup (47) ran causal
// prefill at 430 TFLOP/s (29: 316); with two stages (46) 300, and without setmaxnreg 128-key tiles spill. At
// head dim 64 (the ViT) one warpgroup, 64-key tiles, three stages, two blocks per SM (44): 308 (31: 295). The
// other configurations of the sweep (2 or 3 warpgroups on 64-key tiles, one on 128) were slower and removed.
template <int kPad>
using Pipe44 = WgmmaPipeConfig<kPad, 1, 64, 3, 2>;
template <int kPad>
using Pipe47 = WgmmaPipeConfig<kPad, 2, 128, 3, 1, 232>;

// Two 104 KiB blocks per multiprocessor (kQInSmem) only fit with the largest shared-memory carveout.
template <class C>
void set_smem_limit() {
  allow_shared_memory(flash_attention_mma<C>, C::smem_bytes(), C::kQInSmem);
}

template <template <int> class V>
void set_smem_limits() {
  set_smem_limit<V<32>>();
  set_smem_limit<V<64>>();
  set_smem_limit<V<128>>();
}

template <class C>
void set_wgmma_limit() {
  if constexpr (C::kPipelined) allow_shared_memory(flash_attention_wgmma_pipelined<C>, C::smem_bytes(), true);
  else allow_shared_memory(flash_attention_wgmma<C>, C::smem_bytes(), true);
}

template <class C>
void launch_config(const AttentionProblem& p, int num_seqs, int max_q_len, cudaStream_t stream) {
  const int row_tiles = int((int64_t(max_q_len) * p.group + C::kRows - 1) / C::kRows);
  const dim3 grid(p.num_splits > 1 ? p.num_splits : row_tiles, p.kv_heads, num_seqs);
  flash_attention_mma<C><<<grid, C::kThreads, C::smem_bytes(), stream>>>(p);
  FOVEA_CUDA_CHECK_LAUNCH();
}

template <template <int> class V>
void launch_variant(const AttentionProblem& p, int num_seqs, int max_q_len, cudaStream_t stream) {
  if (p.head_dim <= 32) return launch_config<V<32>>(p, num_seqs, max_q_len, stream);
  if (p.head_dim <= 64) return launch_config<V<64>>(p, num_seqs, max_q_len, stream);
  return launch_config<V<128>>(p, num_seqs, max_q_len, stream);
}

}  // namespace

CUtensorMap tensor_map(const void* base, uint64_t cols, uint64_t rows, uint32_t box_rows,
                       CUtensorMapL2promotion promotion) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    FOVEA_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    FOVEA_CHECK(found == cudaDriverEntryPointSuccess && fn, "tensor map: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  CUtensorMap map{};
  const cuuint64_t dims[2] = {cols, rows}, strides[1] = {cols * sizeof(bf16)};
  const cuuint32_t box[2] = {64, box_rows}, element_strides[2] = {1, 1};
  const CUresult result =
      encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box, element_strides,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  FOVEA_CHECK(result == CUDA_SUCCESS, "tensor map: cuTensorMapEncodeTiled failed (", int(result), ") for ", rows,
              " x ", cols);
  return map;
}

namespace {

// Whether a TMA configuration with kKeys-key tiles can serve this problem (else its cp.async twin runs).
bool tma_fits(const AttentionProblem& p, int keys) {
  if (p.head_dim != 64 && p.head_dim != 128) return false;
  if (!p.paged) return true;
  return p.block_size % 8 == 0 && keys % p.block_size == 0 && keys / p.block_size <= 32;
}

// How many leading keys a dense problem takes apart for configuration C (attention_common.cuh): the remainder of
// its tokens over C's key tiles, when it is small. InternViT's 1,025 tokens would otherwise spend a 17th key tile
// of 64 (a 9th of 128 at head dim 128) on one key: 6% (11%) of the work. (Its rows stay in whole tiles, the last
// with one real row: computing the leading rows in a kernel of their own read every K and V row again, 2026-12-07
// session 9: 450 -> 563 us for 32 tiles on an H100.)
constexpr int kMaxLead = 8;
template <class C>
int dense_lead(const AttentionProblem& p) {
  if (!C::kPipelined || p.paged || p.head_dim != C::kPad) return 0;
  const int lead = p.tokens % C::kKeys;
  return lead <= kMaxLead && lead < p.tokens ? lead : 0;
}

template <class C>
void launch_wgmma_config(const AttentionProblem& problem, int num_seqs, int max_q_len, cudaStream_t stream) {
  AttentionProblem p = problem;
  p.lead = dense_lead<C>(p);
  const int row_tiles = int((int64_t(max_q_len) * p.group + C::kRows - 1) / C::kRows);
  CUtensorMap k_map{}, v_map{};
  if constexpr (C::kTma) {
    if (p.paged) {
      const uint64_t cols = uint64_t(p.kv_heads) * p.head_dim, rows = uint64_t(p.num_blocks) * p.block_size;
      k_map = tensor_map(p.k_cache, cols, rows, uint32_t(p.block_size));
      v_map = tensor_map(p.v_cache, cols, rows, uint32_t(p.block_size));
    } else {
      k_map = tensor_map(p.qkv, uint64_t(p.qkv_row), uint64_t(num_seqs) * p.tokens, uint32_t(C::kKeys));
      v_map = k_map;
    }
  }
  const dim3 grid(row_tiles, p.kv_heads, num_seqs);
  if constexpr (C::kPipelined)
    flash_attention_wgmma_pipelined<C><<<grid, C::kThreads, C::smem_bytes(), stream>>>(p, k_map, v_map);
  else
    flash_attention_wgmma<C><<<grid, C::kThreads, C::smem_bytes(), stream>>>(p);
  FOVEA_CUDA_CHECK_LAUNCH();
}

// The wgmma kernels serve head dims in (32, 128] that are multiples of 8, one row tile per sequence and KV head
// being at least 64 query rows (decode-like steps stay on the 64-row mma.sync tiles).
bool uses_wgmma(const AttentionProblem& p, int max_q_len) {
  return g_wgmma_built && p.num_splits == 1 && p.head_dim > 32 && p.head_dim <= 128 && p.head_dim % 8 == 0 &&
         int64_t(max_q_len) * p.group > 64;
}

// Head dims up to 64 (the ViT's): Pipe44, else Wgmma21; up to 128 (the decoder's): Pipe47, else Wgmma22.
void launch_wgmma(const AttentionProblem& p, int num_seqs, int max_q_len, cudaStream_t stream) {
  if (p.head_dim <= 64)
    return tma_fits(p, 64) ? launch_wgmma_config<Pipe44<64>>(p, num_seqs, max_q_len, stream)
                           : launch_wgmma_config<Wgmma21<64>>(p, num_seqs, max_q_len, stream);
  return tma_fits(p, 128) ? launch_wgmma_config<Pipe47<128>>(p, num_seqs, max_q_len, stream)
                          : launch_wgmma_config<Wgmma22<128>>(p, num_seqs, max_q_len, stream);
}

void launch_mma(const AttentionProblem& p, int num_seqs, int max_q_len, cudaStream_t stream) {
  if (uses_wgmma(p, max_q_len)) return launch_wgmma(p, num_seqs, max_q_len, stream);
  if (p.num_splits > 1) return launch_variant<DecodeConfig>(p, num_seqs, max_q_len, stream);
  launch_variant<PrefillConfig>(p, num_seqs, max_q_len, stream);
}

// Query rows per block of the configuration split-KV runs with: the step's rows of a sequence must fit one tile.
int split_tile_rows() { return DecodeConfig<64>::kRows; }

// The tensor-core kernel copies 16-byte chunks of rows: it needs head_dim to be a multiple of 8.
bool uses_mma(int head_dim) { return head_dim <= 128 && head_dim % 8 == 0; }

// Split-KV decode: a decode step (or a short chunk) over a long context has one row tile per (sequence, KV
// head), too few blocks to keep the memory system busy; splitting the keys in 256-key pieces multiplies them.
constexpr int kSplitKeys = 256, kMaxSplits = 32;

int choose_splits(const PagedAttentionArgs& a, int group) {
  if (!uses_mma(a.head_dim) || !a.workspace) return 1;
  const int64_t rows = int64_t(a.max_q_len) * group;
  if (rows > split_tile_rows() || a.max_ctx_len <= kSplitKeys) return 1;
  const size_t per_split = size_t(a.num_seqs) * a.kv_heads * size_t(rows) * (a.head_dim + 2) * sizeof(float);
  const int64_t by_keys = (a.max_ctx_len + kSplitKeys - 1) / kSplitKeys;
  const int64_t by_memory = int64_t(a.workspace_bytes / per_split);
  const int splits = int(std::min<int64_t>({by_keys, by_memory, kMaxSplits}));
  return splits >= 2 ? splits : 1;
}

// Merges the splits of one (sequence, KV head, row): out = sum_s w_s acc_s / sum_s w_s l_s with
// w_s = 2^(m_s - max m).
__global__ void combine_splits(AttentionProblem p) {
  __shared__ float weight[kMaxSplits];
  __shared__ float inv_total;
  wait_for_upstream();
  release_downstream();
  const int local_row = blockIdx.x, kv_head = blockIdx.y, seq = blockIdx.z;
  const SequenceSpan span = sequence_span(p, seq);
  const int token = local_row / p.group;
  if (token >= span.q_len) return;
  const int64_t first = (int64_t(seq) * p.kv_heads + kv_head) * p.num_splits * p.split_rows + local_row;
  if (threadIdx.x == 0) {
    float top = -INFINITY;
    for (int s = 0; s < p.num_splits; ++s) top = fmaxf(top, p.split_stats[2 * (first + int64_t(s) * p.split_rows)]);
    float total = 0.f;
    for (int s = 0; s < p.num_splits; ++s) {
      const int64_t slot = first + int64_t(s) * p.split_rows;
      const float m = p.split_stats[2 * slot];
      weight[s] = m == -INFINITY ? 0.f : exp2f(m - top);
      total += weight[s] * p.split_stats[2 * slot + 1];
    }
    inv_total = total > 0.f ? 1.f / total : 0.f;
  }
  __syncthreads();
  __nv_bfloat16* out = output_ptr(p, span, token, kv_head * p.group + local_row % p.group);
  for (int d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
    float sum = 0.f;
    for (int s = 0; s < p.num_splits; ++s)
      if (weight[s] != 0.f) sum += weight[s] * p.split_out[(first + int64_t(s) * p.split_rows) * p.head_dim + d];
    out[d] = __float2bfloat16(sum * inv_total);
  }
}

void launch(const AttentionProblem& p, int num_seqs, int max_q_len, cudaStream_t stream) {
  if (num_seqs == 0 || max_q_len == 0) return;
  if (uses_mma(p.head_dim)) return launch_mma(p, num_seqs, max_q_len, stream);
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

__global__ void wgmma_probe(int* built_for_sm90a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *built_for_sm90a = 1;
#else
  *built_for_sm90a = 0;
#endif
}

// Whether the kernels were compiled for sm_90a is known only on the device: ask a one-thread kernel.
bool built_for_sm90a() {
  int* flag = nullptr;
  FOVEA_CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
  wgmma_probe<<<1, 1>>>(flag);
  int built = 0;
  const cudaError_t launched = cudaGetLastError();
  if (launched == cudaSuccess) FOVEA_CUDA_CHECK(cudaMemcpy(&built, flag, sizeof(int), cudaMemcpyDeviceToHost));
  FOVEA_CUDA_CHECK(cudaFree(flag));
  return launched == cudaSuccess && built == 1;
}

void prepare_attention_kernels() {
  set_smem_limits<PrefillConfig>();
  set_smem_limits<DecodeConfig>();
  prepare_split_decode_kernels();
  g_wgmma_built = built_for_sm90a();
  if (g_wgmma_built) {
    set_wgmma_limit<Pipe44<64>>();
    set_wgmma_limit<Wgmma21<64>>();
    set_wgmma_limit<Pipe47<128>>();
    set_wgmma_limit<Wgmma22<128>>();
  }
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
  // Batch invariant: one kernel configuration and no split-KV, whatever the step's shape, so a row's sums run in
  // the same order however many rows share the call.
  if (a.batch_invariant) {
    p.num_splits = 1;
    if (a.num_seqs == 0 || a.max_q_len == 0) return;
    if (uses_mma(p.head_dim)) return launch_variant<PrefillConfig>(p, a.num_seqs, a.max_q_len, stream);
    return launch(p, a.num_seqs, a.max_q_len, stream);  // the SIMT kernel: one choice already
  }
  // Steps whose rows of a (sequence, KV head) fit one 16-row tile take the split-KV decode kernel
  // (attention_decode.cuh); it writes the same partials, merged below.
  const SplitDecodePlan decode = plan_split_decode(a, p.group, kMaxSplits);
  p.num_splits = decode.use ? decode.splits : choose_splits(a, p.group);
  if (p.num_splits > 1) {
    p.split_keys = decode.use ? decode.split_keys : kSplitKeys;
    p.split_rows = a.max_q_len * p.group;
    const size_t out_floats = size_t(a.num_seqs) * a.kv_heads * p.num_splits * p.split_rows * a.head_dim;
    p.split_out = a.workspace;
    p.split_stats = a.workspace + out_floats;
  }
  if (decode.use) {
    launch_split_decode(p, a.num_seqs, stream);
  } else {
    launch(p, a.num_seqs, a.max_q_len, stream);
  }
  if (p.num_splits > 1) {
    launch_dependent(combine_splits, dim3(p.split_rows, a.kv_heads, a.num_seqs), 128, 0, stream, p);
  }
}

}  // namespace fovea::cuda

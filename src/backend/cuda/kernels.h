// Launchers of the CUDA backend's kernels: raw device pointers, sizes and the stream; shapes were already
// checked by CudaBackend. Each launcher checks its launch. bf16 is __nv_bfloat16 throughout.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/random_fill.h"

namespace fovea::cuda {

using bf16 = __nv_bfloat16;

// ---- norms (kernels_norm.cu) ----
void launch_layer_norm(const bf16* x, const bf16* gamma, const bf16* beta, float eps, bf16* y, int rows, int cols,
                       cudaStream_t stream);
void launch_rms_norm(const bf16* x, const bf16* gamma, float eps, bf16* y, int rows, int cols, cudaStream_t stream);
// residual += scale ⊙ x (scale may be null: 1), stored bit-identical to launch_scale_add, then
// y = LayerNorm / RMSNorm of the stored residual: launch_scale_add followed by launch_layer_norm / launch_rms_norm in
// one kernel. y may alias x, not residual.
void launch_scale_add_layer_norm(bf16* residual, const bf16* x, const bf16* scale, const bf16* gamma,
                                 const bf16* beta, float eps, bf16* y, int rows, int cols, cudaStream_t stream);
void launch_scale_add_rms_norm(bf16* residual, const bf16* x, const bf16* scale, const bf16* gamma, float eps,
                               bf16* y, int rows, int cols, cudaStream_t stream);

// ---- q/k RMSNorm (kernels_qk_norm.cu) ----
// In place on each qkv row [(heads + 2 kv_heads) * head_dim]: every group of q_group values of the q part (head_dim
// or heads * head_dim) is RMS-normalised and scaled by q_gamma [q_group], likewise the k part with k_group and
// k_gamma.
void launch_qk_rms_norm(bf16* qkv, int tokens, int heads, int kv_heads, int head_dim, int q_group, int k_group,
                        const bf16* q_gamma, const bf16* k_gamma, float eps, cudaStream_t stream);
// Per-head q/k RMSNorm (gammas [head_dim]), then rope, then the K/V cache write, in one kernel: the results of
// launch_qk_rms_norm followed by launch_rope_kv_write, with one bf16 rounding instead of two. Needs an even
// head_dim up to 256 (qk_norm_rope_fusable).
bool qk_norm_rope_fusable(int head_dim);
void launch_qk_norm_rope_kv_write(bf16* qkv, const bf16* q_gamma, const bf16* k_gamma, float eps,
                                  const int* positions, const int* slots, int tokens, int heads, int kv_heads,
                                  int head_dim, float theta, bf16* k_cache, bf16* v_cache, int64_t num_slots,
                                  int* error_flag, cudaStream_t stream);

// ---- element-wise and row copies (kernels_elementwise.cu) ----
// x[r, c] += scale[c] * y[r, c]; scale may be null (= 1).
void launch_scale_add(bf16* x, const bf16* y, const bf16* scale, int rows, int cols, cudaStream_t stream);
// w[r, c] = bf16(float(w[r, c]) * float(scale[r])) (load-time weight folding; one thread per element).
void launch_scale_rows(bf16* w, const bf16* scale, int64_t rows, int64_t cols, cudaStream_t stream);
void launch_silu_mul(const bf16* gate_up, bf16* y, int rows, int half_cols, cudaStream_t stream);
// For i < count: dst[dst_index ? dst_index[i] : i] = src[src_index ? src_index[i] : i] (rows of `cols`).
// An out-of-range source index is clamped, an out-of-range destination row is skipped; both set *error_flag.
void launch_copy_rows(const bf16* src, const int* src_index, int64_t src_rows, bf16* dst, const int* dst_index,
                      int64_t dst_rows, int64_t count, int64_t cols, int* error_flag, cudaStream_t stream);

// ---- vision (kernels_vision.cu) ----
// rgb [tiles, plane, 3] U8 -> out [tiles, 3, plane] F32, (v / 255 - mean[c]) / std_dev[c] IEEE-rounded.
void launch_normalize_pixels(const uint8_t* rgb, int64_t tiles, int64_t plane, const float mean[3],
                             const float std_dev[3], float* out, cudaStream_t stream);
void launch_patchify(const float* pixels, int batch, int size, int patch, bf16* patches, cudaStream_t stream);
void launch_vit_embed(const bf16* patch_emb, const bf16* cls, const bf16* pos, int batch, int patches, int cols,
                      bf16* out, cudaStream_t stream);
void launch_pixel_shuffle(const bf16* x, int batch, int grid, int cols, bf16* y, cudaStream_t stream);

// ---- decoder and heads (kernels_decoder.cu) ----
void launch_rope(bf16* qkv, const int* positions, int tokens, int heads, int kv_heads, int head_dim, float theta,
                 cudaStream_t stream);
// launch_rope then launch_kv_write in one kernel (same results).
void launch_rope_kv_write(bf16* qkv, const int* positions, const int* slots, int tokens, int heads, int kv_heads,
                          int head_dim, float theta, bf16* k_cache, bf16* v_cache, int64_t num_slots,
                          int* error_flag, cudaStream_t stream);
// Negative slots are skipped (padding); slots >= num_slots set *error_flag and are skipped.
void launch_kv_write(const bf16* qkv, const int* slots, int tokens, int heads, int kv_heads, int head_dim,
                     bf16* k_cache, bf16* v_cache, int64_t num_slots, int* error_flag, cudaStream_t stream);
void launch_argmax(const void* logits, bool logits_f32, int rows, int vocab, int* ids, cudaStream_t stream);
void launch_log_softmax_gather(const void* logits, bool logits_f32, int rows, int vocab, const int* ids, int k,
                               float* out, int* error_flag, cudaStream_t stream);

// ---- FP8 (kernels_fp8.cu) ----
// stats[0] = max|x|, stats[1] = scale (max|x| / 448, or 1), xq[i] = e4m3(x[i] / scale), saturating.
// stats: kFp8StatsFloats floats; [0] = max|x|, [kFp8ScaleSlot] = the scale, 16 bytes in (cuBLASLt reads it).
constexpr int kFp8ScaleSlot = 4, kFp8StatsFloats = 8;
void launch_quantize_fp8(const bf16* x, int64_t n, uint8_t* xq, float* stats, cudaStream_t stream);

// ---- random fill (kernels_random.cu) ----
enum RandomKind : int { kRandomF32, kRandomBF16, kRandomF16, kRandomE4M3, kRandomI32, kRandomU8 };
void launch_fill_random(void* data, int64_t n, int kind, const RandomFill& fill, cudaStream_t stream);

// ---- attention (attention.cu) ----
struct DenseAttentionArgs {
  const bf16* qkv;  // [batch * tokens, 3 * heads * head_dim]
  bf16* out;        // [batch * tokens, heads * head_dim]
  int batch, tokens, heads, head_dim;
};
struct PagedAttentionArgs {
  const bf16* qkv;  // [T, (heads + 2 * kv_heads) * head_dim]
  const bf16* k_cache;
  const bf16* v_cache;  // [num_blocks, block_size, kv_heads, head_dim]
  const int* cu_q;
  const int* ctx_len;
  const int* block_table;  // [num_seqs, max_blocks_per_seq]
  bf16* out;               // [T, heads * head_dim]
  int num_seqs, max_q_len, max_ctx_len, max_blocks_per_seq, block_size, heads, kv_heads, head_dim;
  int64_t num_blocks;  // of the cache, to keep bad block-table entries from reading out of bounds
  float* workspace = nullptr;  // for split-KV decode partial results; may be null (no splitting)
  size_t workspace_bytes = 0;
  // One kernel for every step (the prefill mma.sync tiles, no split-KV): which kernel and how many splits
  // otherwise follow the step's longest query and sequence count, and so does each row's summation order.
  bool batch_invariant = false;
};
// Raises the attention kernels' shared-memory limits; called once at backend construction, so that no such
// call happens while a graph is being recorded.
void prepare_attention_kernels();
void launch_attention_dense(const DenseAttentionArgs& args, cudaStream_t stream);
void launch_paged_attention(const PagedAttentionArgs& args, cudaStream_t stream);

}  // namespace fovea::cuda

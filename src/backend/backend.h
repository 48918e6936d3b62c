// The compute backend: memory on one device plus every op of the InternVL forward. The model code in
// src/runtime is written once against this interface; CpuBackend (scalar reference, float32 activations and
// float32 accumulation) and CudaBackend (bf16 activations, fused kernels) implement it. Which backends exist is
// decided at link time: builds without CUDA link cuda_stub.cc, whose factory says so.
//
// Conventions for every op:
//  - Tensors are row-major and contiguous; shapes below are [rows, cols]. Activations have compute_dtype(),
//    weights weight_dtype(); index tensors are I32; norms' gammas/betas, biases and layer scales are weights.
//  - All tensors passed to an op live on this backend's device. Ops are asynchronous on CUDA (one stream, in
//    order); synchronize() waits. Ops never allocate device memory, except alloc() itself.
//  - An op throws fovea::Error on a shape/dtype mismatch; it never reads or writes out of bounds.
#pragma once
#include <memory>
#include <string>

#include "backend/fp8_recipe.h"
#include "backend/random_fill.h"
#include "core/tensor.h"
#include "image/normalize_kernels.h"

namespace fovea {

enum class Activation : uint8_t { None, Gelu /* exact erf GELU */ };
// Which normalisation scale_add_norm applies: layer_norm's or rms_norm's.
enum class NormKind : uint8_t { Layer, Rms };

// Describes one step's sequences for paged attention, all tensors on the device.
// Sequence s has q_len(s) = cu_q[s+1] - cu_q[s] new tokens, already written to the cache, and ctx_len[s] tokens
// in the cache in total (ctx_len >= q_len). Its j-th new token sits at position ctx_len[s] - q_len(s) + j and
// attends causally to cache positions 0..that position. Position p of sequence s lives in cache block
// block_table[s][p / block_size], row p % block_size. This covers prefill, chunked prefill and decode.
struct PagedAttentionBatch {
  Tensor cu_q;         // [S + 1] I32
  Tensor ctx_len;      // [S] I32
  Tensor block_table;  // [S, max_blocks_per_seq] I32
  int num_seqs = 0;
  int max_q_len = 0;    // host-side maxima, for launch shapes
  int max_ctx_len = 0;
};

// An activation already quantized to E4M3 for linear_fp8_rows, one scale per row (token): codes [M, K]
// (DType::F8E4M3) and scales [M] (F32), each max|row| / 448 (1 for an all-zero row) and code f32_to_e4m3(x /
// scale): what linear_fp8_scaled's Channel recipe makes of x itself. The fused producers (add_rms_norm_fp8,
// silu_mul_fp8) write it directly, so those activations never take a separate quantization pass.
struct Fp8Rows {
  Tensor codes, scales;
  Fp8Rows rows(int64_t r0, int64_t r1) const { return {codes.rows(r0, r1), scales.rows(r0, r1)}; }
  int64_t count() const { return codes.empty() ? 0 : codes.dim(0); }
};

// A 4-bit weight-only (W4A16) linear weight W [N, K], the layout linear_w4 reads (why this layout:
// backend/cuda/gemm_w4.h; the index arithmetic: backend/w4_layout.h). The loader repacks AWQ / GPTQ checkpoints
// into it (model/w4_repack.h). Stored column c of W holds input column perm[c] (identity when perm is empty);
// group g covers stored columns [g * group, (g + 1) * group).
struct W4Weight {
  Tensor codes;         // [N, w4::code_words(K)] I32: the 4-bit q of every (n, c), 8 per word (w4_layout.h)
  Tensor params;        // [N, K / group] I32: each group's scale s (F16 or BF16 bits) and zero point z (w4_layout.h)
  Tensor perm;          // [K] I32 or empty: GPTQ act-order's column order, groups made contiguous
  Tensor inverse_perm;  // [K] I32 with perm: inverse_perm[perm[c]] = c
  int64_t k = 0;        // input features (codes' rows are padded to whole 32-column chunks)
  int64_t group = 0;    // columns per scale / zero group; divides k
  int64_t n() const { return codes.empty() ? 0 : codes.dim(0); }
  bool empty() const { return codes.empty(); }
};

// Per-channel mean and std of the pixel normalisation (header-only; the image pipeline uses the same struct).
using NormalizeConstants = normalize_kernels::ChannelConstants;

// One layer's KV cache: [num_blocks, block_size, kv_heads, head_dim] for K and for V.
struct KvCacheLayer {
  Tensor k;
  Tensor v;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  virtual std::string name() const = 0;
  virtual DType compute_dtype() const = 0;  // activations: F32 on CPU, BF16 on CUDA
  virtual DType weight_dtype() const = 0;   // dense weights

  // ---- memory ----
  virtual Tensor alloc(DType dtype, const Shape& shape) = 0;  // uninitialised
  // Copies host memory (any dtype among F32/F16/BF16) into dst, converting to dst's dtype.
  virtual void upload(Tensor& dst, const Tensor& host_src) = 0;
  // Returns a host copy of src converted to float32 (I32 stays I32).
  virtual Tensor download(const Tensor& src) = 0;
  virtual void copy(Tensor& dst, const Tensor& src) = 0;  // same device, same dtype and numel
  virtual void fill_zero(Tensor& t) = 0;
  // Deterministic random values (backend/random_fill.h) of any dtype but I64, made where t lives: the same bits on
  // every backend for the same RandomFill. Weights built from a config alone (--load-format dummy).
  virtual void fill_random(Tensor& t, const RandomFill& fill) = 0;
  virtual void synchronize() = 0;
  virtual size_t memory_in_use() const = 0;  // bytes taken through alloc()
  // Device bytes free for new allocations now (CUDA: cudaMemGetInfo's free); 0 when unknown or unbounded (the CPU
  // reference). The engine plans its memory against it before loading anything (runtime/memory_plan.h).
  virtual size_t memory_free() const { return 0; }

  // ---- dense ops ----
  // y[M,N] = act(x[M,K] · w[N,K]^T + bias[N]); bias may be empty.
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                      Activation act = Activation::None) = 0;
  // y[M,N] += x[M,K] · w[N,K]^T + bias[N] (bias may be empty): a residual add in the GEMM's epilogue, the sum
  // rounded to the compute dtype once. y is read and written in place; it may not alias x or w.
  virtual void linear_residual(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) = 0;
  // w[N,K] row n *= scale[n] (w [N] rank 1: element n), rounded to w's dtype once: folds a per-channel scale into
  // the linear that produces the channel (InternViT's layer scale into proj and fc2, so that they add into the
  // residual stream themselves, linear_residual). scale: [N] in the compute dtype.
  virtual void scale_rows(Tensor& w, const Tensor& scale) = 0;
  // FP8 W8A8 (E4M3) with a dynamic per-tensor activation scale: linear_fp8_scaled with Fp8Scaling::Tensor.
  void linear_fp8(const Tensor& x, const Tensor& w8, const Tensor& w_scale, const Tensor& bias, Tensor& y,
                  Activation act = Activation::None) {
    linear_fp8_scaled(x, w8, w_scale, Fp8Scaling::Tensor, bias, y, act);
  }
  // FP8 W8A8 (E4M3), one recipe of scales (Fp8Scaling, backend/fp8_recipe.h): w8 [N,K] holds E4M3 codes
  // (DType::F8E4M3) that w_scale (F32 on this backend's device, shape fp8_weight_scale_shape(scaling, N, K))
  // dequantises; x is quantized here with dynamic scales, each s = max|x over its group| / 448 (1 when the group
  // is all zeros) and q() = f32_to_e4m3(x / s) (round to nearest even, saturating):
  //  - Tensor:  one activation scale over the whole of x (so a row's result depends on the other rows), one
  //             weight scale;                 y[m,n] = (sum_k q(x)·w8) * sx * sw
  //  - Channel: one scale per row (token) of x, one per output channel n of w8;
  //                                           y[m,n] = (sum_k q(x)·w8) * sx[m] * sw[n]
  //  - Block:   one scale per token and 128-column block kb of x, one per 128x128 block (nb, kb) of w8;
  //                                           y[m,n] = sum_kb (sum_{k in kb} q(x)·w8) * sx[m,kb] * sw[nb,kb]
  // Sums run in float32; then the bias, then act (GELU) as in linear. K must be a multiple of 16, N of 8. With
  // Channel and Block a row's result depends on that row alone (batch-invariant quantization).
  virtual void linear_fp8_scaled(const Tensor& x, const Tensor& w8, const Tensor& w_scale, Fp8Scaling scaling,
                                 const Tensor& bias, Tensor& y, Activation act = Activation::None) = 0;
  // linear_fp8_scaled with Fp8Scaling::Channel on an activation quantized beforehand:
  // y[m,n] = act((sum_k x.codes[m,k]·w8[n,k]) * x.scales[m] * w_scale[n] + bias[n]); the same bits as
  // linear_fp8_scaled(Channel, act) on the activation that x was quantized from.
  virtual void linear_fp8_rows(const Fp8Rows& x, const Tensor& w8, const Tensor& w_scale, const Tensor& bias,
                               Tensor& y, Activation act = Activation::None) = 0;
  // W4A16: y[M,N] = x[M,K] · W^T + bias[N] (bias may be empty), W[n, perm[c]] = bf16(float(q - z) * s) for the
  // (q, z, s) of stored column c: exactly the bf16 weight model/w4_dequant.h makes of the same checkpoint, so the
  // result equals linear() on that weight up to the order of the float32 sums. `workspace` is a U8 tensor of at
  // least linear_w4_workspace_bytes(N, K, group, permuted) bytes on this backend's device, or empty when that is
  // 0; ops never allocate, so the caller keeps one sized for its largest W4 linear.
  virtual void linear_w4(const Tensor& x, const W4Weight& w, const Tensor& bias, Tensor& y, Tensor& workspace) = 0;
  virtual size_t linear_w4_workspace_bytes(int64_t n, int64_t k, int64_t group, bool permuted) const = 0;
  // y = (x - mean) / sqrt(var + eps) * gamma + beta, per row of x[M,N].
  virtual void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y) = 0;
  // y = x / sqrt(mean(x^2) + eps) * gamma, per row.
  virtual void rms_norm(const Tensor& x, const Tensor& gamma, float eps, Tensor& y) = 0;
  // residual += x; y = rms_norm(residual). residual, x, y: [M,N].
  virtual void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& gamma, float eps, Tensor& y) = 0;
  // residual += x (x may be empty: residual is only read), then y = the Channel quantization (Fp8Rows) of
  // rms_norm(residual) rounded to the compute dtype: the codes and scales add_rms_norm (or rms_norm) followed by
  // linear_fp8_scaled's own quantization would make. y.codes [M,N], y.scales [M]. (scale_add_norm_fp8 with
  // NormKind::Rms and no scale.)
  void add_rms_norm_fp8(Tensor& residual, const Tensor& x, const Tensor& gamma, float eps, Fp8Rows& y) {
    scale_add_norm_fp8(residual, x, Tensor{}, NormKind::Rms, gamma, Tensor{}, eps, y);
  }
  // In-place RMSNorm of the q and k parts of qkv [T, (H + 2*KV)*D] (v is left alone): x / sqrt(mean(x^2) + eps) *
  // gamma, statistics in float32. Each part's scope follows the size of its gamma: q_gamma [D] normalises every
  // q head on its own (Qwen3's q_norm), q_gamma [H*D] all q heads of a token together (InternViT-6B's q_norm over
  // the whole projection); likewise k_gamma [D] or [KV*D]. With one head the two scopes are the same thing.
  virtual void qk_rms_norm(Tensor& qkv, const Tensor& q_gamma, const Tensor& k_gamma, int heads, int kv_heads,
                           int head_dim, float eps) = 0;
  // x[M,N] += scale[N] ⊙ y[M,N]; an empty scale means 1 (plain residual add).
  virtual void scale_add(Tensor& x, const Tensor& y, const Tensor& scale) = 0;
  // scale_add(x, branch, scale), then y = layer_norm(x, gamma, beta, eps) (NormKind::Layer) or
  // rms_norm(x, gamma, eps) (NormKind::Rms, beta empty), in one pass over the rows; the results are exactly those
  // of the two ops (the norm reads x as stored, in compute_dtype()). The vision encoder's residual stream: each
  // layer-scaled branch is folded into x while the next norm is computed. y may alias branch, not x.
  virtual void scale_add_norm(Tensor& x, const Tensor& branch, const Tensor& scale, NormKind kind,
                              const Tensor& gamma, const Tensor& beta, float eps, Tensor& y) = 0;
  // scale_add_norm, or with an empty branch the norm of x alone (x only read), then y = the Channel quantization
  // (Fp8Rows) of the norm rounded to the compute dtype: the codes and scales scale_add_norm (or layer_norm /
  // rms_norm) followed by linear_fp8_scaled's own quantization would make. The FP8 ViT's qkv and fc1 inputs and the
  // FP8 LLM's (add_rms_norm_fp8) take no separate quantization pass. y.codes [M,N], y.scales [M].
  virtual void scale_add_norm_fp8(Tensor& x, const Tensor& branch, const Tensor& scale, NormKind kind,
                                  const Tensor& gamma, const Tensor& beta, float eps, Fp8Rows& y) = 0;
  // y[M,F] = silu(gate_up[:, :F]) * gate_up[:, F:], gate_up [M, 2F].
  virtual void silu_mul(const Tensor& gate_up, Tensor& y) = 0;
  // y = the Channel quantization (Fp8Rows) of silu_mul(gate_up) rounded to the compute dtype; y.codes [M,F].
  virtual void silu_mul_fp8(const Tensor& gate_up, Fp8Rows& y) = 0;
  // y[T,H] = table[ids[t]]; ids [T] I32, table [V,H] (weight dtype). Out-of-range ids throw on CPU and are
  // clamped-and-flagged on CUDA (the host validates ids before they get here).
  virtual void embedding(const Tensor& ids, const Tensor& table, Tensor& y) = 0;
  // dst[idx[i]] = src[i] for rows; src [N,H], idx [N] I32, dst [T,H]. Writes vision embeddings into the LLM's input.
  virtual void scatter_rows(const Tensor& src, const Tensor& idx, Tensor& dst) = 0;
  // y[i] = x[idx[i]]; x [T,H], idx [B] I32, y [B,H]. Picks each sequence's last token before the LM head.
  virtual void gather_rows(const Tensor& x, const Tensor& idx, Tensor& y) = 0;

  // ---- vision ----
  // out[t,c,y,x] = (float(rgb[t,y,x,c]) / 255 - k.mean[c]) / k.std_dev[c] in float32, each op IEEE-rounded
  // (torchvision's ToTensor + Normalize): rgb [T,H,W,3] U8, out [T,3,H,W] F32. Bit-identical on every backend
  // and to the host pipeline's normalize_tiles, so tiles may travel to the device as bytes.
  virtual void normalize_pixels(const Tensor& rgb, const NormalizeConstants& k, Tensor& out) = 0;
  // pixels [B,3,S,S] F32 (normalised) -> patches [B*(S/p)^2, 3*p*p] in (channel, ky, kx) order, patch row-major.
  virtual void patchify(const Tensor& pixels, int patch, Tensor& patches) = 0;
  // out[b,0] = cls + pos[0]; out[b,1+i] = patch_emb[b*P+i] + pos[1+i]. patch_emb [B*P,C], cls [C], pos [P+1,C],
  // out [B*(P+1), C].
  virtual void vit_embed(const Tensor& patch_emb, const Tensor& cls, const Tensor& pos, int batch, Tensor& out) = 0;
  // Non-causal attention within each of `batch` images of `tokens` tokens. qkv [B*T, 3*H*D] laid out
  // [q heads | k heads | v heads], out [B*T, H*D]; scale 1/sqrt(D).
  virtual void attention_dense(const Tensor& qkv, int batch, int tokens, int heads, int head_dim, Tensor& out) = 0;
  // Drops the CLS token and applies InternVL's pixel shuffle (scale 0.5): x [B*(1+G*G), C] with a G×G patch
  // grid -> y [B*(G/2)^2, 4C] in the reference's channel order.
  virtual void pixel_shuffle(const Tensor& x, int batch, int grid, Tensor& y) = 0;

  // ---- decoder ----
  // In-place rotary embedding (rotate-half / NeoX style, as Llama, Qwen2 and InternLM2 use) on the q and k parts
  // of qkv [T, (H + 2*KV)*D]; positions [T] I32; inv_freq[i] = theta^(-2i/D).
  virtual void rope(Tensor& qkv, const Tensor& positions, int heads, int kv_heads, int head_dim, float theta) = 0;
  // Writes the k and v parts of qkv [T, (H + 2*KV)*D] into the cache rows slots[t] (= block * block_size + row).
  virtual void kv_write(const Tensor& qkv, const Tensor& slots, int heads, int kv_heads, int head_dim,
                        KvCacheLayer& cache) = 0;
  // rope, then kv_write: a decoder layer's two steps between its qkv linear and its attention. Backends may fuse
  // them (the CUDA one does: one pass instead of two launches per layer, which counts at decode sizes); the
  // result must be what the two calls give.
  virtual void rope_kv_write(Tensor& qkv, const Tensor& positions, const Tensor& slots, int heads, int kv_heads,
                             int head_dim, float theta, KvCacheLayer& cache) {
    rope(qkv, positions, heads, kv_heads, head_dim, theta);
    kv_write(qkv, slots, heads, kv_heads, head_dim, cache);
  }
  // qk_rms_norm, then rope_kv_write: a Qwen3 decoder layer's steps between its qkv linear and its attention.
  // Backends may fuse them; the result must be what the calls give.
  virtual void qk_norm_rope_kv_write(Tensor& qkv, const Tensor& q_gamma, const Tensor& k_gamma, float eps,
                                     const Tensor& positions, const Tensor& slots, int heads, int kv_heads,
                                     int head_dim, float theta, KvCacheLayer& cache) {
    qk_rms_norm(qkv, q_gamma, k_gamma, heads, kv_heads, head_dim, eps);
    rope_kv_write(qkv, positions, slots, heads, kv_heads, head_dim, theta, cache);
  }
  // Causal GQA attention of the q part of qkv [T, (H+2KV)*D] over the paged cache; out [T, H*D].
  virtual void paged_attention(const Tensor& qkv, const PagedAttentionBatch& batch, const KvCacheLayer& cache,
                               int heads, int kv_heads, int head_dim, Tensor& out) = 0;

  // ---- heads ----
  // ids[b] = argmax over logits[b, :V] (lowest index on ties); logits [B,V] (compute dtype or F32), ids [B] I32.
  virtual void argmax(const Tensor& logits, Tensor& ids) = 0;
  // out[b,k] = log_softmax(logits[b])[ids[b,k]]; ids [B,K] I32, out [B,K] F32.
  virtual void log_softmax_gather(const Tensor& logits, const Tensor& ids, Tensor& out) = 0;

  // ---- optional: recorded op sequences (CUDA graphs) ----
  // Where supports_graphs() is true, ops issued between graph_begin() and graph_end() are recorded, not run;
  // graph_launch(handle) replays them on the same tensors (same addresses: change inputs by writing into them,
  // e.g. copy() or upload() outside recording). While recording, call only ops (no upload, download,
  // synchronize or alloc). The defaults do nothing: on a backend without graphs, ops run immediately and a
  // caller must check supports_graphs() before relying on replay.
  virtual bool supports_graphs() const { return false; }
  virtual void graph_begin() {}
  virtual int graph_end() { return -1; }  // a handle for graph_launch
  virtual void graph_launch(int handle) {}
  virtual void graph_release(int handle) {}

  // ---- optional: batch invariance ----
  // On: every op gives each row (token, sequence) the same bits whatever else shares the call, so a request's
  // outputs do not depend on its batch-mates (kernels and algorithms chosen by the op's own shape only, never by
  // M, the step's longest query or its sequence count). Costs speed where the fastest choice depends on the batch.
  // The CPU reference is batch-invariant already (each output row sums in one fixed order): the default does
  // nothing.
  virtual void set_batch_invariant(bool on) { (void)on; }
};

std::unique_ptr<Backend> make_cpu_backend();
// Throws fovea::Error("built without CUDA") in builds without the CUDA backend, or when no GPU is present.
std::unique_ptr<Backend> make_cuda_backend(int device_index = 0);
bool cuda_backend_available();  // compiled in and a GPU is visible
int cuda_device_count();        // GPUs visible to this process (0 without the CUDA backend)
// Makes the calling thread's CUDA calls go to GPU `device_index` (CUDA's current device is per thread): every
// thread that drives a CudaBackend on a GPU other than 0 calls it first. No-op without the CUDA backend.
void bind_cuda_device(int device_index);
// "cpu", "cuda", or "auto" (cuda when available); device_index picks the GPU for cuda.
std::unique_ptr<Backend> make_backend(const std::string& name, int device_index = 0);

}  // namespace fovea

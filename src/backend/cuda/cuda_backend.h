// CudaBackend: bf16 activations and weights, f32 accumulation, one CUDA stream on one device. Memory is taken
// with cudaMalloc through alloc() (the runner allocates everything once at start-up); ops enqueue kernels on
// the stream and return. Index errors the interface says are "clamped and flagged" set a device flag that
// synchronize() turns into a fovea::Error.
//
// Environment, read once here: FOVEA_PROFILE_OPS=1 times every op with CUDA events (op_profiler.h; the table
// goes to stderr when the backend is destroyed, with one line per tuned small-M GEMM shape). The kernels are the
// ones measured fastest; the variants they were measured against, and the FOVEA_* switches that chose among
// them, were removed (the last tree with them: commit fb2dff3).
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/gemm_fp8.h"
#include "backend/cuda/gemm_lt.h"
#include "backend/cuda/gemm_w4.h"
#include "backend/cuda/op_profiler.h"

namespace fovea::cuda {

class HostStager;
struct LinearOp;  // cuda_ops.cc: the names a bf16 linear's checks give

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device_index);
  ~CudaBackend() override;

  Device device() const override { return Device::CUDA; }
  std::string name() const override { return "cuda"; }
  DType compute_dtype() const override { return DType::BF16; }
  DType weight_dtype() const override { return DType::BF16; }

  Tensor alloc(DType dtype, const Shape& shape) override;
  void upload(Tensor& dst, const Tensor& host_src) override;
  Tensor download(const Tensor& src) override;
  void copy(Tensor& dst, const Tensor& src) override;
  void fill_zero(Tensor& t) override;
  void fill_random(Tensor& t, const RandomFill& fill) override;
  void synchronize() override;
  size_t memory_in_use() const override { return *bytes_in_use_; }
  size_t memory_free() const override;

  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, Activation act) override;
  void linear_residual(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) override;
  void scale_rows(Tensor& w, const Tensor& scale) override;
  void linear_w4(const Tensor& x, const W4Weight& w, const Tensor& bias, Tensor& y, Tensor& workspace) override;
  size_t linear_w4_workspace_bytes(int64_t n, int64_t k, int64_t group, bool permuted) const override;
  void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y) override;
  void rms_norm(const Tensor& x, const Tensor& gamma, float eps, Tensor& y) override;
  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& gamma, float eps, Tensor& y) override;
  void qk_rms_norm(Tensor& qkv, const Tensor& q_gamma, const Tensor& k_gamma, int heads, int kv_heads, int head_dim,
                   float eps) override;
  void scale_add(Tensor& x, const Tensor& y, const Tensor& scale) override;
  void scale_add_norm(Tensor& x, const Tensor& branch, const Tensor& scale, NormKind kind, const Tensor& gamma,
                      const Tensor& beta, float eps, Tensor& y) override;
  void silu_mul(const Tensor& gate_up, Tensor& y) override;
  void embedding(const Tensor& ids, const Tensor& table, Tensor& y) override;
  void scatter_rows(const Tensor& src, const Tensor& idx, Tensor& dst) override;
  void gather_rows(const Tensor& x, const Tensor& idx, Tensor& y) override;

  void normalize_pixels(const Tensor& rgb, const NormalizeConstants& k, Tensor& out) override;
  void patchify(const Tensor& pixels, int patch, Tensor& patches) override;
  void vit_embed(const Tensor& patch_emb, const Tensor& cls, const Tensor& pos, int batch, Tensor& out) override;
  void attention_dense(const Tensor& qkv, int batch, int tokens, int heads, int head_dim, Tensor& out) override;
  void pixel_shuffle(const Tensor& x, int batch, int grid, Tensor& y) override;

  void rope(Tensor& qkv, const Tensor& positions, int heads, int kv_heads, int head_dim, float theta) override;
  void kv_write(const Tensor& qkv, const Tensor& slots, int heads, int kv_heads, int head_dim,
                KvCacheLayer& cache) override;
  void linear_fp8_scaled(const Tensor& x, const Tensor& w8, const Tensor& w_scale, Fp8Scaling scaling,
                         const Tensor& bias, Tensor& y, Activation act = Activation::None) override;
  void linear_fp8_rows(const Fp8Rows& x, const Tensor& w8, const Tensor& w_scale, const Tensor& bias, Tensor& y,
                       Activation act = Activation::None) override;
  void scale_add_norm_fp8(Tensor& x, const Tensor& branch, const Tensor& scale, NormKind kind, const Tensor& gamma,
                          const Tensor& beta, float eps, Fp8Rows& y) override;
  void silu_mul_fp8(const Tensor& gate_up, Fp8Rows& y) override;
  void rope_kv_write(Tensor& qkv, const Tensor& positions, const Tensor& slots, int heads, int kv_heads,
                     int head_dim, float theta, KvCacheLayer& cache) override;
  // One kernel (launch_qk_norm_rope_kv_write) unless the shape does not fit it.
  void qk_norm_rope_kv_write(Tensor& qkv, const Tensor& q_gamma, const Tensor& k_gamma, float eps,
                             const Tensor& positions, const Tensor& slots, int heads, int kv_heads, int head_dim,
                             float theta, KvCacheLayer& cache) override;
  void paged_attention(const Tensor& qkv, const PagedAttentionBatch& batch, const KvCacheLayer& cache, int heads,
                       int kv_heads, int head_dim, Tensor& out) override;

  void argmax(const Tensor& logits, Tensor& ids) override;
  void log_softmax_gather(const Tensor& logits, const Tensor& ids, Tensor& out) override;

  bool supports_graphs() const override { return true; }
  void graph_begin() override;
  // Pinned GEMM algorithms, no fused-W4 kernel, one attention kernel without split-KV (backend.h).
  void set_batch_invariant(bool on) override;
  int graph_end() override;
  void graph_launch(int handle) override;
  void graph_release(int handle) override;

  cudaStream_t stream() const { return stream_; }
  // The op profile so far (FOVEA_PROFILE_OPS=1; synchronizes the stream), or "" when profiling is off.
  std::string profile_report();

 private:
  // linear (accumulate false) and linear_residual (true): the checks, the profiler's label, the cuBLASLt GEMM.
  void bf16_linear(const LinearOp& names, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                   Activation act, bool accumulate);
  // The scaled FP8 GEMM on a quantized activation x8 (x_scale: the recipe's activation scales) into out [m, n],
  // with the bias and GELU in cuBLASLt's epilogue where it has one for these scale modes, else in a pass after.
  void fp8_gemm(const uint8_t* x8, const float* x_scale, const Tensor& w8, const Tensor& w_scale, Fp8Scaling scaling,
                const __nv_bfloat16* bias, __nv_bfloat16* out, int64_t m, int64_t n, int64_t k, Activation act);
  // linear_fp8_scaled's buffer for the quantized activation and its per-token / per-block scales, at least
  // `bytes` (and the per-tensor stats floats); grows only outside graph captures.
  uint8_t* fp8_activation_buffer(size_t bytes);
  // At least `count` floats of 1.0 on the device: the weight block scales of Fp8Scaling::ChannelAct128's block GEMM
  // (any layout of ones is the same ones). Grown outside graph captures only; old buffers kept for recorded graphs.
  const float* fp8_unit_scales(size_t count);

  int device_index_;
  cudaStream_t stream_ = nullptr;
  int* error_flag_ = nullptr;  // device int: set by kernels that clamp or skip a bad index
  bool batch_invariant_ = false;
  float* attention_workspace_ = nullptr;  // split-KV partial results, allocated once
  size_t attention_workspace_bytes_ = 0;
  std::shared_ptr<std::atomic<size_t>> bytes_in_use_;  // shared with the deleters of allocated tensors
  std::unique_ptr<LtGemm> gemm_;
  std::unique_ptr<LtFp8Gemm> fp8_gemm_;  // made on the first linear_fp8
  bool w4_prepared_ = false;             // gemm_w4's shared-memory limits raised (first linear_w4)
  // linear_fp8's quantized activation (grown outside graph captures; outgrown buffers are kept for the graphs
  // that recorded them) and its two floats: max|x| and the scale.
  uint8_t* fp8_activation_ = nullptr;
  size_t fp8_activation_bytes_ = 0;
  std::vector<void*> fp8_retired_;
  float* fp8_stats_ = nullptr;
  float* fp8_ones_ = nullptr;
  size_t fp8_ones_count_ = 0;
  std::unique_ptr<HostStager> stager_;  // pinned staging of upload(), allocated once
  std::vector<cudaGraphExec_t> graphs_;  // by handle; null once released
  std::unique_ptr<OpProfiler> profiler_;  // null unless FOVEA_PROFILE_OPS=1: ops then pay one branch
};

}  // namespace fovea::cuda

// CpuBackend: the scalar reference implementation of every op in backend/backend.h. Activations and weights are
// float32, accumulation is float32 (double for the reductions of norms and softmax). Ops run on the calling
// thread plus the global thread pool, split over rows; they are synchronous, so synchronize() is a no-op.
// The CUDA backend is tested against these ops: they follow the documented semantics literally and check every
// shape, dtype and index they are given.
#pragma once
#include <atomic>
#include <memory>

#include "backend/backend.h"

namespace fovea {

class CpuBackend : public Backend {
 public:
  CpuBackend();

  Device device() const override { return Device::CPU; }
  std::string name() const override { return "cpu"; }
  DType compute_dtype() const override { return DType::F32; }
  DType weight_dtype() const override { return DType::F32; }

  Tensor alloc(DType dtype, const Shape& shape) override;
  void upload(Tensor& dst, const Tensor& host_src) override;
  Tensor download(const Tensor& src) override;
  void copy(Tensor& dst, const Tensor& src) override;
  void fill_zero(Tensor& t) override;
  void fill_random(Tensor& t, const RandomFill& fill) override;
  void synchronize() override {}
  size_t memory_in_use() const override { return bytes_in_use_->load(); }

  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, Activation act) override;
  void linear_residual(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) override;
  void scale_rows(Tensor& w, const Tensor& scale) override;
  void linear_fp8_scaled(const Tensor& x, const Tensor& w8, const Tensor& w_scale, Fp8Scaling scaling,
                         const Tensor& bias, Tensor& y, Activation act = Activation::None) override;
  void linear_fp8_rows(const Fp8Rows& x, const Tensor& w8, const Tensor& w_scale, const Tensor& bias, Tensor& y,
                       Activation act = Activation::None) override;
  void scale_add_norm_fp8(Tensor& x, const Tensor& branch, const Tensor& scale, NormKind kind, const Tensor& gamma,
                          const Tensor& beta, float eps, Fp8Rows& y) override;
  void silu_mul_fp8(const Tensor& gate_up, Fp8Rows& y) override;
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
  void paged_attention(const Tensor& qkv, const PagedAttentionBatch& batch, const KvCacheLayer& cache, int heads,
                       int kv_heads, int head_dim, Tensor& out) override;

  void argmax(const Tensor& logits, Tensor& ids) override;
  void log_softmax_gather(const Tensor& logits, const Tensor& ids, Tensor& out) override;

 private:
  // Shared with every allocation's deleter, so tensors may outlive the backend.
  std::shared_ptr<std::atomic<size_t>> bytes_in_use_;
};

}  // namespace fovea

// A Backend decorator that implements the optional recording API (graph_begin/end/launch) on top of any
// backend by storing the ops issued while recording as closures and replaying them. It lets the runtime's
// CUDA-graph path (decode replay) run and be checked against the golden references on the CPU. Like a CUDA
// graph, a closure keeps the tensors (addresses) it was given and reads their contents at replay time; memory
// calls while recording throw, as the contract in backend.h forbids them.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace fovea::test {

class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(std::unique_ptr<Backend> inner) : in_(std::move(inner)) {}

  int launches() const { return launches_; }

  Device device() const override { return in_->device(); }
  std::string name() const override { return "recording-" + in_->name(); }
  DType compute_dtype() const override { return in_->compute_dtype(); }
  DType weight_dtype() const override { return in_->weight_dtype(); }

  Tensor alloc(DType dtype, const Shape& shape) override { return no_record("alloc"), in_->alloc(dtype, shape); }
  void upload(Tensor& dst, const Tensor& src) override { no_record("upload"), in_->upload(dst, src); }
  Tensor download(const Tensor& src) override { return no_record("download"), in_->download(src); }
  void synchronize() override { no_record("synchronize"), in_->synchronize(); }
  size_t memory_in_use() const override { return in_->memory_in_use(); }
  void copy(Tensor& dst, const Tensor& src) override {
    op([=, this]() mutable { in_->copy(dst, src); });
  }
  void fill_zero(Tensor& t) override {
    op([=, this]() mutable { in_->fill_zero(t); });
  }
  void fill_random(Tensor& t, const RandomFill& fill) override {
    op([=, this]() mutable { in_->fill_random(t, fill); });
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, Activation a) override {
    op([=, this]() mutable { in_->linear(x, w, b, y, a); });
  }
  void linear_residual(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) override {
    op([=, this]() mutable { in_->linear_residual(x, w, b, y); });
  }
  void scale_rows(Tensor& w, const Tensor& s) override {
    op([=, this]() mutable { in_->scale_rows(w, s); });
  }
  void linear_fp8_scaled(const Tensor& x, const Tensor& w8, const Tensor& ws, Fp8Scaling s, const Tensor& b, Tensor& y,
                         Activation a) override {
    op([=, this]() mutable { in_->linear_fp8_scaled(x, w8, ws, s, b, y, a); });
  }
  void linear_fp8_rows(const Fp8Rows& x, const Tensor& w8, const Tensor& ws, const Tensor& b, Tensor& y,
                       Activation act = Activation::None) override {
    op([=, this]() mutable { in_->linear_fp8_rows(x, w8, ws, b, y, act); });
  }
  void scale_add_norm_fp8(Tensor& x, const Tensor& br, const Tensor& s, NormKind kind, const Tensor& g,
                          const Tensor& b, float eps, Fp8Rows& y) override {
    op([=, this]() mutable { in_->scale_add_norm_fp8(x, br, s, kind, g, b, eps, y); });
  }
  void silu_mul_fp8(const Tensor& gu, Fp8Rows& y) override {
    op([=, this]() mutable { in_->silu_mul_fp8(gu, y); });
  }
  void linear_w4(const Tensor& x, const W4Weight& w, const Tensor& b, Tensor& y, Tensor& ws) override {
    op([=, this]() mutable { in_->linear_w4(x, w, b, y, ws); });
  }
  size_t linear_w4_workspace_bytes(int64_t n, int64_t k, int64_t group, bool permuted) const override {
    return in_->linear_w4_workspace_bytes(n, k, group, permuted);
  }
  void layer_norm(const Tensor& x, const Tensor& g, const Tensor& b, float eps, Tensor& y) override {
    op([=, this]() mutable { in_->layer_norm(x, g, b, eps, y); });
  }
  void rms_norm(const Tensor& x, const Tensor& g, float eps, Tensor& y) override {
    op([=, this]() mutable { in_->rms_norm(x, g, eps, y); });
  }
  void add_rms_norm(Tensor& r, const Tensor& x, const Tensor& g, float eps, Tensor& y) override {
    op([=, this]() mutable { in_->add_rms_norm(r, x, g, eps, y); });
  }
  void qk_rms_norm(Tensor& qkv, const Tensor& qg, const Tensor& kg, int h, int kv, int d, float eps) override {
    op([=, this]() mutable { in_->qk_rms_norm(qkv, qg, kg, h, kv, d, eps); });
  }
  void scale_add(Tensor& x, const Tensor& y, const Tensor& s) override {
    op([=, this]() mutable { in_->scale_add(x, y, s); });
  }
  void scale_add_norm(Tensor& x, const Tensor& br, const Tensor& s, NormKind kind, const Tensor& g, const Tensor& b,
                      float eps, Tensor& y) override {
    op([=, this]() mutable { in_->scale_add_norm(x, br, s, kind, g, b, eps, y); });
  }
  void silu_mul(const Tensor& gu, Tensor& y) override {
    op([=, this]() mutable { in_->silu_mul(gu, y); });
  }
  void embedding(const Tensor& ids, const Tensor& table, Tensor& y) override {
    op([=, this]() mutable { in_->embedding(ids, table, y); });
  }
  void scatter_rows(const Tensor& src, const Tensor& idx, Tensor& dst) override {
    op([=, this]() mutable { in_->scatter_rows(src, idx, dst); });
  }
  void gather_rows(const Tensor& x, const Tensor& idx, Tensor& y) override {
    op([=, this]() mutable { in_->gather_rows(x, idx, y); });
  }
  void normalize_pixels(const Tensor& rgb, const NormalizeConstants& k, Tensor& out) override {
    op([=, this]() mutable { in_->normalize_pixels(rgb, k, out); });
  }
  void patchify(const Tensor& px, int patch, Tensor& out) override {
    op([=, this]() mutable { in_->patchify(px, patch, out); });
  }
  void vit_embed(const Tensor& e, const Tensor& c, const Tensor& p, int b, Tensor& out) override {
    op([=, this]() mutable { in_->vit_embed(e, c, p, b, out); });
  }
  void attention_dense(const Tensor& qkv, int b, int t, int h, int d, Tensor& out) override {
    op([=, this]() mutable { in_->attention_dense(qkv, b, t, h, d, out); });
  }
  void pixel_shuffle(const Tensor& x, int b, int g, Tensor& y) override {
    op([=, this]() mutable { in_->pixel_shuffle(x, b, g, y); });
  }
  void rope(Tensor& qkv, const Tensor& pos, int h, int kv, int d, float theta) override {
    op([=, this]() mutable { in_->rope(qkv, pos, h, kv, d, theta); });
  }
  void rope_kv_write(Tensor& qkv, const Tensor& pos, const Tensor& slots, int h, int kv, int d, float theta,
                     KvCacheLayer& cache) override {
    op([=, this]() mutable { in_->rope_kv_write(qkv, pos, slots, h, kv, d, theta, cache); });
  }
  void qk_norm_rope_kv_write(Tensor& qkv, const Tensor& qg, const Tensor& kg, float eps, const Tensor& pos,
                             const Tensor& slots, int h, int kv, int d, float theta, KvCacheLayer& cache) override {
    op([=, this]() mutable { in_->qk_norm_rope_kv_write(qkv, qg, kg, eps, pos, slots, h, kv, d, theta, cache); });
  }
  void kv_write(const Tensor& qkv, const Tensor& slots, int h, int kv, int d, KvCacheLayer& cache) override {
    op([=, this]() mutable { in_->kv_write(qkv, slots, h, kv, d, cache); });
  }
  void paged_attention(const Tensor& qkv, const PagedAttentionBatch& batch, const KvCacheLayer& cache, int h, int kv,
                       int d, Tensor& out) override {
    op([=, this]() mutable { in_->paged_attention(qkv, batch, cache, h, kv, d, out); });
  }
  void argmax(const Tensor& logits, Tensor& ids) override {
    op([=, this]() mutable { in_->argmax(logits, ids); });
  }
  void log_softmax_gather(const Tensor& logits, const Tensor& ids, Tensor& out) override {
    op([=, this]() mutable { in_->log_softmax_gather(logits, ids, out); });
  }

  bool supports_graphs() const override { return true; }
  void graph_begin() override {
    FOVEA_CHECK(!recording_, "graph_begin while recording");
    recording_ = true;
    current_.clear();
  }
  int graph_end() override {
    FOVEA_CHECK(recording_, "graph_end without graph_begin");
    recording_ = false;
    graphs_.push_back(std::move(current_));
    return int(graphs_.size()) - 1;
  }
  void graph_launch(int handle) override {
    FOVEA_CHECK(!recording_ && handle >= 0 && size_t(handle) < graphs_.size(), "graph_launch ", handle);
    ++launches_;
    for (auto& f : graphs_[size_t(handle)]) f();
  }
  void graph_release(int handle) override {
    if (handle >= 0 && size_t(handle) < graphs_.size()) graphs_[size_t(handle)].clear();
  }

 private:
  void no_record(const char* what) const { FOVEA_CHECK(!recording_, what, " while recording"); }
  void op(std::function<void()> f) {
    if (recording_) {
      current_.push_back(std::move(f));
    } else {
      f();
    }
  }

  std::unique_ptr<Backend> in_;
  bool recording_ = false;
  std::vector<std::function<void()>> current_;
  std::vector<std::vector<std::function<void()>>> graphs_;
  int launches_ = 0;
};

}  // namespace fovea::test

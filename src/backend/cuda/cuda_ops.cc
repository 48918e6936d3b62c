// CudaBackend's ops: check shapes and dtypes on the host (fovea::Error on a mismatch), then launch.
#include <cstdlib>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_info.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/op_checks.h"
#include "backend/w4_layout.h"

namespace fovea::cuda {

// The names bf16_linear's checks give (literals: no strings are built on the hot path).
struct LinearOp {
  const char *op, *weight, *input, *output, *bias;
};
namespace {
constexpr LinearOp kLinear{"linear", "linear weight", "linear input", "linear output", "linear bias"};
constexpr LinearOp kLinearResidual{"linear_residual", "linear_residual weight", "linear_residual input",
                                   "linear_residual output", "linear_residual bias"};
}  // namespace

void CudaBackend::linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, Activation act) {
  bf16_linear(kLinear, x, w, bias, y, act, false);
}

// cuBLASLt with beta = 1 and y as both C and D (in place, which it allows for identical layouts).
void CudaBackend::linear_residual(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  bf16_linear(kLinearResidual, x, w, bias, y, Activation::None, true);
}

void CudaBackend::bf16_linear(const LinearOp& names, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                              Activation act, bool accumulate) {
  FOVEA_CHECK(w.rank() == 2, names.op, ": weight shape ", shape_str(w.shape));
  const int64_t n = w.dim(0), k = w.dim(1);
  expect(w, DType::BF16, {n, k}, names.weight);
  const int64_t m = rows_of(x, DType::BF16, k, names.input);
  FOVEA_CHECK(rows_of(y, DType::BF16, n, names.output) == m, names.op, ": output ", shape_str(y.shape),
              " for input ", shape_str(x.shape));
  if (accumulate) FOVEA_CHECK(y.data != x.data && y.data != w.data, names.op, ": y aliases an input");
  if (!bias.empty()) expect_numel(bias, DType::BF16, n, names.bias);
  const GemmEpilogue epilogue = gemm_epilogue(!bias.empty(), act == Activation::Gelu);
  const bf16* bias_ptr = bias.empty() ? nullptr : cbf(bias);
  // With the profiler on, the plan (and its tuning, for small M) is made before the op's events.
  if (profiler_) gemm_->prepare(cbf(x), cbf(w), bias_ptr, mbf(y), int(m), int(n), int(k), epilogue, accumulate);
  OpScope scope(profiler_.get(), OpCategory::Gemm,
                [&] { return str(names.op, " M=", m, " N=", n, " K=", k, " ", gemm_epilogue_name(epilogue)); });
  gemm_->run(cbf(x), cbf(w), bias_ptr, mbf(y), int(m), int(n), int(k), epilogue, accumulate);
}

void CudaBackend::scale_rows(Tensor& w, const Tensor& scale) {
  FOVEA_CHECK(w.dtype == DType::BF16 && w.device == Device::CUDA && (w.rank() == 1 || w.rank() == 2),
              "scale_rows: w must be a bf16 CUDA tensor [N] or [N, K], got ", shape_str(w.shape));
  const int64_t n = w.dim(0), k = w.rank() == 2 ? w.dim(1) : 1;
  expect_numel(scale, DType::BF16, n, "scale_rows scale");
  launch_scale_rows(mbf(w), cbf(scale), n, k, stream_);
}

// W4A16 (gemm_w4.h): the fused kernel for decode-sized M, else the weight dequantized into the workspace and the
// bf16 GEMM.
void CudaBackend::linear_w4(const Tensor& x, const W4Weight& w, const Tensor& bias, Tensor& y, Tensor& workspace) {
  w4::check_weight(w, Device::CUDA, "linear_w4");
  const int64_t n = w.n(), k = w.k;
  const int64_t m = rows_of(x, DType::BF16, k, "linear_w4 input");
  FOVEA_CHECK(rows_of(y, DType::BF16, n, "linear_w4 output") == m, "linear_w4: output ", shape_str(y.shape),
              " for input ", shape_str(x.shape));
  if (!bias.empty()) expect_numel(bias, DType::BF16, n, "linear_w4 bias");
  const bool permuted = !w.perm.empty();
  const size_t needed = linear_w4_workspace_bytes(n, k, w.group, permuted);
  FOVEA_CHECK(workspace.device == Device::CUDA && !workspace.empty() && workspace.nbytes() >= needed,
              "linear_w4: a workspace of ", needed, " device bytes is needed, got ", workspace.nbytes());
  if (!w4_prepared_) {
    prepare_w4_kernels();
    w4_prepared_ = true;
  }
  const auto* codes = static_cast<const uint32_t*>(w.codes.data);
  const auto* params = static_cast<const uint32_t*>(w.params.data);
  auto* scratch = static_cast<unsigned char*>(workspace.data);
  const bf16* bias_ptr = bias.empty() ? nullptr : cbf(bias);
  const bool x_aligned = (reinterpret_cast<uintptr_t>(x.data) & 15u) == 0;
  // The fused kernel serves small M only: with batch invariance on, every M takes the dequantize + GEMM path.
  if (!batch_invariant_ && w4_fused_supported(m, n, k, w.group, x_aligned)) {
    const int splits = w4_fused_splits(n, k, sm_count(device_index_));
    OpScope scope(profiler_.get(), OpCategory::Gemm,
                  [&] { return str("linear_w4 M=", m, " N=", n, " K=", k, " fused S=", splits); });
    const bf16* input = cbf(x);
    if (permuted) {
      auto* gathered = reinterpret_cast<bf16*>(scratch);
      launch_w4_gather_columns(cbf(x), ci32(w.perm), gathered, int(m), int(k), stream_);
      input = gathered;
    }
    auto* partials = reinterpret_cast<float*>(scratch + w4_partials_offset(k, permuted));
    launch_w4_fused(input, codes, params, bias_ptr, mbf(y), partials, int(m), int(n), int(k), int(w.group), splits,
                    stream_);
    return;
  }
  auto* dense = reinterpret_cast<bf16*>(scratch);
  OpScope scope(profiler_.get(), OpCategory::Gemm,
                [&] { return str("linear_w4 M=", m, " N=", n, " K=", k, " dequantize+lt"); });
  launch_w4_dequantize(codes, params, permuted ? ci32(w.inverse_perm) : nullptr, dense, int(n), int(k), int(w.group),
                       stream_);
  gemm_->run(cbf(x), dense, bias_ptr, mbf(y), int(m), int(n), int(k), gemm_epilogue(!bias.empty(), false));
}

size_t CudaBackend::linear_w4_workspace_bytes(int64_t n, int64_t k, int64_t group, bool permuted) const {
  return w4_workspace_bytes(n, k, group, permuted, sm_count(device_index_));
}

void CudaBackend::layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y) {
  const int64_t cols = x.dim(-1), rows = rows_of(x, DType::BF16, cols, "layer_norm input");
  FOVEA_CHECK(rows_of(y, DType::BF16, cols, "layer_norm output") == rows, "layer_norm: output shape");
  expect_numel(gamma, DType::BF16, cols, "layer_norm gamma");
  expect_numel(beta, DType::BF16, cols, "layer_norm beta");
  OpScope scope(profiler_.get(), OpCategory::Norm, [&] { return rows_label("layer_norm", rows); });
  launch_layer_norm(cbf(x), cbf(gamma), cbf(beta), eps, mbf(y), int(rows), int(cols), stream_);
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& gamma, float eps, Tensor& y) {
  const int64_t cols = x.dim(-1), rows = rows_of(x, DType::BF16, cols, "rms_norm input");
  FOVEA_CHECK(rows_of(y, DType::BF16, cols, "rms_norm output") == rows, "rms_norm: output shape");
  expect_numel(gamma, DType::BF16, cols, "rms_norm gamma");
  OpScope scope(profiler_.get(), OpCategory::Norm, [&] { return rows_label("rms_norm", rows); });
  launch_rms_norm(cbf(x), cbf(gamma), eps, mbf(y), int(rows), int(cols), stream_);
}

void CudaBackend::add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& gamma, float eps, Tensor& y) {
  const int64_t cols = residual.dim(-1), rows = rows_of(residual, DType::BF16, cols, "add_rms_norm residual");
  FOVEA_CHECK(rows_of(x, DType::BF16, cols, "add_rms_norm input") == rows, "add_rms_norm: input shape");
  FOVEA_CHECK(rows_of(y, DType::BF16, cols, "add_rms_norm output") == rows, "add_rms_norm: output shape");
  expect_numel(gamma, DType::BF16, cols, "add_rms_norm gamma");
  OpScope scope(profiler_.get(), OpCategory::Norm, [&] { return rows_label("add_rms_norm", rows); });
  launch_scale_add_rms_norm(mbf(residual), cbf(x), nullptr, cbf(gamma), eps, mbf(y), int(rows), int(cols), stream_);
}

void CudaBackend::qk_rms_norm(Tensor& qkv, const Tensor& q_gamma, const Tensor& k_gamma, int heads, int kv_heads,
                              int head_dim, float eps) {
  FOVEA_CHECK(heads > 0 && kv_heads > 0 && head_dim > 0, "qk_rms_norm: bad head sizes");
  const int64_t q_width = int64_t(heads) * head_dim, k_width = int64_t(kv_heads) * head_dim;
  const int64_t tokens = rows_of(qkv, DType::BF16, q_width + 2 * k_width, "qk_rms_norm qkv");
  auto group_of = [&](const Tensor& gamma, int64_t part_width, const char* what) {
    FOVEA_CHECK(gamma.numel() == head_dim || gamma.numel() == part_width, "qk_rms_norm: ", what, " has ",
                gamma.numel(), " values, expected ", head_dim, " (per head) or ", part_width, " (all heads)");
    expect_numel(gamma, DType::BF16, gamma.numel(), what);
    return int(gamma.numel());
  };
  const int q_group = group_of(q_gamma, q_width, "qk_rms_norm q_gamma");
  const int k_group = group_of(k_gamma, k_width, "qk_rms_norm k_gamma");
  OpScope scope(profiler_.get(), OpCategory::Norm,
                [&] { return str("qk_rms_norm rows=", tokens, " group=", q_group); });
  launch_qk_rms_norm(mbf(qkv), int(tokens), heads, kv_heads, head_dim, q_group, k_group, cbf(q_gamma), cbf(k_gamma),
                     eps, stream_);
}

void CudaBackend::scale_add(Tensor& x, const Tensor& y, const Tensor& scale) {
  const int64_t cols = x.dim(-1), rows = rows_of(x, DType::BF16, cols, "scale_add x");
  FOVEA_CHECK(rows_of(y, DType::BF16, cols, "scale_add y") == rows, "scale_add: shapes ", shape_str(x.shape), " ",
              shape_str(y.shape));
  if (!scale.empty()) expect_numel(scale, DType::BF16, cols, "scale_add scale");
  OpScope scope(profiler_.get(), OpCategory::Elementwise, [&] { return rows_label("scale_add", rows); });
  launch_scale_add(mbf(x), cbf(y), scale.empty() ? nullptr : cbf(scale), int(rows), int(cols), stream_);
}

void CudaBackend::scale_add_norm(Tensor& x, const Tensor& branch, const Tensor& scale, NormKind kind,
                                 const Tensor& gamma, const Tensor& beta, float eps, Tensor& y) {
  const int64_t cols = x.dim(-1), rows = rows_of(x, DType::BF16, cols, "scale_add_norm x");
  FOVEA_CHECK(rows_of(branch, DType::BF16, cols, "scale_add_norm branch") == rows, "scale_add_norm: shapes ",
              shape_str(x.shape), " ", shape_str(branch.shape));
  FOVEA_CHECK(rows_of(y, DType::BF16, cols, "scale_add_norm output") == rows, "scale_add_norm: output shape");
  FOVEA_CHECK(y.data != x.data, "scale_add_norm: y aliases x");
  expect_norm_params("scale_add_norm", cols, kind, scale, gamma, beta);
  const bf16* scale_ptr = scale.empty() ? nullptr : cbf(scale);
  if (kind == NormKind::Rms) {
    OpScope scope(profiler_.get(), OpCategory::Norm, [&] { return rows_label("scale_add_rms_norm", rows); });
    launch_scale_add_rms_norm(mbf(x), cbf(branch), scale_ptr, cbf(gamma), eps, mbf(y), int(rows), int(cols),
                              stream_);
  } else {
    OpScope scope(profiler_.get(), OpCategory::Norm, [&] { return rows_label("scale_add_layer_norm", rows); });
    launch_scale_add_layer_norm(mbf(x), cbf(branch), scale_ptr, cbf(gamma), cbf(beta), eps, mbf(y), int(rows),
                                int(cols), stream_);
  }
}

void CudaBackend::silu_mul(const Tensor& gate_up, Tensor& y) {
  const int64_t f = y.dim(-1), rows = rows_of(y, DType::BF16, f, "silu_mul output");
  FOVEA_CHECK(rows_of(gate_up, DType::BF16, 2 * f, "silu_mul input") == rows, "silu_mul: shapes ",
              shape_str(gate_up.shape), " ", shape_str(y.shape));
  OpScope scope(profiler_.get(), OpCategory::Elementwise, [&] { return rows_label("silu_mul", rows); });
  launch_silu_mul(cbf(gate_up), mbf(y), int(rows), int(f), stream_);
}

void CudaBackend::embedding(const Tensor& ids, const Tensor& table, Tensor& y) {
  FOVEA_CHECK(table.rank() == 2, "embedding table shape ", shape_str(table.shape));
  const int64_t vocab = table.dim(0), hidden = table.dim(1);
  expect(table, DType::BF16, {vocab, hidden}, "embedding table");
  const int64_t tokens = rows_of(y, DType::BF16, hidden, "embedding output");
  expect_numel(ids, DType::I32, tokens, "embedding ids");
  OpScope scope(profiler_.get(), OpCategory::Copy, [&] { return rows_label("embedding", tokens); });
  launch_copy_rows(cbf(table), ci32(ids), vocab, mbf(y), nullptr, tokens, tokens, hidden, error_flag_, stream_);
}

void CudaBackend::scatter_rows(const Tensor& src, const Tensor& idx, Tensor& dst) {
  const int64_t hidden = dst.dim(-1), dst_rows = rows_of(dst, DType::BF16, hidden, "scatter_rows dst");
  const int64_t count = rows_of(src, DType::BF16, hidden, "scatter_rows src");
  if (count == 0) return;
  expect_numel(idx, DType::I32, count, "scatter_rows idx");
  OpScope scope(profiler_.get(), OpCategory::Copy, [&] { return rows_label("scatter_rows", count); });
  launch_copy_rows(cbf(src), nullptr, count, mbf(dst), ci32(idx), dst_rows, count, hidden, error_flag_, stream_);
}

void CudaBackend::gather_rows(const Tensor& x, const Tensor& idx, Tensor& y) {
  const int64_t hidden = x.dim(-1), src_rows = rows_of(x, DType::BF16, hidden, "gather_rows x");
  const int64_t count = rows_of(y, DType::BF16, hidden, "gather_rows y");
  if (count == 0) return;
  expect_numel(idx, DType::I32, count, "gather_rows idx");
  OpScope scope(profiler_.get(), OpCategory::Copy, [&] { return rows_label("gather_rows", count); });
  launch_copy_rows(cbf(x), ci32(idx), src_rows, mbf(y), nullptr, count, count, hidden, error_flag_, stream_);
}

void CudaBackend::normalize_pixels(const Tensor& rgb, const NormalizeConstants& k, Tensor& out) {
  FOVEA_CHECK(rgb.rank() == 4 && rgb.dim(3) == 3, "normalize_pixels: rgb ", shape_str(rgb.shape),
              ", expected [T, H, W, 3]");
  const int64_t tiles = rgb.dim(0), height = rgb.dim(1), width = rgb.dim(2);
  expect(rgb, DType::U8, rgb.shape, "normalize_pixels rgb");
  expect(out, DType::F32, {tiles, 3, height, width}, "normalize_pixels out");
  OpScope scope(profiler_.get(), OpCategory::Copy, [&] { return rows_label("normalize_pixels tiles", tiles); });
  launch_normalize_pixels(static_cast<const uint8_t*>(rgb.data), tiles, height * width, k.mean, k.std_dev,
                          static_cast<float*>(out.data), stream_);
}

void CudaBackend::patchify(const Tensor& pixels, int patch, Tensor& patches) {
  FOVEA_CHECK(pixels.rank() == 4 && pixels.dim(1) == 3 && pixels.dim(2) == pixels.dim(3) && patch > 0 &&
                  pixels.dim(2) % patch == 0,
              "patchify: pixels ", shape_str(pixels.shape), " with patch ", patch);
  const int64_t batch = pixels.dim(0), size = pixels.dim(2), grid = size / patch;
  expect(pixels, DType::F32, pixels.shape, "patchify pixels");
  expect(patches, DType::BF16, {batch * grid * grid, 3 * int64_t(patch) * patch}, "patchify patches");
  OpScope scope(profiler_.get(), OpCategory::Copy, [&] { return rows_label("patchify images", batch); });
  launch_patchify(pixels.ptr<float>(), int(batch), int(size), patch, mbf(patches), stream_);
}

void CudaBackend::vit_embed(const Tensor& patch_emb, const Tensor& cls, const Tensor& pos, int batch, Tensor& out) {
  const int64_t cols = patch_emb.dim(-1), rows = rows_of(patch_emb, DType::BF16, cols, "vit_embed patch_emb");
  FOVEA_CHECK(batch > 0 && rows % batch == 0, "vit_embed: ", rows, " patch rows for batch ", batch);
  const int64_t patches = rows / batch;
  expect_numel(cls, DType::BF16, cols, "vit_embed cls");
  expect_numel(pos, DType::BF16, (patches + 1) * cols, "vit_embed pos");
  expect(out, DType::BF16, {batch * (patches + 1), cols}, "vit_embed out");
  OpScope scope(profiler_.get(), OpCategory::Elementwise, [&] { return rows_label("vit_embed", rows); });
  launch_vit_embed(cbf(patch_emb), cbf(cls), cbf(pos), batch, int(patches), int(cols), mbf(out), stream_);
}

void CudaBackend::attention_dense(const Tensor& qkv, int batch, int tokens, int heads, int head_dim, Tensor& out) {
  FOVEA_CHECK(head_dim > 0 && head_dim % 2 == 0 && head_dim <= 256, "attention_dense: head_dim ", head_dim,
              " (even, up to 256)");
  const int64_t width = int64_t(heads) * head_dim, rows = int64_t(batch) * tokens;
  expect(qkv, DType::BF16, {rows, 3 * width}, "attention_dense qkv");
  expect(out, DType::BF16, {rows, width}, "attention_dense out");
  OpScope scope(profiler_.get(), OpCategory::Attention, [&] { return str("attention_dense batch=", batch, " tokens=", tokens); });
  launch_attention_dense({cbf(qkv), mbf(out), batch, tokens, heads, head_dim}, stream_);
}

void CudaBackend::pixel_shuffle(const Tensor& x, int batch, int grid, Tensor& y) {
  FOVEA_CHECK(grid > 0 && grid % 2 == 0, "pixel_shuffle: grid ", grid, " must be even");
  const int64_t cols = x.dim(-1), half = grid / 2;
  expect(x, DType::BF16, {batch * (1 + int64_t(grid) * grid), cols}, "pixel_shuffle x");
  expect(y, DType::BF16, {batch * half * half, 4 * cols}, "pixel_shuffle y");
  OpScope scope(profiler_.get(), OpCategory::Copy, [&] { return rows_label("pixel_shuffle images", batch); });
  launch_pixel_shuffle(cbf(x), batch, grid, int(cols), mbf(y), stream_);
}

namespace {

// What kv_write and rope_kv_write check: qkv rows, slots, the cache's shape; returns the token count.
int64_t check_kv_write(const Tensor& qkv, const Tensor& slots, int heads, int kv_heads, int head_dim,
                       const KvCacheLayer& cache, const char* op) {
  FOVEA_CHECK(head_dim > 0 && head_dim % 2 == 0, op, ": head_dim ", head_dim, " must be even");
  const int64_t tokens = rows_of(qkv, DType::BF16, int64_t(heads + 2 * kv_heads) * head_dim, "kv_write qkv");
  expect_numel(slots, DType::I32, tokens, "kv_write slots");
  FOVEA_CHECK(cache.k.rank() == 4 && cache.k.dim(2) == kv_heads && cache.k.dim(3) == head_dim, op,
              ": cache shape ", shape_str(cache.k.shape));
  expect(cache.k, DType::BF16, cache.k.shape, "kv_write k cache");
  expect(cache.v, DType::BF16, cache.k.shape, "kv_write v cache");
  return tokens;
}

}  // namespace

void CudaBackend::rope(Tensor& qkv, const Tensor& positions, int heads, int kv_heads, int head_dim, float theta) {
  FOVEA_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope: head_dim ", head_dim, " must be even");
  const int64_t tokens = rows_of(qkv, DType::BF16, int64_t(heads + 2 * kv_heads) * head_dim, "rope qkv");
  expect_numel(positions, DType::I32, tokens, "rope positions");
  OpScope scope(profiler_.get(), OpCategory::Elementwise, [&] { return rows_label("rope", tokens); });
  launch_rope(mbf(qkv), ci32(positions), int(tokens), heads, kv_heads, head_dim, theta, stream_);
}

void CudaBackend::kv_write(const Tensor& qkv, const Tensor& slots, int heads, int kv_heads, int head_dim,
                           KvCacheLayer& cache) {
  const int64_t tokens = check_kv_write(qkv, slots, heads, kv_heads, head_dim, cache, "kv_write");
  if (tokens == 0) return;
  const int64_t num_slots = cache.k.dim(0) * cache.k.dim(1);
  OpScope scope(profiler_.get(), OpCategory::Copy, [&] { return rows_label("kv_write", tokens); });
  launch_kv_write(cbf(qkv), ci32(slots), int(tokens), heads, kv_heads, head_dim, mbf(cache.k), mbf(cache.v),
                  num_slots, error_flag_, stream_);
}

void CudaBackend::rope_kv_write(Tensor& qkv, const Tensor& positions, const Tensor& slots, int heads, int kv_heads,
                                int head_dim, float theta, KvCacheLayer& cache) {
  const int64_t tokens = check_kv_write(qkv, slots, heads, kv_heads, head_dim, cache, "rope_kv_write");
  expect_numel(positions, DType::I32, tokens, "rope_kv_write positions");
  if (tokens == 0) return;
  const int64_t num_slots = cache.k.dim(0) * cache.k.dim(1);
  OpScope scope(profiler_.get(), OpCategory::Elementwise, [&] { return rows_label("rope_kv_write", tokens); });
  launch_rope_kv_write(mbf(qkv), ci32(positions), ci32(slots), int(tokens), heads, kv_heads, head_dim, theta,
                       mbf(cache.k), mbf(cache.v), num_slots, error_flag_, stream_);
}

void CudaBackend::qk_norm_rope_kv_write(Tensor& qkv, const Tensor& q_gamma, const Tensor& k_gamma, float eps,
                                        const Tensor& positions, const Tensor& slots, int heads, int kv_heads,
                                        int head_dim, float theta, KvCacheLayer& cache) {
  if (!qk_norm_rope_fusable(head_dim) || q_gamma.numel() != head_dim ||
      k_gamma.numel() != head_dim)
    return Backend::qk_norm_rope_kv_write(qkv, q_gamma, k_gamma, eps, positions, slots, heads, kv_heads, head_dim,
                                          theta, cache);
  const int64_t tokens = check_kv_write(qkv, slots, heads, kv_heads, head_dim, cache, "qk_norm_rope_kv_write");
  expect_numel(positions, DType::I32, tokens, "qk_norm_rope_kv_write positions");
  expect_numel(q_gamma, DType::BF16, head_dim, "qk_norm_rope_kv_write q_gamma");
  expect_numel(k_gamma, DType::BF16, head_dim, "qk_norm_rope_kv_write k_gamma");
  if (tokens == 0) return;
  const int64_t num_slots = cache.k.dim(0) * cache.k.dim(1);
  OpScope scope(profiler_.get(), OpCategory::Elementwise,
                [&] { return rows_label("qk_norm_rope_kv_write", tokens); });
  launch_qk_norm_rope_kv_write(mbf(qkv), cbf(q_gamma), cbf(k_gamma), eps, ci32(positions), ci32(slots), int(tokens),
                               heads, kv_heads, head_dim, theta, mbf(cache.k), mbf(cache.v), num_slots, error_flag_,
                               stream_);
}

void CudaBackend::paged_attention(const Tensor& qkv, const PagedAttentionBatch& batch, const KvCacheLayer& cache,
                                  int heads, int kv_heads, int head_dim, Tensor& out) {
  FOVEA_CHECK(head_dim > 0 && head_dim % 2 == 0 && head_dim <= 256, "paged_attention: head_dim ", head_dim,
              " (even, up to 256)");
  FOVEA_CHECK(kv_heads > 0 && heads % kv_heads == 0, "paged_attention: ", heads, " heads over ", kv_heads,
              " KV heads");
  const int64_t tokens = rows_of(qkv, DType::BF16, int64_t(heads + 2 * kv_heads) * head_dim, "paged_attention qkv");
  expect(out, DType::BF16, {tokens, int64_t(heads) * head_dim}, "paged_attention out");
  const int seqs = batch.num_seqs;
  expect_numel(batch.cu_q, DType::I32, seqs + 1, "paged_attention cu_q");
  expect_numel(batch.ctx_len, DType::I32, seqs, "paged_attention ctx_len");
  FOVEA_CHECK(batch.block_table.rank() == 2 && batch.block_table.dim(0) == seqs, "paged_attention: block_table ",
              shape_str(batch.block_table.shape), " for ", seqs, " sequences");
  expect(batch.block_table, DType::I32, batch.block_table.shape, "paged_attention block_table");
  FOVEA_CHECK(cache.k.rank() == 4 && cache.k.dim(2) == kv_heads && cache.k.dim(3) == head_dim,
              "paged_attention: cache shape ", shape_str(cache.k.shape));
  expect(cache.k, DType::BF16, cache.k.shape, "paged_attention k cache");
  expect(cache.v, DType::BF16, cache.k.shape, "paged_attention v cache");
  if (tokens == 0 || seqs == 0) return;
  PagedAttentionArgs args{};
  args.qkv = cbf(qkv);
  args.k_cache = cbf(cache.k);
  args.v_cache = cbf(cache.v);
  args.cu_q = ci32(batch.cu_q);
  args.ctx_len = ci32(batch.ctx_len);
  args.block_table = ci32(batch.block_table);
  args.out = mbf(out);
  args.num_seqs = seqs;
  args.max_q_len = batch.max_q_len;
  args.max_ctx_len = batch.max_ctx_len;
  args.max_blocks_per_seq = int(batch.block_table.dim(1));
  args.block_size = int(cache.k.dim(1));
  args.heads = heads;
  args.kv_heads = kv_heads;
  args.head_dim = head_dim;
  args.num_blocks = cache.k.dim(0);
  args.workspace = attention_workspace_;
  args.workspace_bytes = attention_workspace_bytes_;
  args.batch_invariant = batch_invariant_;
  OpScope scope(profiler_.get(), OpCategory::Attention, [&] { return str("paged_attention ", batch.max_q_len == 1 ? "decode" : "prefill", " seqs=", seqs); });
  launch_paged_attention(args, stream_);
}

void CudaBackend::argmax(const Tensor& logits, Tensor& ids) {
  FOVEA_CHECK(logits.dtype == DType::BF16 || logits.dtype == DType::F32, "argmax: logits dtype ",
              dtype_name(logits.dtype));
  const int64_t vocab = logits.dim(-1), rows = rows_of(logits, logits.dtype, vocab, "argmax logits");
  expect_numel(ids, DType::I32, rows, "argmax ids");
  OpScope scope(profiler_.get(), OpCategory::Other, [&] { return rows_label("argmax", rows); });
  launch_argmax(logits.data, logits.dtype == DType::F32, int(rows), int(vocab), ids.ptr<int>(), stream_);
}

void CudaBackend::log_softmax_gather(const Tensor& logits, const Tensor& ids, Tensor& out) {
  FOVEA_CHECK(logits.dtype == DType::BF16 || logits.dtype == DType::F32, "log_softmax_gather: logits dtype ",
              dtype_name(logits.dtype));
  const int64_t vocab = logits.dim(-1), rows = rows_of(logits, logits.dtype, vocab, "log_softmax_gather logits");
  const int64_t k = ids.dim(-1);
  FOVEA_CHECK(rows_of(ids, DType::I32, k, "log_softmax_gather ids") == rows, "log_softmax_gather: ids ",
              shape_str(ids.shape), " for logits ", shape_str(logits.shape));
  FOVEA_CHECK(rows_of(out, DType::F32, k, "log_softmax_gather out") == rows, "log_softmax_gather: out shape");
  OpScope scope(profiler_.get(), OpCategory::Other, [&] { return rows_label("log_softmax_gather", rows); });
  launch_log_softmax_gather(logits.data, logits.dtype == DType::F32, int(rows), int(vocab), ci32(ids), int(k),
                            out.ptr<float>(), error_flag_, stream_);
}

}  // namespace fovea::cuda

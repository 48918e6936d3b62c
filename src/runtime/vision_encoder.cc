#include "runtime/vision_encoder.h"

#include <algorithm>

#include "image/normalize_kernels.h"

namespace fovea {
namespace {
// mlp1.0 is nn.LayerNorm(4C) with PyTorch's default eps, not the ViT's 1e-6.
constexpr float kProjectorNormEps = 1e-5f;
}  // namespace

Tensor VisionEncoder::alloc(DType dtype, const Shape& shape) {
  Tensor t = be_.alloc(dtype, shape);
  workspace_bytes_ += t.nbytes();
  return t;
}

VisionEncoder::VisionEncoder(const ModelDesc& desc, const VisionWeights& weights, Backend& backend, int max_tiles,
                             bool graphs)
    : desc_(desc), w_(weights), be_(backend), max_tiles_(max_tiles), graphs_(graphs && backend.supports_graphs()) {
  const VisionConfig& v = desc.vision;
  FOVEA_CHECK(max_tiles > 0, "vision encoder: max_tiles must be positive");
  FOVEA_CHECK(v.image_size % v.patch_size == 0 && v.grid() % 2 == 0 && v.hidden % v.heads == 0,
              "vision encoder: unsupported geometry image ", v.image_size, " patch ", v.patch_size);
  FOVEA_CHECK(v.downsample_ratio == 0.5f, "vision encoder: only downsample_ratio 0.5 is supported");
  const int64_t T = max_tiles, S = v.image_size, G = v.grid(), C = v.hidden, P = v.patch_size;
  const int64_t rows = T * v.tokens(), shuffled_rows = T * v.tokens_per_tile();
  const DType act = be_.compute_dtype();
  rgb_ = alloc(DType::U8, {T, S, S, 3});
  pixels_ = alloc(DType::F32, {T, 3, S, S});
  patches_ = alloc(act, {T * G * G, 3 * P * P});
  x_ = alloc(act, {rows, C});
  normed_ = alloc(act, {rows, C});
  qkv_ = alloc(act, {rows, 3 * C});
  attn_ = alloc(act, {rows, C});
  mlp_ = alloc(act, {rows, int64_t(v.mlp)});
  // qkv and fc1 take their inputs from the norms before them (scale_add_norm_fp8)
  if (fp8_by_rows(weights.layers, {&VitLayerWeights::qkv8, &VitLayerWeights::fc1_8}))
    normed8_ = {alloc(DType::F8E4M3, {rows, C}), alloc(DType::F32, {rows})};
  shuffled_ = alloc(act, {shuffled_rows, 4 * C});
  shuffled_normed_ = alloc(act, {shuffled_rows, 4 * C});
  hidden_ = alloc(act, {shuffled_rows, int64_t(desc.llm.hidden)});
  out_ = alloc(act, {shuffled_rows, int64_t(desc.llm.hidden)});
  if (graphs_) {  // padding tiles must hold finite numbers before any batch wrote them
    be_.fill_zero(pixels_);
    be_.fill_zero(rgb_);
  }
}

VisionEncoder::~VisionEncoder() {
  for (const auto& [tiles, handle] : recordings_) be_.graph_release(handle);
}

int VisionEncoder::padded_tiles(int tiles) const {
  if (!graphs_) return tiles;
  int bucket = tiles <= 4 ? (tiles <= 1 ? 1 : tiles <= 2 ? 2 : 4) : (tiles + 7) / 8 * 8;
  return std::min(bucket, max_tiles_);
}

Tensor VisionEncoder::pixels(int tiles) const {
  FOVEA_CHECK(tiles > 0 && tiles <= max_tiles_, "vision encoder: ", tiles, " tiles, at most ", max_tiles_);
  return pixels_.rows(0, tiles);
}

Tensor VisionEncoder::rgb_tiles(int tiles) const {
  FOVEA_CHECK(tiles > 0 && tiles <= max_tiles_, "vision encoder: ", tiles, " tiles, at most ", max_tiles_);
  return rgb_.rows(0, tiles);
}

// norm1 / norm2: LayerNorm (InternViT-300M) or RMSNorm without bias (InternViT-6B).
NormKind VisionEncoder::norm_kind() const {
  return desc_.vision.norm == VitNorm::RmsNorm ? NormKind::Rms : NormKind::Layer;
}

// y = act(linear(norm(x))). With FP8 qkv / fc1 weights of per-token scales the norm writes the linear's input
// already quantized (Backend::scale_add_norm_fp8 with no branch): the same codes as the bf16 norm followed by the
// linear's own quantization, without that pass.
void VisionEncoder::norm_then_linear(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& w,
                                     const Fp8Linear& w8, const Tensor& bias, Tensor& y, Activation act) {
  const int64_t rows = x.dim(0);
  const float eps = desc_.vision.norm_eps;
  if (!normed8_.codes.empty()) {
    Fp8Rows normed8 = normed8_.rows(0, rows);
    Tensor read_only = x;  // with no branch the op only reads x
    be_.scale_add_norm_fp8(read_only, Tensor{}, Tensor{}, norm_kind(), gamma, beta, eps, normed8);
    be_.linear_fp8_rows(normed8, w8.codes, w8.scale, bias, y, act);
    return;
  }
  Tensor normed = normed_.rows(0, rows);
  if (norm_kind() == NormKind::Rms) be_.rms_norm(x, gamma, eps, normed);
  else be_.layer_norm(x, gamma, beta, eps, normed);
  apply_linear(be_, normed, w, w8, bias, y, act);
}

// x += ls1 ⊙ proj(attention(norm1(x))), then x += ls2 ⊙ fc2(gelu(fc1(norm2(x)))): proj and fc2 carry the layer
// scales (folded in at load, weights.cc) and add into x in their GEMMs' epilogues (Backend::linear_residual), so
// the residual stream is read and written by the GEMMs alone and the norms only read it.
void VisionEncoder::vit_layer(const VitLayerWeights& w, int tiles) {
  const VisionConfig& v = desc_.vision;
  const int64_t rows = int64_t(tiles) * v.tokens();
  Tensor x = x_.rows(0, rows), qkv = qkv_.rows(0, rows), attn = attn_.rows(0, rows), mlp = mlp_.rows(0, rows);
  const int head_dim = v.hidden / v.heads;
  norm_then_linear(x, w.norm1_w, w.norm1_b, w.qkv_w, w.qkv8, w.qkv_b, qkv);
  // InternViT-6B's q/k RMSNorm over all heads before the attention
  if (v.qk_norm) be_.qk_rms_norm(qkv, w.q_norm, w.k_norm, v.heads, v.heads, head_dim, v.qk_norm_eps);
  be_.attention_dense(qkv, tiles, v.tokens(), v.heads, head_dim, attn);
  be_.linear_residual(attn, w.proj_w, w.proj_b, x);
  norm_then_linear(x, w.norm2_w, w.norm2_b, w.fc1_w, w.fc1_8, w.fc1_b, mlp, Activation::Gelu);
  be_.linear_residual(mlp, w.fc2_w, w.fc2_b, x);
}

void VisionEncoder::project(int tiles) {
  const VisionConfig& v = desc_.vision;
  const int64_t rows = int64_t(tiles) * v.tokens_per_tile();
  Tensor shuffled = shuffled_.rows(0, rows), normed = shuffled_normed_.rows(0, rows);
  Tensor hidden = hidden_.rows(0, rows), out = out_.rows(0, rows);
  be_.pixel_shuffle(x_.rows(0, int64_t(tiles) * v.tokens()), tiles, v.grid(), shuffled);
  be_.layer_norm(shuffled, w_.proj_norm_w, w_.proj_norm_b, kProjectorNormEps, normed);
  be_.linear(normed, w_.proj_fc1_w, w_.proj_fc1_b, hidden, Activation::Gelu);
  be_.linear(hidden, w_.proj_fc2_w, w_.proj_fc2_b, out);
}

Tensor VisionEncoder::encode(int tiles, PixelInput input) {
  FOVEA_CHECK(tiles > 0 && tiles <= max_tiles_, "vision encoder: ", tiles, " tiles, at most ", max_tiles_);
  if (!graphs_) {
    run_ops(tiles, input);
  } else {
    const std::pair<int, PixelInput> key{padded_tiles(tiles), input};
    auto found = recordings_.find(key);
    if (found == recordings_.end()) {
      // One eager run first: GEMM plans and the FP8 activation buffer are made outside the recording (neither
      // may allocate or time kernels inside a capture).
      run_ops(key.first, input);
      be_.graph_begin();
      try {
        run_ops(key.first, input);
      } catch (...) {
        be_.graph_release(be_.graph_end());
        throw;
      }
      found = recordings_.emplace(key, be_.graph_end()).first;
    }
    be_.graph_launch(found->second);
  }
  // The real tiles are the first rows of every workspace: their outputs are the first rows of out_.
  return out_.rows(0, int64_t(tiles) * desc_.vision.tokens_per_tile());
}

void VisionEncoder::run_ops(int tiles, PixelInput input) {
  const VisionConfig& v = desc_.vision;
  const int64_t G = v.grid();
  if (input == PixelInput::Rgb) {
    Tensor normalized = pixels(tiles);
    be_.normalize_pixels(rgb_tiles(tiles), normalize_kernels::kImageNet, normalized);
  }
  Tensor patches = patches_.rows(0, tiles * G * G);
  be_.patchify(pixels(tiles), v.patch_size, patches);
  // Patch embeddings go to normed_ (free until the first layer) and are then combined with CLS and positions.
  Tensor patch_emb = normed_.rows(0, tiles * G * G);
  be_.linear(patches, w_.patch_w, w_.patch_b, patch_emb);
  Tensor x = x_.rows(0, int64_t(tiles) * v.tokens());
  be_.vit_embed(patch_emb, w_.cls, w_.pos, tiles, x);
  for (const VitLayerWeights& layer : w_.layers) vit_layer(layer, tiles);
  project(tiles);
}

Tensor VisionEncoder::last_hidden(int tiles) const {
  FOVEA_CHECK(tiles > 0 && tiles <= max_tiles_, "vision encoder: ", tiles, " tiles, at most ", max_tiles_);
  return x_.rows(0, int64_t(tiles) * desc_.vision.tokens());
}

}  // namespace fovea

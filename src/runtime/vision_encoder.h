// InternViT + the mlp1 projector over a batch of tiles, written against Backend. All activations live in
// workspaces sized for `max_tiles` tiles, allocated at construction; encode() allocates nothing.
// With `graphs` on a backend that records op sequences (CUDA graphs), a batch is padded to a tile-count
// bucket (1, 2, 4, then multiples of 8, and max_tiles) and the bucket's recording is replayed: the ~20 launches
// per layer cost nothing then. Padding is sound because every op is row-wise or (attention) per tile, so the
// padding tiles (zeros at first, later stale pixels) never reach the real tiles' rows.
// Tiles arrive either normalised (F32 [T, 3, S, S] into pixels()) or as the pipeline's RGB bytes (U8
// [T, S, S, 3] into rgb_tiles(), a quarter of the bytes over PCIe); encode(tiles, PixelInput::Rgb) then
// normalises them on the device (Backend::normalize_pixels, bit-identical to the host) as its first op, so a
// recording of that batch includes it.
#pragma once
#include <cstddef>
#include <map>
#include <utility>

#include "backend/backend.h"
#include "model/model_desc.h"
#include "runtime/weights.h"

namespace fovea {

enum class PixelInput : uint8_t { Normalized /* pixels() */, Rgb /* rgb_tiles() */ };

class VisionEncoder {
 public:
  VisionEncoder(const ModelDesc& desc, const VisionWeights& weights, Backend& backend, int max_tiles,
                bool graphs = false);
  ~VisionEncoder();
  VisionEncoder(const VisionEncoder&) = delete;
  VisionEncoder& operator=(const VisionEncoder&) = delete;

  int max_tiles() const { return max_tiles_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

  // Where the caller uploads the pixels of the next batch: [tiles, 3, S, S] F32 view.
  Tensor pixels(int tiles) const;
  // Where the caller uploads the next batch as bytes instead: [tiles, S, S, 3] U8 view.
  Tensor rgb_tiles(int tiles) const;
  // Runs ViT + projector on the first `tiles` tiles of pixels() (or of rgb_tiles(), normalised into pixels()
  // first); returns a view [tiles * tokens_per_tile, llm hidden] of the output workspace, valid until the next
  // encode().
  Tensor encode(int tiles, PixelInput input = PixelInput::Normalized);
  // The ViT's last hidden state of the last encode() (CLS included): [tiles * (1 + G*G), C]. For golden tests.
  Tensor last_hidden(int tiles) const;
  // The tile count a batch of `tiles` runs as: its bucket with graphs, else `tiles`.
  int padded_tiles(int tiles) const;
  int recordings() const { return int(recordings_.size()); }

 private:
  NormKind norm_kind() const;
  void norm_then_linear(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& w,
                        const Fp8Linear& w8, const Tensor& bias, Tensor& y, Activation act = Activation::None);
  void vit_layer(const VitLayerWeights& w, int tiles);
  void project(int tiles);
  void run_ops(int tiles, PixelInput input);
  Tensor alloc(DType dtype, const Shape& shape);

  const ModelDesc& desc_;
  const VisionWeights& w_;
  Backend& be_;
  int max_tiles_;
  size_t workspace_bytes_ = 0;
  bool graphs_ = false;
  std::map<std::pair<int, PixelInput>, int> recordings_;  // (padded tile count, input) -> graph handle
  // Workspaces, each sized for max_tiles; encode() uses row views of them.
  Tensor rgb_;       // [T, S, S, 3] U8, tiles as bytes before normalisation
  Tensor pixels_;    // [T, 3, S, S] F32
  Tensor patches_;   // [T * G*G, 3*p*p]
  Tensor x_;         // [T * (1 + G*G), C] residual stream
  Tensor normed_;    // [T * (1 + G*G), C]; also holds the patch embeddings before vit_embed
  Tensor qkv_;       // [T * (1 + G*G), 3C]
  Tensor attn_;      // [T * (1 + G*G), C]
  Tensor mlp_;       // [T * (1 + G*G), M]
  Fp8Rows normed8_;  // [T * (1 + G*G), C] codes, [T * (1 + G*G)] scales: qkv's and fc1's input when FP8 by rows
  Tensor shuffled_;  // [T * G*G/4, 4C]
  Tensor shuffled_normed_;
  Tensor hidden_;  // [T * G*G/4, llm hidden]
  Tensor out_;     // [T * G*G/4, llm hidden]
};

}  // namespace fovea

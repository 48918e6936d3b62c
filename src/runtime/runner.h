// What the engine asks of a model: encode images into device-resident embeddings, and run one step of
// variable-length sequence chunks against the paged KV cache. InternVLRunner (runtime/internvl_runner.h)
// implements it on any Backend; engine tests use a fake.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/model_desc.h"

namespace fovea {

// Copy `rows` rows of image embedding `handle`, starting at its row `row_begin`, into this chunk's input
// embeddings at chunk positions [chunk_offset, chunk_offset + rows). Lets a chunk boundary cut an image.
struct VisionRef {
  int64_t handle = -1;
  int row_begin = 0;
  int rows = 0;
  int chunk_offset = 0;
};

// One sequence's share of a step: new tokens at positions [start_pos, start_pos + tokens.size()).
struct SeqChunk {
  std::vector<int32_t> tokens;       // image positions hold the <IMG_CONTEXT> id; VisionRef supplies them
  int32_t start_pos = 0;
  std::vector<int32_t> block_table;  // KV blocks covering positions [0, start_pos + tokens.size())
  std::vector<VisionRef> vision;
  bool sample = false;               // produce a result for the chunk's last token
  std::vector<int32_t> answer_ids;   // when sampling: log-probs of these ids too
  bool want_logits = false;          // when sampling: the full float logits too (host-side sampling)
};

struct SeqResult {
  int32_t argmax = -1;
  std::vector<float> answer_logprobs;  // parallel to SeqChunk::answer_ids
  std::vector<float> logits;           // [vocab] when want_logits
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelDesc& desc() const = 0;
  virtual int block_size() const = 0;       // KV rows per block
  virtual int num_kv_blocks() const = 0;    // blocks in the pool, allocated at start
  virtual int max_step_tokens() const = 0;  // a step's total new tokens may not exceed this
  virtual int max_step_tiles() const = 0;   // tiles one encode_images call may take
  virtual int vision_pool_tiles() const = 0;  // tiles of embeddings that can be held at once

  // pixel_values: one host tensor per image, either normalised [tiles, 3, S, S] F32 or, where
  // accepts_u8_tiles(), the pipeline's RGB bytes [tiles, S, S, 3] U8 (normalised on the device, bit-identical);
  // all images of one call have the same dtype. Returns one handle per image; its embedding
  // [tiles * tokens_per_tile, llm hidden] stays on the device until release_image(). Throws when the pool
  // lacks room (the caller releases cached images first).
  virtual std::vector<int64_t> encode_images(const std::vector<Tensor>& pixel_values) = 0;
  virtual bool accepts_u8_tiles() const { return false; }
  virtual void release_image(int64_t handle) = 0;
  virtual int free_vision_tiles() const = 0;

  // Runs every chunk through the LLM (writing their KV) and returns one result per chunk (empty unless sample).
  virtual std::vector<SeqResult> step(const std::vector<SeqChunk>& chunks) = 0;
};

}  // namespace fovea

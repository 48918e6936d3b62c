// Greedy generation of one sequence through any ModelRunner, for tests and simple tools: it encodes the images,
// prefills the prompt (in one chunk or split where asked), then decodes one token per step. The KV blocks are
// simply 0..n-1 (the sequence owns the whole pool), so it must not share a runner with other live sequences.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "runtime/runner.h"

namespace fovea {

struct SimpleGenerateOptions {
  int max_new_tokens = 16;
  // Prompt positions where a new prefill chunk starts (each in (0, prompt size)); empty: one prefill chunk.
  std::vector<int> prefill_splits;
  bool want_logits = false;         // keep the full logits of every sampled position
  std::vector<int32_t> stop_ids;    // empty: the model's eos_ids; the stop token is kept in `tokens`
  std::vector<int32_t> answer_ids;  // log-probs of these after the prompt
};

struct SimpleGenerateResult {
  std::vector<int32_t> tokens;             // generated ids
  std::vector<std::vector<float>> logits;  // per generated token, when want_logits
  std::vector<float> answer_logprobs;      // parallel to answer_ids, for the first generated position
};

// `prompt` holds image_token_id at every image row; images[k] (host [tiles, 3, S, S] F32) fills the next
// tiles * tokens_per_tile of them, in order. Throws when the counts disagree or the pool/KV cannot hold it.
SimpleGenerateResult simple_generate(ModelRunner& runner, const std::vector<int32_t>& prompt,
                                     const std::vector<Tensor>& images, const SimpleGenerateOptions& opts);

// The VisionRefs for prompt positions [begin, end): `image_rows[p]` is (image index, row) for an image
// position p, or (-1, -1) elsewhere; `handles` maps an image index to its handle. Exposed for tests.
std::vector<VisionRef> vision_refs_for_range(const std::vector<std::pair<int, int>>& image_rows,
                                             const std::vector<int64_t>& handles, int begin, int end);

}  // namespace fovea

// Host-side flattening of one step's SeqChunks into the index arrays the forward uploads: token ids, positions,
// KV slots, the paged-attention description, the rows to sample, and where image embeddings go. Every input is
// validated here, before any device work, so a bad chunk fails the step without touching the KV cache.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/runner.h"
#include "runtime/vision_pool.h"

namespace fovea {

// Copies `rows` rows of vision pool slot `slot`, starting at its row `slot_row`, to step rows
// [dst_row, dst_row + rows).
struct VisionSegment {
  int slot = 0;
  int slot_row = 0;
  int rows = 0;
  int dst_row = 0;
};

struct StepLimits {
  int max_tokens = 0;         // rows of the activation workspace
  int max_seqs = 0;           // chunks per step
  int max_table_entries = 0;  // capacity of the flattened block table (seqs * widest table)
  int vocab = 0;
  int block_size = 0;
  int kv_blocks = 0;
  int max_answer_ids = 0;  // answer ids per sampled chunk
};

struct StepPlan {
  int tokens = 0;
  int seqs = 0;
  std::vector<int32_t> ids, positions, slots;  // [tokens]
  std::vector<int32_t> cu_q;                   // [seqs + 1]
  std::vector<int32_t> ctx_len;                // [seqs]
  std::vector<int32_t> block_table;            // [seqs, table_width], padded with block 0
  int table_width = 0;
  int max_q_len = 0;
  int max_ctx_len = 0;
  std::vector<int32_t> sample_rows;   // step row of each sampled chunk's last token
  std::vector<int> sample_chunks;     // the chunk index of each of those
  std::vector<int32_t> answer_ids;    // [samples, answer_width]: each sample's answer ids, padded with id 0
  int answer_width = 0;               // the most answer ids of any sampled chunk
  std::vector<VisionSegment> vision;  // image rows to place after the token embedding
  // The sampled rows' own attention batch: one query row per sampled chunk (its last token) over the chunk's whole
  // context (its cu_q is 0, 1, ..., samples, fixed on the device). The last decoder layer runs on it alone, since
  // no other row's output is read after that layer.
  std::vector<int32_t> sampled_ctx_len;      // [samples]
  std::vector<int32_t> sampled_block_table;  // [samples, table_width]
  int sampled_max_ctx_len = 0;
};

StepPlan plan_step(const std::vector<SeqChunk>& chunks, const StepLimits& limits, const VisionPool& pool);

}  // namespace fovea

#include "runtime/step_plan.h"

#include <algorithm>

namespace fovea {
namespace {

void check_chunk(const SeqChunk& c, size_t index, const StepLimits& limits) {
  const int64_t n = int64_t(c.tokens.size());
  FOVEA_CHECK(n > 0, "step: chunk ", index, " has no tokens");
  FOVEA_CHECK(c.start_pos >= 0, "step: chunk ", index, " starts at position ", c.start_pos);
  const int64_t end = int64_t(c.start_pos) + n;
  const int64_t blocks_needed = (end + limits.block_size - 1) / limits.block_size;
  FOVEA_CHECK(int64_t(c.block_table.size()) >= blocks_needed, "step: chunk ", index, " covers positions up to ", end,
              " but its block table has ", c.block_table.size(), " blocks of ", limits.block_size);
  for (size_t i = 0; i < size_t(blocks_needed); ++i)
    FOVEA_CHECK(c.block_table[i] >= 0 && c.block_table[i] < limits.kv_blocks, "step: chunk ", index, " block ", i,
                " is ", c.block_table[i], ", outside the pool of ", limits.kv_blocks);
  for (int32_t id : c.tokens)
    FOVEA_CHECK(id >= 0 && id < limits.vocab, "step: chunk ", index, " has token id ", id, " outside [0, ",
                limits.vocab, ")");
  for (int32_t id : c.answer_ids)
    FOVEA_CHECK(id >= 0 && id < limits.vocab, "step: chunk ", index, " asks the log-prob of id ", id);
  FOVEA_CHECK(!c.sample || int64_t(c.answer_ids.size()) <= limits.max_answer_ids, "step: chunk ", index, " asks ",
              c.answer_ids.size(), " answer log-probs, the runner takes at most ", limits.max_answer_ids);
}

// Splits one VisionRef into per-slot segments (an image's slots need not be adjacent in the pool).
void add_vision_segments(const VisionRef& ref, size_t index, int chunk_row, int chunk_tokens, const VisionPool& pool,
                         std::vector<VisionSegment>& out) {
  FOVEA_CHECK(pool.contains(ref.handle), "step: chunk ", index, " refers to unknown image handle ", ref.handle);
  const std::vector<int>& slots = pool.slots(ref.handle);
  const int per_tile = pool.rows_per_tile();
  const int64_t image_rows = int64_t(slots.size()) * per_tile;
  FOVEA_CHECK(ref.rows >= 0 && ref.row_begin >= 0 && ref.row_begin + int64_t(ref.rows) <= image_rows, "step: chunk ",
              index, " takes image rows [", ref.row_begin, ", ", ref.row_begin + ref.rows, ") of an image with ",
              image_rows);
  FOVEA_CHECK(ref.chunk_offset >= 0 && ref.chunk_offset + ref.rows <= chunk_tokens, "step: chunk ", index,
              " places image rows at [", ref.chunk_offset, ", ", ref.chunk_offset + ref.rows, ") of ", chunk_tokens,
              " tokens");
  int done = 0;
  while (done < ref.rows) {
    const int row = ref.row_begin + done;
    const int slot_row = row % per_tile;
    const int rows = std::min(ref.rows - done, per_tile - slot_row);
    out.push_back(VisionSegment{slots[size_t(row / per_tile)], slot_row, rows, chunk_row + ref.chunk_offset + done});
    done += rows;
  }
}

}  // namespace

StepPlan plan_step(const std::vector<SeqChunk>& chunks, const StepLimits& limits, const VisionPool& pool) {
  StepPlan plan;
  plan.seqs = int(chunks.size());
  FOVEA_CHECK(plan.seqs <= limits.max_seqs, "step: ", plan.seqs, " chunks, the runner takes at most ", limits.max_seqs);
  int64_t total = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    check_chunk(chunks[i], i, limits);
    total += int64_t(chunks[i].tokens.size());
    plan.table_width = std::max(plan.table_width, int(chunks[i].block_table.size()));
  }
  FOVEA_CHECK(total <= limits.max_tokens, "step: ", total, " tokens, the runner takes at most ", limits.max_tokens);
  FOVEA_CHECK(int64_t(plan.seqs) * plan.table_width <= limits.max_table_entries, "step: block tables of ", plan.seqs,
              " x ", plan.table_width, " exceed the runner's capacity of ", limits.max_table_entries);
  plan.tokens = int(total);
  plan.cu_q.push_back(0);
  plan.block_table.assign(size_t(plan.seqs) * size_t(plan.table_width), 0);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const SeqChunk& c = chunks[i];
    const int first_row = plan.cu_q.back(), n = int(c.tokens.size());
    for (int j = 0; j < n; ++j) {
      const int32_t pos = c.start_pos + j;
      plan.ids.push_back(c.tokens[size_t(j)]);
      plan.positions.push_back(pos);
      plan.slots.push_back(c.block_table[size_t(pos / limits.block_size)] * limits.block_size +
                           pos % limits.block_size);
    }
    std::copy(c.block_table.begin(), c.block_table.end(), plan.block_table.begin() + int64_t(i) * plan.table_width);
    plan.cu_q.push_back(first_row + n);
    plan.ctx_len.push_back(c.start_pos + n);
    plan.max_q_len = std::max(plan.max_q_len, n);
    plan.max_ctx_len = std::max(plan.max_ctx_len, c.start_pos + n);
    for (const VisionRef& ref : c.vision) add_vision_segments(ref, i, first_row, n, pool, plan.vision);
    if (c.sample) {
      plan.sample_rows.push_back(first_row + n - 1);
      plan.sample_chunks.push_back(int(i));
      plan.answer_width = std::max(plan.answer_width, int(c.answer_ids.size()));
      plan.sampled_ctx_len.push_back(c.start_pos + n);
      plan.sampled_max_ctx_len = std::max(plan.sampled_max_ctx_len, c.start_pos + n);
      plan.sampled_block_table.insert(plan.sampled_block_table.end(),
                                      plan.block_table.begin() + int64_t(i) * plan.table_width,
                                      plan.block_table.begin() + int64_t(i + 1) * plan.table_width);
    }
  }
  // Padding ids (0) give log-probs that are never read.
  plan.answer_ids.assign(plan.sample_rows.size() * size_t(plan.answer_width), 0);
  for (size_t k = 0; k < plan.sample_chunks.size(); ++k) {
    const auto& wanted = chunks[size_t(plan.sample_chunks[k])].answer_ids;
    std::copy(wanted.begin(), wanted.end(), plan.answer_ids.begin() + int64_t(k) * plan.answer_width);
  }
  return plan;
}

}  // namespace fovea

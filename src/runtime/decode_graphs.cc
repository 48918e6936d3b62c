#include "runtime/decode_graphs.h"

#include <algorithm>

namespace fovea {
namespace {

int next_power_of_two(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace

DecodeGraphs::DecodeGraphs(Backend& backend, bool enabled, int max_rows, int max_table_entries, int block_size,
                           int scratch_block)
    : be_(backend),
      enabled_(enabled && scratch_block >= 0),
      max_rows_(max_rows),
      max_table_entries_(max_table_entries),
      block_size_(block_size),
      scratch_block_(scratch_block) {}

DecodeGraphs::~DecodeGraphs() {
  for (const auto& [key, handle] : handles_) be_.graph_release(handle);
}

bool DecodeGraphs::eligible(const StepPlan& plan) const {
  if (!enabled_ || !be_.supports_graphs() || plan.seqs == 0 || plan.tokens != plan.seqs || !plan.vision.empty())
    return false;
  const int rows = next_power_of_two(plan.seqs), width = next_power_of_two(plan.table_width);
  return rows <= max_rows_ && int64_t(rows) * width <= max_table_entries_;
}

StepPlan DecodeGraphs::pad(const StepPlan& plan) const {
  const int rows = next_power_of_two(plan.seqs), width = next_power_of_two(plan.table_width);
  StepPlan padded = plan;
  padded.tokens = padded.seqs = rows;
  padded.ids.resize(size_t(rows), 0);
  padded.positions.resize(size_t(rows), 0);
  padded.slots.resize(size_t(rows), scratch_block_ * block_size_);
  padded.cu_q.resize(size_t(rows) + 1);
  for (int s = 0; s <= rows; ++s) padded.cu_q[size_t(s)] = s;
  padded.ctx_len.resize(size_t(rows), 1);
  padded.table_width = width;
  padded.block_table.assign(size_t(rows) * size_t(width), 0);
  for (int s = 0; s < rows; ++s) {
    int32_t* row = padded.block_table.data() + int64_t(s) * width;
    if (s < plan.seqs) {
      std::copy_n(plan.block_table.begin() + int64_t(s) * plan.table_width, plan.table_width, row);
    } else {
      row[0] = scratch_block_;
    }
  }
  padded.max_q_len = 1;
  padded.max_ctx_len = width * block_size_;
  padded.sample_rows.resize(size_t(rows), 0);
  return padded;
}

void DecodeGraphs::launch(const StepPlan& padded, const std::function<void()>& record) {
  const std::pair<int, int> key{padded.seqs, padded.table_width};
  auto found = handles_.find(key);
  if (found == handles_.end()) {
    // Once eagerly first: every GEMM shape of the step is then planned (and its algorithm timed, which needs a
    // synchronization a capture forbids) before recording. A decode step is idempotent, so the replay below
    // writes the same KV rows and logits again.
    record();
    be_.graph_begin();
    try {
      record();
    } catch (...) {
      be_.graph_release(be_.graph_end());
      throw;
    }
    found = handles_.emplace(key, be_.graph_end()).first;
  }
  be_.graph_launch(found->second);
}

}  // namespace fovea

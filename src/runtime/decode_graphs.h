// Replays pure decode steps (every chunk one token, no image rows) as recorded op sequences on backends that
// support them (CUDA graphs), removing the per-op launch cost that dominates small decode batches. A recording
// is specific to its shapes, so steps are padded to buckets: the sequence count to the next power of two
// (padding sequences decode token 0 at position 0 into a scratch KV block no real sequence owns) and the block
// table width to the next power of two (attention's launch shape uses max_ctx_len = width * block_size).
#pragma once
#include <functional>
#include <map>
#include <utility>

#include "backend/backend.h"
#include "runtime/step_plan.h"

namespace fovea {

class DecodeGraphs {
 public:
  // max_rows: the most sequences one recording may hold (the LM head's rows); scratch_block: a KV block for
  // the padding sequences, or -1 to disable recordings.
  DecodeGraphs(Backend& backend, bool enabled, int max_rows, int max_table_entries, int block_size, int scratch_block);
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  bool eligible(const StepPlan& plan) const;
  // The plan padded to its bucket; its sample rows are the plan's, then row 0 repeated up to the bucket.
  StepPlan pad(const StepPlan& plan) const;
  // Replays the recording for padded's bucket, recording it first with `record` (which issues the step's ops)
  // when this bucket has none yet. The inputs must already be in the buffers the ops read.
  void launch(const StepPlan& padded, const std::function<void()>& record);
  int recordings() const { return int(handles_.size()); }

 private:
  Backend& be_;
  bool enabled_;
  int max_rows_, max_table_entries_, block_size_, scratch_block_;
  std::map<std::pair<int, int>, int> handles_;  // (sequences, table width) -> recording
};

}  // namespace fovea

// Continuous batching with chunked prefill. Each step takes, in order: one token for every decoding sequence,
// the next chunk of every sequence still in prefill (oldest first), then new sequences while the step's
// budget lasts: those waiting longer than `aging_steps` first (FIFO), then the longest cached prefix first. A
// new sequence whose next prefix block another sequence is computing right now waits for it (in-flight prefix
// sharing) instead of computing it again. The budget counts new tokens plus a cost per ViT tile encoded in the step, so a step heavy in
// new images carries fewer LLM tokens. Images that need the ViT in a step are encoded in one batched call
// before the LLM runs. Not thread-safe: the engine's scheduler thread is its only user (docs/design.md).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/block_manager.h"
#include "engine/engine.h"
#include "engine/sequence.h"
#include "engine/vision_cache.h"
#include "runtime/runner.h"
#include "tokenizer/tokenizer.h"

namespace fovea {

struct SchedulerConfig {
  int max_step_tokens = 16384;  // capped by the runner's own limit
  int max_batch_seqs = 256;
  bool prefix_cache = true;
  int vision_cache_tiles = 0;  // unpinned embeddings kept for reuse; 0: half the runner's vision pool
  int vit_tile_cost = -1;      // budget tokens one ViT tile costs; <0: tokens_per_tile / 4 (docs/design.md)
  int aging_steps = 32;        // a request waiting this many steps is admitted before any newer one
};

// Cumulative counters, read by the engine after each step.
struct SchedulerCounters {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t prefix_cache_hit_tokens = 0;     // prompt tokens whose KV was reused at admission
  int64_t prefill_tokens = 0;              // prompt tokens whose KV was computed (including later-failed ones)
  int64_t inflight_prefix_waits = 0;       // requests held back while a running one computed their prefix
  int64_t inflight_prefix_hit_tokens = 0;  // of prefix_cache_hit_tokens: reused by requests that had waited
  int64_t vision_cache_hits = 0;
  int64_t vision_cache_misses = 0;
  int64_t steps = 0;
  double vit_ms = 0;
  double llm_ms = 0;
};

using EventSink = std::function<void(int64_t request_id, const RequestEvent& event)>;

class Scheduler {
 public:
  // tokenizer may be null (tests): then no text is produced and stop strings are ignored.
  Scheduler(ModelRunner& runner, const Tokenizer* tokenizer, const SchedulerConfig& config, EventSink sink);
  ~Scheduler();

  // Queues a prepared request, or finishes it at once with an error naming the limit it breaks.
  void add(PreparedRequest request);
  // Finishes the request with "cancelled" if the scheduler holds it; returns whether it did.
  bool cancel(int64_t request_id);
  // Finishes every held request: "cancelled" with `why` as the error (engine shutdown).
  void cancel_all(const std::string& why);
  // Finishes every held request with "error" (the engine hit a bug it cannot pin on one request).
  void fail_all(const std::string& error, ErrorKind kind);
  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  // Runs one step of the runner (ViT for the step's new images, then the LLM). Returns whether anything ran.
  bool step();
  // Called in step() once the step is planned (sequences admitted, blocks taken), before the runner works: the
  // engine publishes its stats there, so a long step shows what it holds.
  void set_before_run(std::function<void()> hook) { before_run_ = std::move(hook); }

  int waiting() const { return int(waiting_.size()); }
  // Of those, how many the last step held back because a running request is computing their prefix.
  int waiting_for_prefix() const { return waiting_for_prefix_; }
  int running() const;  // admitted and not finished (finished ones leave running_ at the end of the step)
  const BlockManager& blocks() const { return blocks_; }
  const VisionCache& vision_cache() const { return vision_cache_; }
  const SchedulerCounters& counters() const { return counters_; }
  int step_token_budget() const { return step_budget_; }
  int vit_tile_cost() const { return vit_tile_cost_; }

 private:
  struct PlannedImage {  // rows of one image that a chunk feeds
    int slot = 0;
    int row_begin = 0;
    int rows = 0;
    int chunk_offset = 0;
  };
  struct PlannedChunk {
    Sequence* seq = nullptr;
    int tokens = 0;
    std::vector<PlannedImage> images;
  };
  struct StepPlan {
    std::vector<PlannedChunk> chunks;
    std::vector<std::pair<Sequence*, int>> to_encode;  // (sequence, slot) whose image the ViT runs on
    int budget_left = 0;
    int encode_tiles = 0;
  };

  // "" when the request fits; else what it breaks, and *kind says whose fault that is.
  std::string check_limits(const PreparedRequest& request, ErrorKind* kind) const;
  std::unique_ptr<Sequence> make_sequence(PreparedRequest request) const;
  void drop_finished();  // out of waiting_ and running_
  // Choices (choice_scoring.cc).
  void add_choices(PreparedRequest request);
  void on_choice_scored(Sequence& seq, const std::string& reason, const std::string& error, ErrorKind kind);
  void compute_block_hashes(Sequence& seq) const;
  enum class Admission { Admitted, NoRoom, WaitsForPrefix };
  Admission admit(Sequence& seq);
  std::vector<size_t> admission_order() const;
  void admit_waiting(StepPlan& plan);
  StepPlan plan_step();
  void plan_chunk(Sequence& seq, StepPlan& plan);
  bool acquire_embedding(Sequence& seq, int slot, StepPlan& plan);
  void encode_planned(StepPlan& plan);
  std::vector<SeqChunk> build_chunks(const StepPlan& plan) const;
  void apply_results(const StepPlan& plan, const std::vector<SeqResult>& results);
  void advance(Sequence& seq, int tokens);

  // Output side (sequence_output.cc).
  void on_sampled(Sequence& seq, const SeqChunk& chunk, const SeqResult& result);
  // error_kind: what a failure ("error" reason) was; None otherwise.
  void finish(Sequence& seq, const std::string& reason, const std::string& error, ErrorKind error_kind,
              RequestEvent event);
  void fail_sequence(Sequence* seq, const std::string& error, ErrorKind kind = ErrorKind::Internal);
  void release_resources(Sequence& seq);
  void emit_final_without_sequence(const PreparedRequest& request, const std::string& reason, const std::string& error,
                                   ErrorKind kind);

  ModelRunner& runner_;
  const Tokenizer* tokenizer_;
  SchedulerConfig config_;
  EventSink sink_;
  BlockManager blocks_;
  VisionCache vision_cache_;
  int step_budget_ = 0;
  int vit_tile_cost_ = 0;
  int tokens_per_tile_ = 0;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order
  SchedulerCounters counters_;
  int waiting_for_prefix_ = 0;
  std::function<void()> before_run_;
};

}  // namespace fovea

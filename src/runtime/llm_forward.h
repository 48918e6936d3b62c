// The language model's step over a StepPlan, written against Backend: embedding, image rows, the decoder layers
// over the paged KV cache, then the head for the sampled rows only. Workspaces are sized at construction for
// the runner's limits; run() allocates no device memory (host vectors only).
#pragma once
#include <cstddef>
#include <vector>

#include "backend/backend.h"
#include "model/model_desc.h"
#include "runtime/decode_graphs.h"
#include "runtime/runner.h"
#include "runtime/step_plan.h"
#include "runtime/vision_pool.h"
#include "runtime/weights.h"

namespace fovea {

struct KvCache {
  std::vector<KvCacheLayer> layers;  // one per decoder layer, [blocks, block_size, kv_heads, head_dim]
  size_t bytes = 0;
};
KvCache alloc_kv_cache(const LlmConfig& config, Backend& backend, int blocks, int block_size);

struct LlmWorkspaceSizes {
  int max_tokens = 0;          // rows of every activation
  int max_seqs = 0;            // chunks per step (and sampled rows)
  int max_table_entries = 0;   // flattened block-table capacity
  int max_answer_ids = 0;      // answer ids per sampled chunk
  int mlp_rows = 0;            // the MLP runs in row slices of this size, bounding its [rows, 2F] workspace
  int logits_rows = 0;         // the LM head runs on this many sampled rows at a time, bounding [rows, V]
  int block_size = 0;          // KV rows per block
  bool decode_graphs = false;  // replay pure decode steps as recordings where the backend supports them
  int scratch_block = -1;      // a KV block owned by no sequence, for the padding rows of recorded steps
};

class LlmForward {
 public:
  LlmForward(const ModelDesc& desc, const LlmWeights& weights, Backend& backend, const LlmWorkspaceSizes& sizes);

  size_t workspace_bytes() const { return workspace_bytes_; }
  int decode_recordings() const { return graphs_.recordings(); }
  // Runs the plan (writing its tokens' KV into `kv`) and returns one result per chunk (filled when sampled).
  std::vector<SeqResult> run(const StepPlan& plan, const std::vector<SeqChunk>& chunks, const VisionPool& pool,
                             KvCache& kv);

 private:
  Tensor alloc(DType dtype, const Shape& shape);
  Tensor upload_ids(Tensor& buffer, const std::vector<int32_t>& values);
  void upload_inputs(const StepPlan& plan, bool sampled_only);
  PagedAttentionBatch batch_view(const StepPlan& plan) const;
  PagedAttentionBatch sampled_batch_view(const StepPlan& plan) const;
  void embed(int tokens, const std::vector<VisionSegment>& vision, const VisionPool* pool);
  void layer(int index, int tokens, const PagedAttentionBatch& batch, KvCache& kv);
  void attention_input(int index, int tokens, KvCache& kv);
  void attention_and_mlp(int index, const Tensor& qkv, const PagedAttentionBatch& batch, KvCache& kv, Tensor& x,
                         Tensor& attn, Tensor& branch);
  void last_layer_sampled(int index, const StepPlan& plan, KvCache& kv);
  // Whether the last layer runs on the sampled rows alone (a step that computes rows it does not sample).
  static bool samples_last_layer_only(const StepPlan& plan);
  void norm_input(Tensor& x, const Tensor& add, const Tensor& gamma, int tokens);
  void project_input(int64_t r0, int64_t r1, const Tensor& w, const Fp8Linear& w8, const W4Linear& w4,
                     const Tensor& bias, Tensor& y);
  void mlp(const LlmLayerWeights& w, int tokens, Tensor& out_rows);
  void record_decode(const StepPlan& padded, KvCache& kv);
  void final_norm(int tokens, int samples, bool rows_gathered);
  void head(const StepPlan& plan, const std::vector<SeqChunk>& chunks, std::vector<SeqResult>& results,
            bool rows_gathered);
  void compute_head(int first, int count);
  void collect_head(const StepPlan& plan, const std::vector<SeqChunk>& chunks, int first, int count,
                    std::vector<SeqResult>& results);

  const ModelDesc& desc_;
  const LlmWeights& w_;
  Backend& be_;
  LlmWorkspaceSizes sizes_;
  size_t workspace_bytes_ = 0;
  // Index inputs, uploaded each step into prefixes of these.
  Tensor ids_, positions_, slots_, cu_q_, ctx_len_, block_table_, sample_rows_, answer_ids_;
  // Activations.
  Tensor x_;                                   // [T, H] residual stream
  Tensor normed_;                              // [T, H] (not with fp8_rows_)
  Tensor qkv_;                                 // [T, (NH + 2 KV) D]
  Tensor attn_;                                // [T, NH D]
  Tensor branch_;                              // [T, H] attention / MLP output before the residual add
  Tensor gate_up_;                             // [mlp_rows, 2F]
  Tensor act_;                                 // [mlp_rows, F] (not with fp8_rows_)
  // FP8 per-token weights (Fp8Scaling::Channel): the qkv and gate_up inputs leave their RMSNorm, and the down
  // input its SiLU·mul, already quantized (Backend::add_rms_norm_fp8, silu_mul_fp8), so no separate quantization
  // pass runs for them. Empty otherwise.
  bool fp8_rows_ = false;
  Fp8Rows normed8_;                            // [T, H] codes, [T] scales
  Fp8Rows act8_;                               // [mlp_rows, F] codes, [mlp_rows] scales
  Tensor last_x_, last_branch_, last_normed_;  // [max_seqs, H] the sampled rows
  // The sampled rows' own pass through the last layer (last_layer_sampled): their qkv rows and attention batch.
  Tensor sampled_qkv_;                                            // [max_seqs, (NH + 2 KV) D]
  Tensor sampled_cu_q_, sampled_ctx_len_, sampled_block_table_;  // I32, as PagedAttentionBatch (cu_q fixed)
  Tensor logits_;                              // [logits_rows, V]
  Tensor argmax_ids_;                          // [logits_rows] I32
  Tensor answer_logprobs_;                     // [logits_rows * max_answer_ids] F32
  DecodeGraphs graphs_;                        // declared last: its recordings reference the buffers above
};

}  // namespace fovea

// InternVLRunner: the ModelRunner of every InternVL checkpoint, on any Backend. At construction it uploads the
// weights (one pass, one tensor at a time from a WeightSource: a checkpoint or random weights), allocates the paged
// KV pool, the vision-embedding pool and every activation workspace; encode_images() and step() allocate no device
// memory afterwards (host vectors only). Not thread-safe: one thread drives a runner.
#pragma once
#include <cstddef>
#include <memory>

#include "backend/backend.h"
#include "model/model_desc.h"
#include "runtime/runner.h"
#include "runtime/step_plan.h"
#include "runtime/weight_source.h"

namespace fovea {

struct RunnerOptions {
  int kv_blocks = 1024;         // KV blocks in the pool
  int block_size = 16;          // KV rows per block
  int max_step_tokens = 4096;   // new tokens per step (activation workspace rows)
  int max_step_tiles = 16;      // ViT tiles per batch inside encode_images (it loops over larger requests)
  int vision_pool_tiles = 64;   // tiles of image embeddings held at once
  int max_step_seqs = 256;      // chunks per step
  int max_seq_len = 0;          // longest sequence a block table may cover; 0: the model's max_position
  int max_answer_ids = 32;      // SeqChunk::answer_ids per chunk
  int mlp_rows = 2048;          // the LLM MLP runs in row slices of this size (bounds its workspace)
  int logits_rows = 64;         // the LM head runs on this many sampled rows at a time (bounds [rows, vocab])
  // Replay pure decode steps of up to logits_rows sequences as recorded op sequences (Backend::graph_*) where
  // the backend supports them. Adds one scratch KV block (not counted in num_kv_blocks()) for padding rows.
  bool decode_graphs = false;
  // Replay the ViT + projector of a tile batch as a recording per tile-count bucket (VisionEncoder pads the
  // batch to the bucket). Off by default: on the H200 it did not pay at 48-tile batches (516.8 QPM against
  // 520.1-525.1 without, bench/results/2026-11-29-h200-vit-graphs-ab.md).
  bool vit_graphs = false;
  // FP8 W8A8 for the LLM's projections (qkv, o, gate_up, down): E4M3 weights and dynamically quantized
  // activations, with fp8_scaling's scales (Backend::linear_fp8_scaled).
  bool fp8_llm = false;
  // The same for the ViT layers' four linears (qkv, proj, fc1 with its GELU, fc2).
  bool fp8_vit = false;
  // Per-token x per-channel by default: batch-invariant, and closer to float32 than per-tensor
  // (bench/results/2026-12-02-fp8-recipes-cpu.md).
  Fp8Scaling fp8_scaling = Fp8Scaling::Channel;
};

struct RunnerMemory {
  size_t weights = 0;      // device bytes of the uploaded weights (W4 linears at their packed size)
  int w4_linears = 0;      // LLM linears kept 4-bit (W4A16); their packed bytes and their bf16 size:
  size_t w4_bytes = 0, w4_bf16_bytes = 0;
  size_t kv_cache = 0;     // the paged KV pool
  size_t vision_pool = 0;  // image embeddings
  size_t workspace = 0;    // activations and index buffers of the vision encoder and the LLM, linear_w4's
  size_t total() const { return weights + kv_cache + vision_pool + workspace; }
};

class VisionEncoder;
class LlmForward;
struct DeviceWeights;
struct KvCache;

class InternVLRunner final : public ModelRunner {
 public:
  // Uploads the weights `source` fills, then drops the source (a checkpoint's mappings go with it).
  InternVLRunner(const ModelDesc& desc, std::unique_ptr<WeightSource> source, std::unique_ptr<Backend> backend,
                 const RunnerOptions& opts);
  // A checkpoint loaded by load_model.
  InternVLRunner(LoadedModel model, std::unique_ptr<Backend> backend, const RunnerOptions& opts);
  ~InternVLRunner() override;

  const ModelDesc& desc() const override { return desc_; }
  int block_size() const override { return opts_.block_size; }
  int num_kv_blocks() const override { return opts_.kv_blocks; }
  int max_step_tokens() const override { return opts_.max_step_tokens; }
  int max_step_tiles() const override { return opts_.max_step_tiles; }
  int vision_pool_tiles() const override { return opts_.vision_pool_tiles; }

  std::vector<int64_t> encode_images(const std::vector<Tensor>& pixel_values) override;
  bool accepts_u8_tiles() const override { return true; }
  void release_image(int64_t handle) override;
  int free_vision_tiles() const override;
  std::vector<SeqResult> step(const std::vector<SeqChunk>& chunks) override;

  const RunnerMemory& memory() const { return memory_; }
  Backend& backend() { return *backend_; }
  int decode_recordings() const;  // recorded decode buckets so far (0 unless decode_graphs took effect)
  int vit_recordings() const;     // recorded ViT tile-count buckets so far (0 unless vit_graphs took effect)

  // For golden tests: runs ViT + projector on up to max_step_tiles tiles (F32 or U8, as encode_images takes
  // them) and returns host float32 copies of the ViT's last hidden state [tiles * (1 + G*G), C] and the
  // projector output [tiles * tokens_per_tile, llm hidden]. Leaves the vision pool untouched.
  void encode_tiles_for_test(const Tensor& pixels, Tensor* vit_hidden, Tensor* projected);
  // Host float32 copy of an encoded image's embedding [tiles * tokens_per_tile, llm hidden].
  Tensor image_embedding(int64_t handle);

 private:
  void check_pixels(const Tensor& pixels, size_t index) const;
  void encode_into_pool(const std::vector<Tensor>& pixel_values, const std::vector<int64_t>& handles);

  ModelDesc desc_;
  std::unique_ptr<Backend> backend_;
  RunnerOptions opts_;
  RunnerMemory memory_;
  StepLimits limits_;
  std::unique_ptr<DeviceWeights> weights_;
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<VisionPool> pool_;
  std::unique_ptr<VisionEncoder> vision_;
  std::unique_ptr<LlmForward> llm_;
};

// Device bytes one KV block takes over all layers (K and V), for sizing RunnerOptions::kv_blocks from memory.
size_t kv_block_bytes(const ModelDesc& desc, DType compute_dtype, int block_size);

std::unique_ptr<ModelRunner> make_internvl_runner(LoadedModel model, std::unique_ptr<Backend> backend,
                                                  const RunnerOptions& opts);
std::unique_ptr<ModelRunner> make_internvl_runner(const ModelDesc& desc, std::unique_ptr<WeightSource> source,
                                                  std::unique_ptr<Backend> backend, const RunnerOptions& opts);

}  // namespace fovea

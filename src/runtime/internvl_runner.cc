#include "runtime/internvl_runner.h"

#include <algorithm>

#include "runtime/llm_forward.h"
#include "runtime/step_plan.h"
#include "runtime/vision_encoder.h"
#include "runtime/vision_pool.h"
#include "runtime/weights.h"

namespace fovea {

InternVLRunner::InternVLRunner(LoadedModel model, std::unique_ptr<Backend> backend, const RunnerOptions& opts)
    : InternVLRunner(model.desc, make_checkpoint_source(std::move(model.weights), model.desc.dir), std::move(backend),
                     opts) {}

InternVLRunner::InternVLRunner(const ModelDesc& desc_in, std::unique_ptr<WeightSource> source,
                               std::unique_ptr<Backend> backend, const RunnerOptions& opts)
    : desc_(desc_in), backend_(std::move(backend)), opts_(opts) {
  FOVEA_CHECK(backend_, "runner: no backend");
  FOVEA_CHECK(opts_.kv_blocks > 0 && opts_.block_size > 0 && opts_.max_step_tokens > 0 && opts_.max_step_tiles > 0 &&
                  opts_.vision_pool_tiles >= 0 && opts_.max_step_seqs > 0 && opts_.max_answer_ids >= 0 &&
                  opts_.mlp_rows > 0 && opts_.logits_rows > 0,
              "runner: bad options");
  FOVEA_CHECK(source, "runner: no weight source");
  const ModelDesc& desc = desc_;
  weights_ = std::make_unique<DeviceWeights>(
      upload_weights(desc, *source, *backend_, opts_.fp8_llm, opts_.fp8_vit, opts_.fp8_scaling));
  memory_.weights = weights_->bytes;
  memory_.w4_linears = weights_->w4.linears;
  memory_.w4_bytes = weights_->w4.bytes;
  memory_.w4_bf16_bytes = weights_->w4.bf16_bytes;
  source.reset();  // the device copy is all the forward reads: drop the host tensors and mmaps
  // With decode graphs, block kv_blocks (one past the engine's range) is the padding rows' scratch block.
  const int scratch_blocks = opts_.decode_graphs ? 1 : 0;
  kv_ = std::make_unique<KvCache>(
      alloc_kv_cache(desc.llm, *backend_, opts_.kv_blocks + scratch_blocks, opts_.block_size));
  memory_.kv_cache = kv_->bytes;
  pool_ =
      std::make_unique<VisionPool>(*backend_, opts_.vision_pool_tiles, desc.vision.tokens_per_tile(), desc.llm.hidden);
  memory_.vision_pool = pool_->bytes();
  vision_ = std::make_unique<VisionEncoder>(desc, weights_->vision, *backend_, opts_.max_step_tiles, opts_.vit_graphs);
  const int max_seq_len = opts_.max_seq_len > 0 ? opts_.max_seq_len : desc.llm.max_position;
  const int64_t blocks_per_seq =
      std::min<int64_t>(opts_.kv_blocks, (int64_t(max_seq_len) + opts_.block_size - 1) / opts_.block_size);
  limits_.max_tokens = opts_.max_step_tokens;
  limits_.max_seqs = std::min(opts_.max_step_seqs, opts_.max_step_tokens);
  limits_.max_table_entries = int(std::min<int64_t>(int64_t(limits_.max_seqs) * blocks_per_seq, INT32_MAX));
  limits_.vocab = desc.llm.vocab;
  limits_.block_size = opts_.block_size;
  limits_.kv_blocks = opts_.kv_blocks;
  limits_.max_answer_ids = opts_.max_answer_ids;
  LlmWorkspaceSizes sizes;
  sizes.max_tokens = limits_.max_tokens;
  sizes.max_seqs = limits_.max_seqs;
  sizes.max_table_entries = limits_.max_table_entries;
  sizes.max_answer_ids = opts_.max_answer_ids;
  sizes.mlp_rows = opts_.mlp_rows;
  sizes.logits_rows = std::min(opts_.logits_rows, sizes.max_seqs);
  sizes.block_size = opts_.block_size;
  sizes.decode_graphs = opts_.decode_graphs;
  sizes.scratch_block = opts_.decode_graphs ? opts_.kv_blocks : -1;
  llm_ = std::make_unique<LlmForward>(desc, weights_->llm, *backend_, sizes);
  memory_.workspace = vision_->workspace_bytes() + llm_->workspace_bytes() + weights_->w4.workspace;
  backend_->synchronize();
}

InternVLRunner::~InternVLRunner() = default;

int InternVLRunner::vit_recordings() const { return vision_->recordings(); }

void InternVLRunner::check_pixels(const Tensor& pixels, size_t index) const {
  const int64_t S = desc_.vision.image_size;
  const bool normalized = pixels.dtype == DType::F32 && pixels.rank() == 4 && pixels.dim(1) == 3 &&
                          pixels.dim(2) == S && pixels.dim(3) == S;
  const bool rgb = pixels.dtype == DType::U8 && pixels.rank() == 4 && pixels.dim(1) == S && pixels.dim(2) == S &&
                   pixels.dim(3) == 3;
  FOVEA_CHECK(pixels.device == Device::CPU && (normalized || rgb) && pixels.dim(0) > 0, "encode_images: image ",
              index, " has ", dtype_name(pixels.dtype), " ", shape_str(pixels.shape),
              ", expected a host F32 tensor [tiles, 3, ", S, ", ", S, "] or U8 [tiles, ", S, ", ", S, ", 3]");
}

std::vector<int64_t> InternVLRunner::encode_images(const std::vector<Tensor>& pixel_values) {
  int64_t tiles = 0;
  for (size_t i = 0; i < pixel_values.size(); ++i) {
    check_pixels(pixel_values[i], i);
    // One ViT batch may hold tiles of several images, and it has one input buffer.
    FOVEA_CHECK(pixel_values[i].dtype == pixel_values[0].dtype, "encode_images: image ", i, " is ",
                dtype_name(pixel_values[i].dtype), " but image 0 is ", dtype_name(pixel_values[0].dtype),
                "; one call takes either normalised F32 tiles or U8 bytes");
    tiles += pixel_values[i].dim(0);
  }
  FOVEA_CHECK(tiles <= pool_->free_tiles(), "encode_images: ", tiles, " tiles asked, ", pool_->free_tiles(),
              " free in the vision pool of ", pool_->capacity_tiles());
  std::vector<int64_t> handles;
  for (const Tensor& pixels : pixel_values) handles.push_back(pool_->acquire(int(pixels.dim(0))));
  try {
    encode_into_pool(pixel_values, handles);
  } catch (...) {
    for (int64_t h : handles) pool_->release(h);
    throw;
  }
  return handles;
}

// Streams all tiles through the encoder in batches of max_step_tiles (a batch may mix images and split one),
// copying each tile's projector output into its pool slot.
void InternVLRunner::encode_into_pool(const std::vector<Tensor>& pixel_values, const std::vector<int64_t>& handles) {
  struct TileRef {
    size_t image;
    int tile;
  };
  std::vector<TileRef> tiles;
  for (size_t i = 0; i < pixel_values.size(); ++i)
    for (int t = 0; t < int(pixel_values[i].dim(0)); ++t) tiles.push_back({i, t});
  const int per_tile = desc_.vision.tokens_per_tile();
  for (size_t first = 0; first < tiles.size(); first += size_t(opts_.max_step_tiles)) {
    const int count = int(std::min(tiles.size() - first, size_t(opts_.max_step_tiles)));
    // Bytes travel as they are and are normalised on the device (4x fewer bytes over PCIe than F32).
    const PixelInput input = pixel_values[0].dtype == DType::U8 ? PixelInput::Rgb : PixelInput::Normalized;
    Tensor batch_pixels = input == PixelInput::Rgb ? vision_->rgb_tiles(count) : vision_->pixels(count);
    for (int k = 0; k < count;) {
      // Upload each image's run of consecutive tiles in one call.
      const TileRef start = tiles[first + size_t(k)];
      int run = 1;
      while (k + run < count && tiles[first + size_t(k + run)].image == start.image) ++run;
      Tensor dst = batch_pixels.rows(k, k + run);
      backend_->upload(dst, pixel_values[start.image].rows(start.tile, start.tile + run));
      k += run;
    }
    const Tensor out = vision_->encode(count, input);
    for (int k = 0; k < count; ++k) {
      const TileRef ref = tiles[first + size_t(k)];
      Tensor slot = pool_->slot_rows(pool_->slots(handles[ref.image])[size_t(ref.tile)]);
      backend_->copy(slot, out.rows(int64_t(k) * per_tile, int64_t(k + 1) * per_tile));
    }
  }
  backend_->synchronize();
}

int InternVLRunner::decode_recordings() const { return llm_->decode_recordings(); }

void InternVLRunner::release_image(int64_t handle) { pool_->release(handle); }

int InternVLRunner::free_vision_tiles() const { return pool_->free_tiles(); }

std::vector<SeqResult> InternVLRunner::step(const std::vector<SeqChunk>& chunks) {
  const StepPlan plan = plan_step(chunks, limits_, *pool_);
  std::vector<SeqResult> results = llm_->run(plan, chunks, *pool_, *kv_);
  backend_->synchronize();
  return results;
}

void InternVLRunner::encode_tiles_for_test(const Tensor& pixels, Tensor* vit_hidden, Tensor* projected) {
  check_pixels(pixels, 0);
  const int count = int(pixels.dim(0));
  const PixelInput input = pixels.dtype == DType::U8 ? PixelInput::Rgb : PixelInput::Normalized;
  Tensor dst = input == PixelInput::Rgb ? vision_->rgb_tiles(count) : vision_->pixels(count);
  backend_->upload(dst, pixels);
  const Tensor out = vision_->encode(count, input);
  if (projected) *projected = backend_->download(out);
  if (vit_hidden) *vit_hidden = backend_->download(vision_->last_hidden(count));
}

Tensor InternVLRunner::image_embedding(int64_t handle) {
  const std::vector<int>& slots = pool_->slots(handle);
  const int64_t per_tile = desc_.vision.tokens_per_tile();
  Tensor out = Tensor::host(DType::F32, {int64_t(slots.size()) * per_tile, int64_t(desc_.llm.hidden)});
  for (size_t i = 0; i < slots.size(); ++i) {
    const Tensor rows = backend_->download(pool_->slot_rows(slots[i]));
    std::copy_n(rows.ptr<float>(), rows.numel(), out.ptr<float>() + int64_t(i) * rows.numel());
  }
  return out;
}

size_t kv_block_bytes(const ModelDesc& desc, DType compute_dtype, int block_size) {
  const LlmConfig& c = desc.llm;
  return size_t(2) * size_t(c.layers) * size_t(block_size) * size_t(c.kv_heads) * size_t(c.head_dim) *
         dtype_size(compute_dtype);
}

std::unique_ptr<ModelRunner> make_internvl_runner(LoadedModel model, std::unique_ptr<Backend> backend,
                                                  const RunnerOptions& opts) {
  return std::make_unique<InternVLRunner>(std::move(model), std::move(backend), opts);
}

std::unique_ptr<ModelRunner> make_internvl_runner(const ModelDesc& desc, std::unique_ptr<WeightSource> source,
                                                  std::unique_ptr<Backend> backend, const RunnerOptions& opts) {
  return std::make_unique<InternVLRunner>(desc, std::move(source), std::move(backend), opts);
}

}  // namespace fovea

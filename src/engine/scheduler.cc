#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"
#include "engine/request_prep.h"

namespace fovea {
namespace {

int blocks_for(int positions, int block_size) { return (positions + block_size - 1) / block_size; }

// Positions of KV a sequence needs: the prompt plus every generated token except the last (never fed back).
int kv_positions(int prompt_len, int max_tokens) { return prompt_len + max_tokens - 1; }

int effective_max_tokens(const PreparedRequest& request, int max_position) {
  return std::min(request.params.max_tokens, max_position - int(request.prompt.size()) + 1);
}

}  // namespace

Scheduler::Scheduler(ModelRunner& runner, const Tokenizer* tokenizer, const SchedulerConfig& config, EventSink sink)
    : runner_(runner),
      tokenizer_(tokenizer),
      config_(config),
      sink_(std::move(sink)),
      blocks_(runner.num_kv_blocks(), runner.block_size(), config.prefix_cache),
      vision_cache_(config.vision_cache_tiles > 0 ? config.vision_cache_tiles : runner.vision_pool_tiles() / 2,
                    [&runner](int64_t handle) { runner.release_image(handle); }) {
  step_budget_ = std::min(config.max_step_tokens, runner.max_step_tokens());
  FOVEA_CHECK(step_budget_ > 0, "step token budget must be positive, got ", step_budget_);
  FOVEA_CHECK(config.max_batch_seqs > 0, "max_batch_seqs must be positive, got ", config.max_batch_seqs);
  tokens_per_tile_ = runner.desc().vision.tokens_per_tile();
  // A ViT tile (1025 tokens through a 0.3B encoder) costs about a fifth of the LLM work on its 256 tokens for
  // InternVL2-8B; a quarter of tokens_per_tile is that ratio, rounded to keep steps a little lighter.
  vit_tile_cost_ = config.vit_tile_cost >= 0 ? config.vit_tile_cost : tokens_per_tile_ / 4;
}

Scheduler::~Scheduler() {
  // The engine cancels everything first; this only returns what a request could still hold.
  for (auto& seq : running_) release_resources(*seq);
}

std::string Scheduler::check_limits(const PreparedRequest& request) const {
  const ModelDesc& desc = runner_.desc();
  const int prompt_len = int(request.prompt.size());
  const GenerationParams& params = request.params;
  if (prompt_len == 0) return "empty prompt";
  if (params.max_tokens < 1) return str("max_tokens must be at least 1, got ", params.max_tokens);
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) return str("top_p must be in (0, 1], got ", params.top_p);
  if (prompt_len > desc.llm.max_position)
    return context_length_error(prompt_len, desc.llm.max_position);
  const int positions = kv_positions(prompt_len, effective_max_tokens(request, desc.llm.max_position));
  const int needed = blocks_for(positions, blocks_.block_size());
  if (needed > blocks_.num_blocks())
    return str("prompt of ", prompt_len, " tokens plus max_tokens needs ", positions, " KV positions; the pool holds ",
               blocks_.num_blocks() * blocks_.block_size(), " (", blocks_.num_blocks(), " blocks of ",
               blocks_.block_size(), ")");
  const int vocab = desc.llm.vocab;
  for (const int32_t id : request.prompt)
    if (id < 0 || id >= vocab) return str("prompt token id ", id, " outside the vocabulary of ", vocab);
  for (const int32_t id : request.answer_ids)
    if (id < 0 || id >= vocab) return str("answer token id ", id, " outside the vocabulary of ", vocab);
  for (size_t i = 0; i < request.images.size(); ++i) {
    const ImageSlot& slot = request.images[i];
    if (slot.tiles > runner_.max_step_tiles() || slot.tiles > runner_.vision_pool_tiles())
      return str("image #", i + 1, " has ", slot.tiles, " tiles; the runner takes at most ",
                 std::min(runner_.max_step_tiles(), runner_.vision_pool_tiles()), " per image");
    if (slot.begin < 0 || slot.end() > prompt_len || slot.rows != slot.tiles * tokens_per_tile_ ||
        (i > 0 && slot.begin < request.images[i - 1].end()))
      return str("image #", i + 1, " span [", slot.begin, ", ", slot.end(), ") does not fit the prompt");
    if (slot.pixels.empty()) return str("image #", i + 1, " has no pixels");
  }
  return "";
}

void Scheduler::add(PreparedRequest request) {
  const std::string problem = check_limits(request);
  if (!problem.empty()) {
    emit_final_without_sequence(request, "error", problem);
    return;
  }
  const ModelDesc& desc = runner_.desc();
  auto seq = std::make_unique<Sequence>();
  seq->id = request.id;
  seq->prompt_len = int(request.prompt.size());
  seq->max_tokens = effective_max_tokens(request, desc.llm.max_position);  // before the prompt moves out
  seq->tokens = std::move(request.prompt);
  seq->images = std::move(request.images);
  seq->params = std::move(request.params);
  seq->answer_ids = std::move(request.answer_ids);
  if (!seq->params.ignore_eos) seq->stop_ids.assign(desc.eos_ids.begin(), desc.eos_ids.end());
  seq->stop_ids.insert(seq->stop_ids.end(), seq->params.stop_token_ids.begin(), seq->params.stop_token_ids.end());
  seq->rng = Rng(seq->params.seed);
  if (tokenizer_) {
    seq->decoder.emplace(*tokenizer_, true);
    seq->stop_matcher.emplace(seq->params.stop);
  }
  seq->submitted = request.submitted;
  if (blocks_.prefix_cache()) compute_block_hashes(*seq);
  waiting_.push_back(std::move(seq));
}

// Chain hash of each full prompt block: (parent hash, then per position its token id and, at image positions,
// the image key and the row within the image). Two different images never share a block even when their
// token ids (all <IMG_CONTEXT>) are equal; the same image at the same place always does.
void Scheduler::compute_block_hashes(Sequence& seq) const {
  const int bs = blocks_.block_size();
  const int full_blocks = seq.prompt_len / bs;
  Hash128 parent;
  size_t image = 0;
  seq.block_hashes.clear();
  for (int b = 0; b < full_blocks; ++b) {
    HashBuilder builder;
    builder.add(parent);
    for (int pos = b * bs; pos < (b + 1) * bs; ++pos) {
      builder.add_i32(seq.tokens[size_t(pos)]);
      while (image < seq.images.size() && seq.images[image].end() <= pos) ++image;
      if (image < seq.images.size() && seq.images[image].begin <= pos) {
        builder.add_i32(pos - seq.images[image].begin);  // the row: >= 0 marks an image position
        builder.add(seq.images[image].key);
      } else {
        builder.add_i32(-1);  // a text position
      }
    }
    parent = builder.finish();
    seq.block_hashes.push_back(parent);
  }
}

int Scheduler::running() const {
  return int(std::count_if(running_.begin(), running_.end(), [](const auto& s) { return !s->finished; }));
}

bool Scheduler::cancel(int64_t request_id) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
    if ((*it)->id == request_id) {
      finish(**it, "cancelled", "", {});
      waiting_.erase(it);
      return true;
    }
  for (auto it = running_.begin(); it != running_.end(); ++it)
    if ((*it)->id == request_id) {
      finish(**it, "cancelled", "", {});
      running_.erase(it);
      return true;
    }
  return false;
}

void Scheduler::cancel_all(const std::string& why) {
  for (auto& seq : waiting_) finish(*seq, "cancelled", why, {});
  for (auto& seq : running_)
    if (!seq->finished) finish(*seq, "cancelled", why, {});
  waiting_.clear();
  running_.clear();
}

void Scheduler::fail_all(const std::string& error) {
  for (auto& seq : waiting_) finish(*seq, "error", error, {});
  for (auto& seq : running_)
    if (!seq->finished) finish(*seq, "error", error, {});
  waiting_.clear();
  running_.clear();
}

bool Scheduler::admit(Sequence& seq) {
  if (int(running_.size()) >= config_.max_batch_seqs) return false;
  const int bs = blocks_.block_size();
  // At least the prompt's last token must run to produce the first output, so a fully cached prompt keeps
  // its last block out of the match.
  std::vector<int32_t> matched = blocks_.match_prefix(seq.block_hashes, (seq.prompt_len - 1) / bs);
  const int total = blocks_for(kv_positions(seq.prompt_len, seq.max_tokens), bs);
  const int needed = total - int(matched.size());
  if (needed > blocks_.free_blocks()) {
    blocks_.release(matched);
    return false;
  }
  seq.blocks = std::move(matched);
  const std::vector<int32_t> fresh = blocks_.allocate(needed);
  seq.blocks.insert(seq.blocks.end(), fresh.begin(), fresh.end());
  seq.published = int(seq.blocks.size()) - needed;
  seq.computed = seq.published * bs;
  counters_.prefix_cache_hit_tokens += seq.computed;
  counters_.prompt_tokens += seq.prompt_len;
  for (ImageSlot& slot : seq.images)
    if (slot.end() <= seq.computed) {
      slot.done = true;
      slot.pixels = Tensor();
    }
  return true;
}

Scheduler::StepPlan Scheduler::plan_step() {
  StepPlan plan;
  plan.budget_left = step_budget_;
  // Decoding sequences first: one token each keeps long outputs moving whatever the prefill load.
  for (auto& seq : running_) {
    if (seq->prefilling() || plan.budget_left < 1) continue;
    plan.chunks.push_back(PlannedChunk{seq.get(), 1, {}});
    plan.budget_left -= 1;
  }
  for (auto& seq : running_)
    if (seq->prefilling()) plan_chunk(*seq, plan);
  while (!waiting_.empty() && plan.budget_left > 0) {
    if (!admit(*waiting_.front())) break;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    const size_t planned_before = plan.chunks.size();
    plan_chunk(*running_.back(), plan);
    if (plan.chunks.size() == planned_before) break;  // it got nothing this step: admit no more behind it
  }
  return plan;
}

// Plans the next prefill chunk of `seq` within what is left of the step's token and ViT budget. A chunk is
// cut right before an image that cannot be encoded in this step (tile limit, vision pool, budget).
void Scheduler::plan_chunk(Sequence& seq, StepPlan& plan) {
  const int start = seq.computed;
  int n = std::min(seq.remaining(), plan.budget_left);
  if (n <= 0) return;
  PlannedChunk chunk{&seq, 0, {}};
  for (int i = 0; i < int(seq.images.size()); ++i) {
    ImageSlot& slot = seq.images[size_t(i)];
    if (slot.done || slot.end() <= start) continue;
    if (slot.begin >= start + n) break;
    const int lo = std::max(slot.begin, start);
    if (slot.handle < 0 && !acquire_embedding(seq, i, plan)) {
      // Capped at half the step so that a big image at the head of a chunk always fits an emptyish step.
      const int cost = std::min(slot.tiles * vit_tile_cost_, step_budget_ / 2);
      const int vision_room = runner_.free_vision_tiles() + vision_cache_.unpinned_tiles() - plan.encode_tiles;
      const bool fits = plan.encode_tiles + slot.tiles <= runner_.max_step_tiles() && vision_room >= slot.tiles &&
                        (lo - start) + 1 + cost <= plan.budget_left;
      if (!fits) {
        n = lo - start;
        break;
      }
      plan.budget_left -= cost;
      plan.encode_tiles += slot.tiles;
      plan.to_encode.emplace_back(&seq, i);
      ++counters_.vision_cache_misses;
      n = std::min(n, plan.budget_left);
    }
    const int hi = std::min(slot.end(), start + n);
    chunk.images.push_back(PlannedImage{i, lo - slot.begin, hi - lo, lo - start});
  }
  if (n <= 0) return;
  chunk.tokens = n;
  plan.budget_left -= n;
  plan.chunks.push_back(std::move(chunk));
}

// True when the slot's embedding is already on the device (vision cache), or another chunk of this step is
// having the same image encoded; both count as vision-cache hits.
bool Scheduler::acquire_embedding(Sequence& seq, int slot_index, StepPlan& plan) {
  ImageSlot& slot = seq.images[size_t(slot_index)];
  for (const auto& [other, other_slot] : plan.to_encode)
    if (other->images[size_t(other_slot)].key == slot.key) {
      plan.to_encode.emplace_back(&seq, slot_index);  // shares that encode; pinned once it exists
      ++counters_.vision_cache_hits;
      return true;
    }
  const int64_t handle = vision_cache_.acquire(slot.key);
  if (handle < 0) return false;
  slot.handle = handle;
  slot.pixels = Tensor();
  ++counters_.vision_cache_hits;
  return true;
}

}  // namespace fovea

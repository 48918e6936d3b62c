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

std::string Scheduler::check_limits(const PreparedRequest& request, ErrorKind* kind) const {
  *kind = ErrorKind::InvalidRequest;
  const ModelDesc& desc = runner_.desc();
  const int prompt_len = int(request.prompt.size());
  const GenerationParams& params = request.params;
  if (prompt_len == 0) return "empty prompt";
  if (params.max_tokens < 1) return str("max_tokens must be at least 1, got ", params.max_tokens);
  const std::string sampling = check_sampling(params);
  if (!sampling.empty()) return sampling;
  *kind = ErrorKind::ContextLength;
  if (prompt_len > desc.llm.max_position)
    return context_length_error(prompt_len, desc.llm.max_position);
  const int positions = kv_positions(prompt_len, effective_max_tokens(request, desc.llm.max_position));
  const int needed = blocks_for(positions, blocks_.block_size());
  if (needed > blocks_.num_blocks())
    return str("prompt of ", prompt_len, " tokens plus max_tokens needs ", positions, " KV positions; the pool holds ",
               blocks_.num_blocks() * blocks_.block_size(), " (", blocks_.num_blocks(), " blocks of ",
               blocks_.block_size(), ")");
  *kind = ErrorKind::InvalidRequest;
  const int vocab = desc.llm.vocab;
  for (const int32_t id : request.prompt)
    if (id < 0 || id >= vocab) return str("prompt token id ", id, " outside the vocabulary of ", vocab);
  for (const int32_t id : request.answer_ids)
    if (id < 0 || id >= vocab) return str("answer token id ", id, " outside the vocabulary of ", vocab);
  for (size_t i = 0; i < request.images.size(); ++i) {
    const ImageSlot& slot = request.images[i];
    *kind = ErrorKind::InvalidImage;
    if (slot.tiles > runner_.max_step_tiles() || slot.tiles > runner_.vision_pool_tiles())
      return str("image #", i + 1, " has ", slot.tiles, " tiles; the runner takes at most ",
                 std::min(runner_.max_step_tiles(), runner_.vision_pool_tiles()), " per image");
    *kind = ErrorKind::Internal;  // the spans come from our own chat template
    if (slot.begin < 0 || slot.end() > prompt_len || slot.rows != slot.tiles * tokens_per_tile_ ||
        (i > 0 && slot.begin < request.images[i - 1].end()))
      return str("image #", i + 1, " span [", slot.begin, ", ", slot.end(), ") does not fit the prompt");
    if (slot.pixels.empty()) return str("image #", i + 1, " has no pixels");
  }
  *kind = ErrorKind::None;
  return "";
}

void Scheduler::add(PreparedRequest request) {
  if (!request.choice_ids.empty()) {
    add_choices(std::move(request));
    return;
  }
  ErrorKind kind = ErrorKind::None;
  const std::string problem = check_limits(request, &kind);
  if (!problem.empty()) {
    emit_final_without_sequence(request, "error", problem, kind);
    return;
  }
  waiting_.push_back(make_sequence(std::move(request)));
}

std::unique_ptr<Sequence> Scheduler::make_sequence(PreparedRequest request) const {
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
  seq->rng = Rng(seq->params.seed ? *seq->params.seed : random_seed());
  seq->penalties = PenaltyState(penalties_of(seq->params), seq->tokens);
  if (tokenizer_) {
    seq->decoder.emplace(*tokenizer_, true);
    seq->stop_matcher.emplace(seq->params.stop);
  }
  seq->submitted = request.submitted;
  seq->added_step = counters_.steps;
  if (blocks_.prefix_cache()) compute_block_hashes(*seq);
  return seq;
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
  Sequence* found = nullptr;
  for (auto& seq : waiting_)
    if (!found && seq->id == request_id && !seq->finished) found = seq.get();
  for (auto& seq : running_)
    if (!found && seq->id == request_id && !seq->finished) found = seq.get();
  if (!found) return false;
  finish(*found, "cancelled", "", ErrorKind::None, {});  // a choice request's other scoring sequences end with it
  drop_finished();
  return true;
}

void Scheduler::drop_finished() {
  const auto finished = [](const std::unique_ptr<Sequence>& s) { return s->finished; };
  std::erase_if(waiting_, finished);
  std::erase_if(running_, finished);
}

void Scheduler::cancel_all(const std::string& why) {
  for (auto& seq : waiting_)
    if (!seq->finished) finish(*seq, "cancelled", why, ErrorKind::None, {});
  for (auto& seq : running_)
    if (!seq->finished) finish(*seq, "cancelled", why, ErrorKind::None, {});
  waiting_.clear();
  running_.clear();
}

void Scheduler::fail_all(const std::string& error, ErrorKind kind) {
  for (auto& seq : waiting_)
    if (!seq->finished) finish(*seq, "error", error, kind, {});
  for (auto& seq : running_)
    if (!seq->finished) finish(*seq, "error", error, kind, {});
  waiting_.clear();
  running_.clear();
}

Scheduler::Admission Scheduler::admit(Sequence& seq) {
  if (int(running_.size()) >= config_.max_batch_seqs) return Admission::NoRoom;
  const int bs = blocks_.block_size();
  // At least the prompt's last token must run to produce the first output, so a fully cached prompt keeps
  // its last block out of the match.
  const int max_match = (seq.prompt_len - 1) / bs;
  const int cached = blocks_.cached_prefix_blocks(seq.block_hashes, max_match);
  if (cached < max_match && cached < int(seq.block_hashes.size()) &&
      blocks_.pending(seq.block_hashes[size_t(cached)])) {
    // A running sequence is computing the next block of this prefix: wait for it to be published. Should that
    // sequence fail or be cancelled, the mark goes with its blocks and this one computes the block itself.
    if (!seq.waited_for_prefix) ++counters_.inflight_prefix_waits;
    seq.waited_for_prefix = true;
    return Admission::WaitsForPrefix;
  }
  std::vector<int32_t> matched = blocks_.match_prefix(seq.block_hashes, max_match);
  const int total = blocks_for(kv_positions(seq.prompt_len, seq.max_tokens), bs);
  const int needed = total - int(matched.size());
  if (needed > blocks_.free_blocks()) {
    blocks_.release(matched);
    return Admission::NoRoom;
  }
  seq.blocks = std::move(matched);
  const std::vector<int32_t> fresh = blocks_.allocate(needed);
  seq.blocks.insert(seq.blocks.end(), fresh.begin(), fresh.end());
  seq.published = int(seq.blocks.size()) - needed;
  seq.computed = seq.published * bs;
  // The prompt blocks it will compute are pending until published: later requests sharing them wait.
  for (size_t b = size_t(seq.published); b < seq.block_hashes.size(); ++b)
    blocks_.mark_pending(seq.blocks[b], seq.block_hashes[b]);
  counters_.prefix_cache_hit_tokens += seq.computed;
  if (seq.waited_for_prefix) counters_.inflight_prefix_hit_tokens += seq.computed;
  counters_.prompt_tokens += seq.prompt_len;
  for (ImageSlot& slot : seq.images)
    if (slot.end() <= seq.computed) {
      slot.done = true;
      slot.pixels = Tensor();
    }
  return Admission::Admitted;
}

// Waiting requests in the order they are offered admission: those that waited `aging_steps` or more first
// (FIFO, so nothing starves), then the longest cached prefix first (cheap requests, e.g. further questions
// about an image whose prefix was just computed, go right after it; ties FIFO). Only the queue's head is
// ranked: the engine keeps the queue short (prefetch_limit), tests may not.
std::vector<size_t> Scheduler::admission_order() const {
  constexpr size_t kRanked = 512;
  const size_t n = std::min(waiting_.size(), kRanked);
  const int bs = blocks_.block_size();
  struct Rank {
    bool aged;
    int cached;  // leading prompt blocks already published
    size_t index;
  };
  std::vector<Rank> ranks;
  ranks.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Sequence& seq = *waiting_[i];
    const bool aged = counters_.steps - seq.added_step >= config_.aging_steps;
    ranks.push_back({aged, aged ? 0 : blocks_.cached_prefix_blocks(seq.block_hashes, (seq.prompt_len - 1) / bs), i});
  }
  std::sort(ranks.begin(), ranks.end(), [](const Rank& a, const Rank& b) {
    if (a.aged != b.aged) return a.aged;
    if (a.cached != b.cached) return a.cached > b.cached;
    return a.index < b.index;
  });
  std::vector<size_t> order;
  order.reserve(n);
  for (const Rank& r : ranks) order.push_back(r.index);
  return order;
}

void Scheduler::admit_waiting(StepPlan& plan) {
  bool any = false;
  waiting_for_prefix_ = 0;
  for (const size_t index : admission_order()) {
    if (plan.budget_left <= 0) break;
    const Admission admission = admit(*waiting_[index]);
    if (admission == Admission::WaitsForPrefix) {
      ++waiting_for_prefix_;
      continue;
    }
    if (admission == Admission::NoRoom) break;  // nothing is admitted past a request that does not fit
    running_.push_back(std::move(waiting_[index]));
    any = true;
    const size_t planned_before = plan.chunks.size();
    plan_chunk(*running_.back(), plan);
    if (plan.chunks.size() == planned_before) break;  // it got nothing this step: admit no more behind it
  }
  if (any) std::erase_if(waiting_, [](const std::unique_ptr<Sequence>& s) { return s == nullptr; });
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
  admit_waiting(plan);
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

// Scheduler::step: ViT for the step's new images, one LLM step over every planned chunk, then bookkeeping.
#include <algorithm>
#include <chrono>
#include <exception>

#include "core/error.h"
#include "engine/scheduler.h"

namespace fovea {
namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

bool Scheduler::step() {
  if (!has_work()) return false;
  StepPlan plan = plan_step();
  if (plan.chunks.empty()) {
    // Cannot happen by design (docs/design.md, liveness): the oldest prefill always has the room it needs once
    // nothing else holds it. Should it happen anyway, fail the oldest request instead of spinning forever.
    Sequence* stuck = running_.empty() ? waiting_.front().get() : running_.front().get();
    finish(*stuck, "error", "request could not be scheduled within the engine's limits", ErrorKind::Internal, {});
    drop_finished();
    return true;
  }
  if (before_run_) before_run_();
  encode_planned(plan);
  std::erase_if(plan.chunks, [](const PlannedChunk& c) { return c.seq->finished; });
  if (!plan.chunks.empty()) {
    const std::vector<SeqChunk> chunks = build_chunks(plan);
    std::vector<SeqResult> results;
    std::string failure;
    const auto t0 = Clock::now();
    try {
      results = runner_.step(chunks);
      if (results.size() != chunks.size())
        failure = str("runner returned ", results.size(), " results for ", chunks.size(), " chunks");
    } catch (const DeviceError&) {
      throw;  // the device is gone, not this step's requests: the engine fails as a whole (engine.cc)
    } catch (const std::exception& e) {
      failure = e.what();
    }
    counters_.llm_ms += ms_since(t0);
    ++counters_.steps;
    if (failure.empty()) {
      for (size_t i = 0; i < chunks.size(); ++i) {
        Sequence& seq = *plan.chunks[i].seq;
        if (seq.finished) continue;  // a choice request's scoring sequence whose sibling failed in this step
        advance(seq, plan.chunks[i].tokens);
        if (chunks[i].sample) {
          try {
            on_sampled(seq, chunks[i], results[i]);
          } catch (const std::exception& e) {
            fail_sequence(&seq, e.what());
          }
        }
      }
    } else {
      for (const PlannedChunk& c : plan.chunks) fail_sequence(c.seq, "model step failed: " + failure);
    }
  }
  drop_finished();  // also scoring sequences of a choice request that failed elsewhere
  return true;
}

// Encodes every image planned for this step in one batched ViT call; the same image wanted by several chunks
// is encoded once. On failure the sequences that needed those images fail; the rest of the step goes on.
void Scheduler::encode_planned(StepPlan& plan) {
  if (plan.to_encode.empty()) return;
  std::vector<Hash128> keys;
  std::vector<Tensor> pixels;
  std::vector<int> tiles;
  int total_tiles = 0;
  for (const auto& [seq, slot_index] : plan.to_encode) {
    const ImageSlot& slot = seq->images[size_t(slot_index)];
    if (std::find(keys.begin(), keys.end(), slot.key) != keys.end()) continue;
    keys.push_back(slot.key);
    pixels.push_back(slot.pixels);
    tiles.push_back(slot.tiles);
    total_tiles += slot.tiles;
  }
  std::vector<int64_t> handles;
  std::string failure;
  const auto t0 = Clock::now();
  try {
    vision_cache_.make_room(total_tiles, [this] { return runner_.free_vision_tiles(); });
    handles = runner_.encode_images(pixels);
    if (handles.size() != keys.size())
      failure = str("runner returned ", handles.size(), " image handles for ", keys.size(), " images");
  } catch (const DeviceError&) {
    throw;  // as in step(): the engine fails as a whole
  } catch (const std::exception& e) {
    failure = e.what();
  }
  counters_.vit_ms += ms_since(t0);
  if (!failure.empty()) {
    for (int64_t h : handles) runner_.release_image(h);
    for (const auto& [seq, slot_index] : plan.to_encode)
      if (!seq->finished) fail_sequence(seq, "image encoding failed: " + failure);
    return;
  }
  for (size_t k = 0; k < keys.size(); ++k) vision_cache_.insert(keys[k], handles[k], tiles[k]);
  // insert() pinned each image once: that pin goes to its first user, the others pin again.
  std::vector<bool> first_pin_used(keys.size(), false);
  for (const auto& [seq, slot_index] : plan.to_encode) {
    ImageSlot& slot = seq->images[size_t(slot_index)];
    const size_t k = size_t(std::find(keys.begin(), keys.end(), slot.key) - keys.begin());
    slot.handle = first_pin_used[k] ? vision_cache_.acquire(slot.key) : handles[k];
    first_pin_used[k] = true;
    slot.pixels = Tensor();  // the embedding now lives on the device until the prefill passes the image
  }
}

std::vector<SeqChunk> Scheduler::build_chunks(const StepPlan& plan) const {
  const int bs = blocks_.block_size();
  std::vector<SeqChunk> chunks;
  chunks.reserve(plan.chunks.size());
  for (const PlannedChunk& planned : plan.chunks) {
    const Sequence& seq = *planned.seq;
    SeqChunk chunk;
    chunk.start_pos = seq.computed;
    chunk.tokens.assign(seq.tokens.begin() + seq.computed, seq.tokens.begin() + seq.computed + planned.tokens);
    const int end = seq.computed + planned.tokens;
    chunk.block_table.assign(seq.blocks.begin(), seq.blocks.begin() + (end + bs - 1) / bs);
    for (const PlannedImage& image : planned.images)
      chunk.vision.push_back(
          VisionRef{seq.images[size_t(image.slot)].handle, image.row_begin, image.rows, image.chunk_offset});
    chunk.sample = end == int(seq.tokens.size());
    if (chunk.sample) {
      if (seq.generated == 0) chunk.answer_ids = seq.answer_ids;
      // Downloading [vocab] floats costs; only sampling, log-probs or an explicit ask for them need it.
      chunk.want_logits = seq.params.temperature > 0.0f || seq.penalties.active() || seq.params.top_logprobs > 0 ||
                          (seq.generated == 0 && seq.params.return_first_logits);
    }
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

// After a successful step: the chunk's KV is in the cache. Publish prompt blocks that became full, and let go
// of image embeddings whose rows are all fed.
void Scheduler::advance(Sequence& seq, int tokens) {
  const int bs = blocks_.block_size();
  counters_.prefill_tokens += std::max(0, std::min(seq.prompt_len, seq.computed + tokens) - seq.computed);
  seq.computed += tokens;
  while (seq.published < int(seq.block_hashes.size()) && (seq.published + 1) * bs <= seq.computed) {
    blocks_.publish(seq.blocks[size_t(seq.published)], seq.block_hashes[size_t(seq.published)]);
    ++seq.published;
  }
  for (ImageSlot& slot : seq.images) {
    if (slot.done || slot.end() > seq.computed) continue;
    if (slot.handle >= 0) vision_cache_.unpin(slot.key);
    slot.handle = -1;
    slot.done = true;
    slot.pixels = Tensor();
  }
}

}  // namespace fovea

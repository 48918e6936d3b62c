// A request as the scheduler sees it: token ids with image spans (after preprocessing and tokenising), the KV
// blocks it holds and how far its prefill has got. Scheduler-thread only.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/hash.h"
#include "core/tensor.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace fovea {

using Clock = std::chrono::steady_clock;

// One image of a prompt: which prompt positions it fills and where its embedding comes from.
struct ImageSlot {
  Hash128 key;  // content hash of the file bytes folded with the tiling parameters
  int tiles = 0;
  int32_t begin = 0;    // prompt index of its first <IMG_CONTEXT>
  int32_t rows = 0;     // tiles * tokens_per_tile
  Tensor pixels;        // host tiles, [tiles, 3, S, S] F32 or (gpu_normalize) [tiles, S, S, 3] U8; dropped
                        // once encoded or covered by cached KV
  int64_t handle = -1;  // the runner's embedding while pinned in the vision cache
  bool done = false;    // every row is in the KV cache: no embedding needed any more
  int32_t end() const { return begin + rows; }
};

// A request with GenerationParams::choices, scored by one sequence per distinct context (the prompt plus a
// proper prefix of some choice); see choice_scoring.cc.
struct ChoiceGroup {
  int64_t id = -1;  // the request's; its scoring sequences carry it too
  Clock::time_point submitted;
  int prompt_len = 0;
  bool return_prompt_token_ids = false;                // the request's GenerationParams flag
  std::vector<std::string> texts;                      // the choices as given
  std::vector<std::vector<int32_t>> choice_ids;        // their tokens
  std::vector<std::vector<int32_t>> next_ids;          // per context: the tokens following it in some choice
  std::vector<std::vector<float>> next_logprobs;       // per context, once its sequence is scored
  std::vector<std::vector<std::pair<int, int>>> path;  // per choice token: (context, index in next_ids)
  int unscored = 0;                                    // contexts still to score
  bool done = false;                                   // its final event is out
};

// What the preprocessing stage hands the scheduler.
struct PreparedRequest {
  int64_t id = -1;
  std::vector<int32_t> prompt;
  std::vector<ImageSlot> images;  // ordered by begin, spans disjoint
  GenerationParams params;
  std::vector<int32_t> answer_ids;  // parallel to params.answers: each answer's first token
  std::vector<std::vector<int32_t>> choice_ids;  // parallel to params.choices: each choice's tokens
  Clock::time_point submitted = Clock::now();
};

struct Sequence {
  int64_t id = -1;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int prompt_len = 0;
  std::vector<ImageSlot> images;
  std::vector<Hash128> block_hashes;  // chain hash of each full prompt block
  std::vector<int32_t> blocks;        // KV blocks, reserved at admission for prompt + max_tokens - 1 positions
  int computed = 0;                   // leading tokens whose KV is in the cache
  int published = 0;                  // leading prompt blocks offered to the prefix cache
  int max_tokens = 1;                 // after clamping to max_position
  GenerationParams params;
  std::vector<int32_t> answer_ids;
  std::map<std::string, float> answer_logprobs;
  std::vector<float> first_logits;  // kept until the final event when params.return_first_logits
  std::vector<int32_t> stop_ids;  // model EOS ids + the request's stop ids
  Rng rng{0};
  PenaltyState penalties;  // vLLM's repetition / presence / frequency penalties over prompt and output
  std::optional<StreamDecoder> decoder;
  std::optional<StopMatcher> stop_matcher;
  int generated = 0;
  bool finished = false;  // its final event is out; the scheduler drops it at the end of the step
  Clock::time_point submitted;
  int64_t added_step = 0;          // the scheduler's step count when it was queued (aging)
  bool waited_for_prefix = false;  // was held back at least once while its prefix was being computed
  std::shared_ptr<ChoiceGroup> choice_group;  // set on a choice-scoring sequence (no events of its own)
  int choice_context = -1;                    // which of the group's contexts it scores
  std::vector<float> choice_logprobs;         // log-probs of the group's next_ids[choice_context]

  int remaining() const { return int(tokens.size()) - computed; }
  bool prefilling() const { return computed < prompt_len; }
};

}  // namespace fovea

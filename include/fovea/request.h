// What a caller asks of Fovea: images, text and how to generate. Part of the public API (include/fovea/); the
// CLI, the HTTP server, the batch jobs and the Python module build these.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fovea {

enum class TilingPolicy : uint8_t { Official, Compact };

struct ImageInput {
  std::string bytes;  // the encoded file (JPEG/PNG/...); the content hash is taken over these bytes
  std::string label;  // for error messages (a path, "data: URL #1", ...)
};

// Sampling follows vLLM's SamplingParams: the penalties adjust the logits (greedy too), then temperature, min_p,
// top_k and top_p choose what is sampled. Log-probs (top_logprobs, answers, choices) are the model's own, before
// any of them. Several samples of one prompt (vLLM's `n`) are several requests, seeds seed, seed+1, ...: the
// interfaces fan them out and the prefix cache shares their prompt.
struct GenerationParams {
  int max_tokens = 1;
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;        // (0, 1]
  int top_k = 0;             // 0 or -1: every token
  float min_p = 0.0f;        // [0, 1]
  float repetition_penalty = 1.0f;  // > 0; 1: none
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  std::optional<uint64_t> seed;     // none: a fresh random seed per request
  std::vector<std::string> stop;          // stop strings (not included in the text)
  std::vector<int32_t> stop_token_ids;    // in addition to the model's EOS ids
  std::vector<std::string> answers;       // when set: log-probs of each answer's first token, per request
  // When set: the request is scored, not sampled. The answer is the choice with the highest total log-prob
  // (every token of it, as a continuation of the prompt); RequestEvent::choice_logprobs has every total.
  std::vector<std::string> choices;
  int top_logprobs = 0;                   // OpenAI `logprobs`: 0 none; >0 return that many per token
  bool return_first_logits = false;       // final event carries the first token's full float logits (costly)
  bool ignore_eos = false;                // generate max_tokens even past the model's EOS (benchmarks)
  bool return_prompt_token_ids = false;   // final event carries the prompt's token ids (images expanded)
};

struct Request {
  std::vector<ImageInput> images;  // placed at the start of the user turn, as InternVL's chat does
  std::string prompt;              // user text
  std::string system;              // empty: the template's default system text
  GenerationParams params;
  TilingPolicy tiling = TilingPolicy::Official;
  int max_tiles = 0;               // 0: the model's max_dynamic_patch
};

}  // namespace fovea

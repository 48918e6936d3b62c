// The engine: takes requests (images + text + generation parameters) from any thread, preprocesses and tokenises
// them on a thread pool, schedules them with continuous batching onto a ModelRunner, and reports results through
// callbacks. `fovea run`, `fovea serve` and `fovea bench` are thin layers over this header.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fovea {

class ModelRunner;

enum class TilingPolicy : uint8_t { Official, Compact };

struct ImageInput {
  std::string bytes;  // the encoded file (JPEG/PNG/...); the content hash is taken over these bytes
  std::string label;  // for error messages (a path, "data: URL #1", ...)
};

struct GenerationParams {
  int max_tokens = 1;
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;
  uint64_t seed = 0;
  std::vector<std::string> stop;          // stop strings (not included in the text)
  std::vector<int32_t> stop_token_ids;    // in addition to the model's EOS ids
  std::vector<std::string> answers;       // when set: log-probs of each answer's first token, per request
  // When set: the request is scored, not sampled. The answer is the choice with the highest total log-prob
  // (every token of it, as a continuation of the prompt); RequestEvent::choice_logprobs has every total.
  std::vector<std::string> choices;
  int top_logprobs = 0;                   // OpenAI `logprobs`: 0 none; >0 return that many per token
  bool return_first_logits = false;       // final event carries the first token's full float logits (costly)
  bool ignore_eos = false;                // generate max_tokens even past the model's EOS (benchmarks)
};

struct Request {
  std::vector<ImageInput> images;  // placed at the start of the user turn, as InternVL's chat does
  std::string prompt;              // user text
  std::string system;              // empty: the template's default system text
  GenerationParams params;
  TilingPolicy tiling = TilingPolicy::Official;
  int max_tiles = 0;               // 0: the model's max_dynamic_patch
};

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
};

// A streaming event: new text/tokens, then exactly one final event (finished == true).
struct RequestEvent {
  std::string text_delta;
  std::vector<int32_t> token_delta;
  std::vector<TokenLogprob> logprob_delta;
  bool finished = false;
  std::string finish_reason;                   // "stop", "length", "cancelled", "error"
  std::string error;                           // non-empty when the request failed (its own fault or ours)
  std::map<std::string, float> answer_logprobs;  // answer text -> log-prob, when params.answers was set
  std::vector<float> first_logits;             // [vocab] of the first generated token, when asked (final event)
  std::vector<float> choice_logprobs;          // per params.choices entry, same order (final event)
  int prompt_tokens = 0;
  int completion_tokens = 0;
  double ms = 0.0;                             // submit to finish
};

using RequestCallback = std::function<void(const RequestEvent&)>;

struct EngineConfig {
  std::string model_dir;
  std::string backend = "auto";   // cpu, cuda, auto
  std::string gpus;               // "" one default device, "all" or "0,1,3": one engine per GPU (data parallel)
  int replicas = 1;               // engines on the CPU backend, through the same data-parallel dispatch
  int kv_blocks = 0;              // 0: size from memory
  int block_size = 16;
  int max_step_tokens = 16384;    // token budget per step (image tokens count; ViT tiles are costed too)
  int max_batch_seqs = 256;
  int preprocess_threads = 0;     // 0: all cores
  bool prefix_cache = true;
  int vision_cache_tiles = 0;     // 0: default size
  int max_queue = 100000;         // submit() refuses beyond this (serve answers 429)
  int max_image_pixels = 0;       // 0: default limit
  bool cuda_graphs = true;        // replay pure decode steps as CUDA graphs (CUDA backend only)
  bool vit_graphs = false;        // also replay ViT batches per tile-count bucket (CUDA only; needs cuda_graphs)
  // Hand the runner tiles as RGB bytes and let it normalise them on the device (4x fewer bytes to copy,
  // bit-identical values), where the runner accepts them; false: the host normalises to F32 as before.
  bool gpu_normalize = true;
  // "none" (the checkpoint's dtype), or W8A8 E4M3 for the LLM's projections with a scaling recipe
  // (backend/fp8_recipe.h): "fp8-tensor" (per-tensor weight and dynamic activation scales: a request's answer
  // depends on its batch-mates), "fp8-channel" (per-channel weights x per-token activations), "fp8-block"
  // (128x128 weight blocks x 1x128 activation blocks); "fp8" = fp8-channel; "fp8-all": fp8 for the ViT layers'
  // linears too (slower on the H200). The patch embedding, the projector and the LM head stay in the
  // checkpoint's dtype.
  std::string quantization = "none";
  // A 4-bit AWQ / GPTQ checkpoint's LLM linears: "packed" keeps them 4-bit on the device (W4A16, linear_w4),
  // "dequantize" loads them as bf16, "auto" packs on CUDA and dequantizes on the CPU (whose linear_w4 is the
  // scalar reference) and whenever --quantization asks for fp8 (which needs them dense).
  std::string w4 = "auto";
};

struct EngineStats {
  int64_t requests_submitted = 0;
  int64_t requests_finished = 0;
  int64_t requests_failed = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t prefix_cache_hit_tokens = 0;     // prompt tokens whose KV was reused
  int64_t prefill_tokens = 0;              // prompt tokens whose KV was computed
  int64_t inflight_prefix_waits = 0;       // requests that waited for a prefix another request was computing
  int64_t inflight_prefix_hit_tokens = 0;  // prompt tokens those requests then reused
  int64_t vision_cache_hits = 0;
  int64_t vision_cache_misses = 0;
  int queue_depth = 0;
  int running = 0;
  int kv_blocks_total = 0;
  int kv_blocks_used = 0;
  double preprocess_ms = 0, vit_ms = 0, llm_ms = 0;  // cumulative time per stage
};

class Engine {
 public:
  // Loads the model onto the chosen backend and starts the scheduler thread.
  explicit Engine(const EngineConfig& config);
  // For tests: an engine over a runner built elsewhere (e.g. a fake); the tokenizer is read from model_dir.
  Engine(const EngineConfig& config, std::unique_ptr<ModelRunner> runner);
  ~Engine();  // stops after cancelling what is left
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. Returns a request id, or throws fovea::Error("queue full") when max_queue is reached.
  // The callback runs on an engine thread; it must not block for long.
  int64_t submit(Request request, RequestCallback callback);
  void cancel(int64_t request_id);  // frees its KV; its final event says "cancelled"
  // Stops taking requests and returns once everything submitted has finished.
  void drain();
  EngineStats stats() const;
  const std::string& model_name() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fovea

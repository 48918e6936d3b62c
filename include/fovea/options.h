// How an engine is built (EngineConfig) and what it reports about itself (EngineStats). Part of the public API.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace fovea {

struct EngineConfig {
  std::string model_dir;
  std::string backend = "auto";   // cpu, cuda, auto
  // Which GPUs to run on, one engine per GPU behind one data-parallel dispatcher: "" the default device (0),
  // "all" every visible GPU, or a list of indices "0,1,3" (one index: one engine on that GPU, same dispatch).
  std::string gpus;
  int replicas = 1;               // the CPU backend's equivalent of gpus: N engines through the same dispatch
  int kv_blocks = 0;              // 0: size from memory
  int block_size = 16;
  int max_step_tokens = 16384;    // token budget per step (image tokens count; ViT tiles are costed too)
  int max_batch_seqs = 256;
  int preprocess_threads = 0;     // 0: all cores (one pool shared by the engines when there are several)
  bool prefix_cache = true;
  int vision_cache_tiles = 0;     // 0: default size
  int max_queue = 100000;         // submit() refuses beyond this (serve answers 429)
  // With several engines (gpus / replicas): a request whose engine failed runs again on another one this many
  // times (engine/data_parallel.h), whichever interface sent it.
  int engine_failure_retries = 1;
  int max_image_pixels = 0;       // 0: default limit
  bool cuda_graphs = true;        // replay pure decode steps as CUDA graphs (CUDA backend only)
  bool vit_graphs = false;        // also replay ViT batches per tile-count bucket (CUDA only; needs cuda_graphs)
  // Hand the runner tiles as RGB bytes and let it normalise them on the device (4x fewer bytes to copy,
  // bit-identical values), where the runner accepts them; false: the host normalises to F32 as before.
  bool gpu_normalize = true;
  // "none" (the checkpoint's dtype), or W8A8 E4M3 for the LLM's projections with a scaling recipe
  // (the names `fovea run --quantization` takes): "fp8-tensor" (per-tensor weight and dynamic activation
  // scales: a request's answer depends on its batch-mates), "fp8-channel" (per-channel weights x per-token
  // activations), "fp8-block" (128x128 weight blocks x 1x128 activation blocks), "fp8-channel-act128"
  // (per-channel weights x 1x128 activation blocks); "fp8" = fp8-channel; "fp8-all": fp8-channel for the ViT
  // layers' linears too (slower on the H200). The patch embedding, the projector and the LM head stay in the
  // checkpoint's dtype. "w4a16": the LLM's projections 4-bit (W4A16, linear_w4): a 4-bit AWQ / GPTQ checkpoint
  // kept packed (as --w4 packed), or 4-bit random weights (group 128) with load_format "dummy"; a dense checkpoint
  // is refused.
  std::string quantization = "none";
  // A 4-bit AWQ / GPTQ checkpoint's LLM linears: "packed" keeps them 4-bit on the device (W4A16, linear_w4),
  // "dequantize" loads them as bf16, "auto" packs on CUDA and dequantizes on the CPU (whose linear_w4 is the
  // scalar reference) and whenever --quantization asks for fp8 (which needs them dense).
  std::string w4 = "auto";
  // A request's outputs independent of what shares its steps (Backend::set_batch_invariant): on CUDA, one GEMM
  // algorithm per weight shape for every batch size, no skinny or fused-W4 kernels, one attention kernel without
  // split-KV. Slower; the CPU reference is batch-invariant anyway. With fp8-tensor the per-tensor activation
  // scale still couples the batch (use fp8 / fp8-channel / fp8-block).
  bool batch_invariant = false;
  // Where the weights come from: "auto" (the checkpoint's safetensors) or "dummy": deterministic random weights of
  // the config's shapes made on the device in the dtype the quantization asks for (bf16, FP8, or 4-bit when the
  // config declares AWQ / GPTQ or with "w4a16"); only config.json and the tokenizer files are read. For measuring
  // a model whose checkpoint is not at hand (vLLM's load_format="dummy"); the answers are meaningless.
  std::string load_format = "auto";
  // Device bytes this engine may plan for (weights, KV pool, image pool, workspace, runtime reserve); 0: what the
  // GPU has free at start (the CPU backend: no limit). A model that does not fit is refused before loading.
  int64_t memory_limit_bytes = 0;
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
  // One engine's identity and health: "cuda:1", "cpu#0" ("" for a lone engine).
  std::string engine;
  bool failed = false;  // the engine's device failed; it takes no more requests
  std::string failure;  // why
  // Behind a data-parallel dispatcher: each engine's own stats, in engine order (the fields above are the sums).
  std::vector<EngineStats> engines;
};

}  // namespace fovea

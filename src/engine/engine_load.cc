// Engine(config): load the checkpoint, pick the backend, size the runner's pools from the config, read the
// tokenizer. Kept apart from engine.cc so that the engine's threading compiles and tests without the runtime.
#include <algorithm>
#include <cstdio>

#include "backend/backend.h"
#include "core/error.h"
#include "engine/engine_impl.h"
#include "model/model_desc.h"
#include "runtime/internvl_runner.h"

namespace fovea {
namespace {

// The CPU reference's step token budget (see the Engine constructor).
constexpr int kCpuMaxStepTokens = 1024;

// KV positions to allocate when the config says 0: a fixed share of memory (40 GB on a GPU; 512 MB and at
// most 64k positions on the CPU reference, which only runs small models and tests), divided by the bytes one
// position takes over all layers; never less than two full steps.

int default_kv_blocks(const ModelDesc& desc, const Backend& backend, int block_size, int max_step_tokens) {
  const bool gpu = backend.device() == Device::CUDA;
  const double budget_bytes = gpu ? 40e9 : 512e6;
  const double bytes_per_position = double(desc.llm.layers) * desc.llm.kv_heads * desc.llm.head_dim * 2.0 *
                                    double(dtype_size(backend.compute_dtype()));
  const double most = gpu ? 4.0e6 : 65536.0;
  const double positions = std::max(std::min(budget_bytes / bytes_per_position, most), double(2 * max_step_tokens));
  return int(positions / block_size);
}

// Everything on the device is allocated here, once; one line says where the memory went (issue: weights, KV pool,
// workspace reported at start-up).
void log_device_memory(const ModelRunner& runner, const RunnerOptions& opts) {
  const auto* internvl = dynamic_cast<const InternVLRunner*>(&runner);
  if (internvl == nullptr) return;
  const RunnerMemory& m = internvl->memory();
  const double gib = 1024.0 * 1024.0 * 1024.0;
  std::fprintf(stderr,
               "fovea: %s memory: weights %.2f GiB, KV pool %.2f GiB (%d blocks x %d tokens), image pool %.2f GiB "
               "(%d tiles), workspace %.2f GiB, total %.2f GiB\n",
               internvl->desc().dir.c_str(), m.weights / gib, m.kv_cache / gib, opts.kv_blocks, opts.block_size,
               m.vision_pool / gib, opts.vision_pool_tiles, m.workspace / gib, m.total() / gib);
}

// EngineConfig::quantization -> which linears run FP8 and with which scaling recipe (backend/fp8_recipe.h).
// "fp8" is the default recipe, per-token x per-channel: batch-invariant, and closer to float32 than per-tensor
// (bench/results/2026-12-02-fp8-recipes-cpu.md). "fp8-all" is the default recipe for the ViT's linears too.
void apply_quantization(const std::string& name, RunnerOptions& opts) {
  struct Choice {
    const char* name;
    bool vit;
    Fp8Scaling scaling;
  };
  static const Choice kChoices[] = {{"fp8", false, Fp8Scaling::Channel},
                                    {"fp8-tensor", false, Fp8Scaling::Tensor},
                                    {"fp8-channel", false, Fp8Scaling::Channel},
                                    {"fp8-block", false, Fp8Scaling::Block},
                                    {"fp8-channel-act128", false, Fp8Scaling::ChannelAct128},
                                    {"fp8-all", true, Fp8Scaling::Channel}};
  if (name == "none") return;
  for (const Choice& c : kChoices)
    if (name == c.name) {
      opts.fp8_llm = true;
      // The ViT's K = 1024 GEMMs gained nothing from FP8 on the H200 while quantizing their activations costs a
      // pass over them: 1.80 ms per tile against 1.52 in bf16 (session 4), so only "fp8-all" quantizes them.
      opts.fp8_vit = c.vit;
      opts.fp8_scaling = c.scaling;
      return;
    }
  FOVEA_FAIL("unknown quantization '", name,
             "' (none, fp8, fp8-tensor, fp8-channel, fp8-block, fp8-channel-act128, fp8-all)");
}

// EngineConfig::w4 -> whether a 4-bit checkpoint's LLM linears stay packed (no effect on dense checkpoints).
bool keep_w4_packed(const EngineConfig& config, bool gpu) {
  FOVEA_CHECK(config.w4 == "auto" || config.w4 == "packed" || config.w4 == "dequantize", "unknown --w4 '", config.w4,
              "' (auto, packed, dequantize)");
  const bool fp8 = config.quantization != "none";
  FOVEA_CHECK(!(fp8 && config.w4 == "packed"), "--w4 packed and --quantization ", config.quantization,
              " exclude each other (FP8 quantizes dense weights; use --w4 dequantize)");
  return config.w4 == "packed" || (config.w4 == "auto" && gpu && !fp8);
}

// The W4A16 line: how many of the LLM's linears stay 4-bit and what they would take as bf16.
void log_w4(const ModelRunner& runner) {
  const auto* internvl = dynamic_cast<const InternVLRunner*>(&runner);
  if (internvl == nullptr || !internvl->desc().quantization.packed()) return;
  const RunnerMemory& m = internvl->memory();
  const W4Loading& w4 = internvl->desc().w4;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  if (!w4.kept_packed) {
    std::fprintf(stderr, "fovea: %s: 4-bit linears dequantized to bf16 at load (W4A16 off)\n",
                 internvl->desc().quantization.describe().c_str());
    return;
  }
  std::fprintf(stderr,
               "fovea: W4A16 (%s): %d LLM linears kept 4-bit on the device, %.2f GiB (%.2f GiB as bf16); %zu "
               "dequantized to bf16\n",
               internvl->desc().quantization.describe().c_str(), m.w4_linears, m.w4_bytes / gib,
               m.w4_bf16_bytes / gib, w4.dequantized.size());
  for (const std::string& why : w4.dequantized) std::fprintf(stderr, "fovea:   dequantized %s\n", why.c_str());
}

// EngineConfig::gpus of one engine: "" or a single GPU index.
int gpu_index(const std::string& gpus) {
  if (gpus.empty()) return 0;
  FOVEA_CHECK(gpus.find_first_not_of("0123456789") == std::string::npos && gpus.size() < 4,
              "one engine runs on one GPU: --gpus '", gpus, "' is not a single index here");
  return std::stoi(gpus);
}

}  // namespace

Engine::Engine(const EngineConfig& config, std::shared_ptr<ThreadPool> prep_pool) : impl_(std::make_unique<Impl>()) {
  Impl& impl = *impl_;
  impl.config = config;
  impl.pool = std::move(prep_pool);
  RunnerOptions opts;
  apply_quantization(config.quantization, opts);  // before any loading: a bad name fails at once
  // One engine drives one GPU: config.gpus is "" (device 0) or that GPU's index here; make_engine_service
  // resolves "all" and lists into one engine per index.
  const int device = gpu_index(config.gpus);
  std::unique_ptr<Backend> backend = make_backend(config.backend, device);
  backend->set_batch_invariant(config.batch_invariant);  // before any GEMM picks its algorithm
  const bool gpu = backend->device() == Device::CUDA;
  // A step cannot be interrupted, and the CPU reference spends seconds on a thousand prompt tokens: shorter
  // steps there let a cancel (a client that went away) take effect within one (13 official tiles still fit).
  if (!gpu) impl.config.max_step_tokens = std::min(impl.config.max_step_tokens, kCpuMaxStepTokens);
  LoadOptions load;
  load.keep_w4 = keep_w4_packed(config, gpu);
  LoadedModel model = load_model(config.model_dir, load);

  opts.block_size = config.block_size;
  opts.max_step_tokens = impl.config.max_step_tokens;
  opts.max_step_seqs = config.max_batch_seqs;
  // One step's ViT batch: a few official 13-tile images on a GPU; the CPU reference keeps its workspace small.
  opts.max_step_tiles = std::max(model.desc.max_dynamic_tiles + 1, gpu ? 48 : 16);
  const int cache_tiles = config.vision_cache_tiles > 0 ? config.vision_cache_tiles : (gpu ? 256 : 32);
  // Room for the cache plus the images being fed (pinned) and those encoded in the next step.
  opts.vision_pool_tiles = cache_tiles + 2 * opts.max_step_tiles;
  opts.kv_blocks = config.kv_blocks > 0
                       ? config.kv_blocks
                       : default_kv_blocks(model.desc, *backend, config.block_size, impl.config.max_step_tokens);
  opts.max_answer_ids = kMaxAnswers;
  // Rows per MLP slice (bounds the [rows, 2 * ffn] workspace: 0.7 GB at 8192 rows for InternVL2-8B). On the
  // H200 8192-row slices ran the two biggest GEMMs at a larger M for 1.1-1.4% more QPM than 2048 (session 3,
  // two A/B runs); the CPU reference keeps the small workspace.
  opts.mlp_rows = gpu ? 8192 : 2048;
  // Decode steps are launch-bound on a GPU (hundreds of small kernels for a batch of a few tokens); replaying
  // them as graphs removes that cost. The CPU backend has no recordings, so the option would only add the
  // scratch KV block there.
  opts.decode_graphs = gpu && config.cuda_graphs;
  // Off unless asked: padding to a bucket costs up to 7 tiles of work per batch; only a GPU run tells whether
  // the launches saved pay for it.
  opts.vit_graphs = gpu && config.cuda_graphs && config.vit_graphs;
  impl.config.vision_cache_tiles = cache_tiles;
  impl.runner = make_internvl_runner(std::move(model), std::move(backend), opts);
  log_device_memory(*impl.runner, opts);
  log_w4(*impl.runner);
  impl.tokenizer = load_tokenizer(config.model_dir);
  if (gpu) impl.bind_scheduler_thread = [device] { bind_cuda_device(device); };
  impl.start();
}

}  // namespace fovea

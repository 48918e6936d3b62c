// Engine(config): pick the backend, describe the weights (a checkpoint's or the config's random ones), plan the
// device memory and refuse what cannot fit, then build the runner (which uploads the weights one tensor at a time)
// and read the tokenizer. Kept apart from engine.cc so that the engine's threading compiles and tests without the
// runtime.
#include <algorithm>
#include <cstdio>

#include "backend/backend.h"
#include "core/error.h"
#include "engine/engine_impl.h"
#include "engine/engine_plan.h"
#include "model/model_desc.h"
#include "runtime/dummy_weights.h"
#include "runtime/internvl_runner.h"

namespace fovea {
namespace {

// Everything on the device is allocated here, once; one line says where the memory went (issue: weights, KV pool,
// workspace reported at start-up).
void log_device_memory(const ModelRunner& runner, const RunnerOptions& opts, const EnginePlan& plan) {
  const auto* internvl = dynamic_cast<const InternVLRunner*>(&runner);
  if (internvl == nullptr) return;
  const RunnerMemory& m = internvl->memory();
  const double gib = 1024.0 * 1024.0 * 1024.0;
  std::fprintf(stderr,
               "fovea: %s memory: weights %.2f GiB, KV pool %.2f GiB (%d blocks x %d tokens), image pool %.2f GiB "
               "(%d tiles), workspace %.2f GiB, total %.2f GiB (planned %.2f GiB + %.2f GiB allocator rounding + "
               "%.2f GiB runtime reserve%s)\n",
               internvl->desc().dir.c_str(), m.weights / gib, m.kv_cache / gib, opts.kv_blocks, opts.block_size,
               m.vision_pool / gib, opts.vision_pool_tiles, m.workspace / gib, m.total() / gib,
               (plan.memory.total() - plan.memory.rounding - plan.memory.reserve) / gib, plan.memory.rounding / gib,
               plan.memory.reserve / gib,
               plan.available > 0 ? str(", of ", format_gib(plan.available), " available").c_str() : "");
}

// The W4A16 line: how many of the LLM's linears stay 4-bit and what they would take as bf16.
void log_w4(const ModelRunner& runner) {
  const auto* internvl = dynamic_cast<const InternVLRunner*>(&runner);
  if (internvl == nullptr) return;
  const RunnerMemory& m = internvl->memory();
  const W4Loading& w4 = internvl->desc().w4;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  if (!internvl->desc().quantization.packed() && m.w4_linears == 0) return;
  if (m.w4_linears == 0) {
    std::fprintf(stderr, "fovea: %s: 4-bit linears dequantized to bf16 at load (W4A16 off)\n",
                 internvl->desc().quantization.describe().c_str());
    return;
  }
  std::fprintf(stderr,
               "fovea: W4A16 (%s): %d LLM linears kept 4-bit on the device, %.2f GiB (%.2f GiB as bf16); %zu "
               "dequantized to bf16\n",
               internvl->desc().quantization.packed() ? internvl->desc().quantization.describe().c_str() : "dummy",
               m.w4_linears, m.w4_bytes / gib, m.w4_bf16_bytes / gib, w4.dequantized.size());
  for (const std::string& why : w4.dequantized) std::fprintf(stderr, "fovea:   dequantized %s\n", why.c_str());
}

// EngineConfig::gpus of one engine: "" or a single GPU index.
int gpu_index(const std::string& gpus) {
  if (gpus.empty()) return 0;
  FOVEA_CHECK(gpus.find_first_not_of("0123456789") == std::string::npos && gpus.size() < 4,
              "one engine runs on one GPU: --gpus '", gpus, "' is not a single index here");
  return std::stoi(gpus);
}

// The device bytes the plan must fit in: the limit the config sets, else (and at most) what the device has free.
size_t available_memory(const EngineConfig& config, const Backend& backend) {
  const size_t free_bytes = backend.memory_free();
  const size_t limit = config.memory_limit_bytes > 0 ? size_t(config.memory_limit_bytes) : 0;
  if (limit == 0) return free_bytes;
  return free_bytes == 0 ? limit : std::min(limit, free_bytes);
}

}  // namespace

BuiltRunner::BuiltRunner() = default;
BuiltRunner::BuiltRunner(BuiltRunner&&) noexcept = default;
BuiltRunner::~BuiltRunner() = default;

BuiltRunner build_runner(const EngineConfig& config) {
  BuiltRunner built;
  const QuantizationChoice quantization = parse_quantization(config.quantization);  // a bad name fails at once
  FOVEA_CHECK(config.load_format == "auto" || config.load_format == "dummy", "unknown load format '",
              config.load_format, "' (auto, dummy)");
  // One engine drives one GPU: config.gpus is "" (device 0) or that GPU's index here; make_engine_service
  // resolves "all" and lists into one engine per index.
  built.device = gpu_index(config.gpus);
  std::unique_ptr<Backend> backend = make_backend(config.backend, built.device);
  backend->set_batch_invariant(config.batch_invariant);  // before any GEMM picks its algorithm
  built.gpu = backend->device() == Device::CUDA;

  // What the weights will be: a checkpoint's tensors described by their headers (which linears stay 4-bit), or
  // random weights of the config's shapes, made on the device (--load-format dummy).
  ModelDesc desc;
  std::unique_ptr<WeightSource> source;
  if (config.load_format == "dummy") {
    desc = load_model_desc(config.model_dir);
    const ConfigWeights dummy = dummy_weights_for(config, desc, built.gpu);
    desc.w4.kept_packed = dummy.w4;
    source = make_dummy_source(desc, dummy);
  } else {
    LoadOptions load;
    load.keep_w4 = keep_w4_packed(config, built.gpu);
    LoadedModel model = load_model(config.model_dir, load);
    FOVEA_CHECK(!quantization.w4 || model.desc.w4.kept_packed, config.model_dir,
                ": --quantization w4a16 needs a 4-bit checkpoint (AWQ / GPTQ; make one with fovea quantize --method "
                "awq|gptq|rtn), this one is dense");
    desc = model.desc;
    source = make_checkpoint_source(std::move(model.weights), desc.dir);
  }

  // Device memory, planned before anything is uploaded: a model that cannot fit is refused here, saying what would.
  built.plan = plan_engine(config, desc, *source, sizing_target_of(*backend), available_memory(config, *backend));
  FOVEA_CHECK(built.plan.fits, built.plan.refusal);
  built.runner = make_internvl_runner(desc, std::move(source), std::move(backend), built.plan.opts);
  log_device_memory(*built.runner, built.plan.opts, built.plan);
  log_w4(*built.runner);
  return built;
}

Engine::Engine(const EngineConfig& config, std::shared_ptr<ThreadPool> prep_pool) : impl_(std::make_unique<Impl>()) {
  Impl& impl = *impl_;
  impl.config = config;
  impl.pool = std::move(prep_pool);
  BuiltRunner built = build_runner(config);
  const RunnerOptions& opts = built.plan.opts;
  impl.config.max_step_tokens = opts.max_step_tokens;
  impl.config.vision_cache_tiles = opts.vision_pool_tiles - 2 * opts.max_step_tiles;
  impl.runner = std::move(built.runner);
  impl.tokenizer = load_tokenizer(config.model_dir);
  const int device = built.device;
  if (built.gpu) impl.bind_scheduler_thread = [device] { bind_cuda_device(device); };
  impl.start();
}

}  // namespace fovea

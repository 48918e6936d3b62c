#include "engine/engine_plan.h"

#include <algorithm>
#include <cstdlib>

#include "engine/request_prep.h"

namespace fovea {
namespace {

// The CPU reference's step token budget: a step cannot be interrupted, and the CPU spends seconds on a thousand prompt
// tokens, so shorter steps let a cancel (a client that went away) take effect within one (13 official tiles still fit).
constexpr int kCpuMaxStepTokens = 1024;

int cache_tiles_of(const EngineConfig& config, bool gpu) {
  return config.vision_cache_tiles > 0 ? config.vision_cache_tiles : (gpu ? 256 : 32);
}

// KV blocks when the config says 0 and memory allows: a fixed share of memory (40 GB on a GPU; 512 MB and at most 64k
// positions on the CPU reference, which only runs small models and tests), divided by the bytes one position takes over
// all layers; never less than two full steps.
int default_kv_blocks(const ModelDesc& desc, DType compute_dtype, bool gpu, int block_size, int max_step_tokens) {
  const double budget_bytes = gpu ? 40e9 : 512e6;
  const double bytes_per_position =
      double(desc.llm.layers) * desc.llm.kv_heads * desc.llm.head_dim * 2.0 * double(dtype_size(compute_dtype));
  const double most = gpu ? 4.0e6 : 65536.0;
  const double positions = std::max(std::min(budget_bytes / bytes_per_position, most), double(2 * max_step_tokens));
  return int(positions / block_size);
}

int min_kv_blocks(const RunnerOptions& opts) {
  return int((2 * int64_t(opts.max_step_tokens) + opts.block_size - 1) / opts.block_size);
}

// The probe that sized an automatic KV pool counted the allocator's rounding of its own pool's tensors (up to a page
// each), not of the pool chosen: grow the pool into the room that leaves (up to `most` blocks), or shrink it while its
// rounding does not fit (down to the two-step minimum).
void fit_kv_rounding(const ModelDesc& desc, const WeightSource& source, const SizingTarget& target, size_t available,
                     int most, EnginePlan* p) {
  const int least = min_kv_blocks(p->opts);
  auto try_blocks = [&](int blocks) {
    RunnerOptions opts = p->opts;
    opts.kv_blocks = blocks;
    const MemoryPlan m = plan_memory(desc, source, opts, target);
    if (m.total() > available) return false;
    p->opts = opts;
    p->memory = m;
    return true;
  };
  if (p->memory.total() > available) {
    for (int blocks = p->opts.kv_blocks - 1; blocks >= least && !try_blocks(blocks); --blocks) {
    }
    return;
  }
  const size_t room = (available - p->memory.total()) / p->memory.kv_block_bytes;
  int fitted = p->opts.kv_blocks;
  for (int blocks = std::min<int>(most, fitted + int(room)); blocks > fitted; --blocks) {
    if (try_blocks(blocks)) {
      fitted = blocks;
      break;
    }
  }
  // The allocator's pages leave slack in the pool's tensors, so blocks past that byte count may fit too: grow while
  // they do, the step doubling after each fit and halving after each miss (more blocks never take less memory).
  for (int step = 1; fitted < most;) {
    if (try_blocks(std::min(most, fitted + step))) {
      fitted = std::min(most, fitted + step);
      step *= 2;
    } else if (step == 1) {
      break;
    } else {
      step /= 2;
    }
  }
}

// The plan without the refusal's alternatives.
EnginePlan plan_core(const EngineConfig& config, const ModelDesc& desc, const WeightSource& source,
                     const SizingTarget& target, size_t available) {
  const bool gpu = target.device == Device::CUDA;
  EnginePlan p;
  p.opts = engine_runner_options(config, desc, gpu);
  p.available = available;
  if (p.opts.kv_blocks <= 0) {
    const int default_blocks =
        default_kv_blocks(desc, target.compute_dtype, gpu, p.opts.block_size, p.opts.max_step_tokens);
    int blocks = default_blocks;
    if (available > 0) {
      // Probed at the default size: the block-table workspace grows with the pool (up to one sequence's blocks), so
      // what the probe leaves for KV is safe for any smaller pool.
      RunnerOptions probe = p.opts;
      probe.kv_blocks = blocks;
      const MemoryPlan base = plan_memory(desc, source, probe, target);
      const size_t fixed = base.total() - size_t(blocks) * base.kv_block_bytes;  // keeps the graphs' scratch block
      const size_t room = available > fixed ? (available - fixed) / base.kv_block_bytes : 0;
      blocks = int(std::max<size_t>(std::min<size_t>(size_t(blocks), room), size_t(min_kv_blocks(p.opts))));
    }
    p.opts.kv_blocks = blocks;
    p.memory = plan_memory(desc, source, p.opts, target);
    if (available > 0) fit_kv_rounding(desc, source, target, available, default_blocks, &p);
  } else {
    p.memory = plan_memory(desc, source, p.opts, target);
  }
  p.fits = available == 0 || p.memory.total() <= available;
  return p;
}

// "--quantization fp8: 98.20 GiB in all (weights 80.12 GiB)" when `variant` fits, else "".
std::string try_variant(const std::string& label, const EngineConfig& config, const ModelDesc& desc,
                        const WeightSource& source, const SizingTarget& target, size_t available) {
  const EnginePlan p = plan_core(config, desc, source, target, available);
  if (!p.fits) return "";
  return str("\n  - ", label, ": ", format_gib(p.memory.total()), " in all (weights ", format_gib(p.memory.weights),
             ", KV pool ", p.opts.kv_blocks, " blocks)");
}

bool any_w4(const ModelDesc& desc, const WeightSource& source) {
  for (int l = 0; l < desc.llm.layers; ++l)
    if (source.has_w4("llm." + std::to_string(l) + ".gate_up")) return true;
  return false;
}

std::string refusal(const EngineConfig& config, const ModelDesc& desc, const WeightSource& source,
                    const SizingTarget& target, const EnginePlan& p) {
  const size_t available = p.available;
  std::string out = str(desc.dir, " does not fit: it needs ", format_gib(p.memory.total()), " (",
                        describe_plan(p.memory, p.opts.block_size), ") and ", format_gib(available),
                        " are available. What would fit:");
  std::string options;
  const size_t without_kv = p.memory.without_kv();
  const size_t scratch = p.opts.decode_graphs ? p.memory.kv_block_bytes : 0;
  if (without_kv + scratch < available) {
    const size_t blocks = (available - without_kv - scratch) / p.memory.kv_block_bytes;
    if (config.kv_blocks > 0 && blocks > 0)
      options += str("\n  - --kv-blocks ", blocks, " or fewer (", blocks * size_t(p.opts.block_size), " positions)");
  }
  const QuantizationChoice q = parse_quantization(config.quantization);
  const bool w4 = any_w4(desc, source);
  if (!q.fp8_llm && !w4) {
    EngineConfig fp8 = config;
    fp8.quantization = "fp8";
    options += try_variant("FP8 weights (--quantization fp8)", fp8, desc, source, target, available);
  }
  if (!w4) {
    EngineConfig dense = config;
    dense.quantization = "none";
    const std::unique_ptr<WeightSource> four_bit = make_config_source(desc, ConfigWeights{true, 128, 0});
    options += try_variant(
        "4-bit weights (W4A16, group 128: a checkpoint from "
        "fovea quantize --method awq|gptq|rtn, or "
        "--quantization w4a16 with --load-format dummy)",
        dense, desc, *four_bit, target, available);
  }
  // Shorter steps shrink the workspace and the smallest KV pool; fewer cached tiles shrink the image pool.
  EngineConfig lean = config;
  lean.vision_cache_tiles = 16;
  for (int tokens = std::min(p.opts.max_step_tokens, 8192); tokens >= 1024; tokens /= 2) {
    lean.max_step_tokens = tokens;
    const std::string fits = try_variant(str("max_step_tokens ", tokens, " (--max-step-tokens) and ",
                                             "vision_cache_tiles 16 (fewer image tiles cached)"),
                                         lean, desc, source, target, available);
    if (!fits.empty()) {
      options += fits;
      break;
    }
  }
  if (options.empty())
    options = str("\n  - nothing: before any KV block, the weights take ", format_gib(p.memory.weights),
                  ", the workspace ", format_gib(p.memory.workspace), ", the image pool ",
                  format_gib(p.memory.vision_pool), " and the runtime reserve ", format_gib(p.memory.reserve));
  return out + options;
}

}  // namespace

QuantizationChoice parse_quantization(const std::string& name) {
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
  QuantizationChoice q;
  if (name == "none") return q;
  if (name == "w4a16") {
    q.w4 = true;
    return q;
  }
  for (const Choice& c : kChoices)
    if (name == c.name) {
      q.fp8_llm = true;
      // The ViT in FP8 ("fp8-all": qkv and fc1, whose inputs the norms quantize) is an option: 1.35 ms per tile
      // against 1.43 in bf16 on an H100 (session 8), at some fidelity (bench/results/2026-12-07-session8.md).
      q.fp8_vit = c.vit;
      q.fp8_scaling = c.scaling;
      return q;
    }
  FOVEA_FAIL("unknown quantization '", name,
             "' (none, fp8, fp8-tensor, fp8-channel, fp8-block, "
             "fp8-channel-act128, fp8-all, w4a16)");
}

bool keep_w4_packed(const EngineConfig& config, bool gpu) {
  FOVEA_CHECK(config.w4 == "auto" || config.w4 == "packed" || config.w4 == "dequantize", "unknown --w4 '", config.w4,
              "' (auto, packed, dequantize)");
  const QuantizationChoice q = parse_quantization(config.quantization);
  FOVEA_CHECK(!(q.fp8_llm && config.w4 == "packed"), "--w4 packed and --quantization ", config.quantization,
              " exclude each other (FP8 quantizes dense weights; use --w4 dequantize)");
  FOVEA_CHECK(!(q.w4 && config.w4 == "dequantize"), "--w4 dequantize and --quantization w4a16 exclude each other");
  return q.w4 || config.w4 == "packed" || (config.w4 == "auto" && gpu && !q.fp8_llm);
}

ConfigWeights dummy_weights_for(const EngineConfig& config, const ModelDesc& desc, bool gpu) {
  ConfigWeights w;
  const bool keep = keep_w4_packed(config, gpu);
  w.w4 = keep && (desc.quantization.packed() || parse_quantization(config.quantization).w4);
  w.w4_group = desc.quantization.packed() ? desc.quantization.group_size : 128;
  return w;
}

RunnerOptions engine_runner_options(const EngineConfig& config, const ModelDesc& desc, bool gpu) {
  RunnerOptions opts;
  const QuantizationChoice q = parse_quantization(config.quantization);
  opts.fp8_llm = q.fp8_llm;
  opts.fp8_vit = q.fp8_vit;
  opts.fp8_scaling = q.fp8_scaling;
  // The sizes the attention kernels are tested at (tests/backend: decode and prefill over 8- to 64-position blocks).
  FOVEA_CHECK(config.block_size == 8 || config.block_size == 16 || config.block_size == 32 || config.block_size == 64,
              "--block-size must be 8, 16, 32 or 64, got ", config.block_size);
  opts.block_size = config.block_size;
  opts.max_step_tokens = gpu ? config.max_step_tokens : std::min(config.max_step_tokens, kCpuMaxStepTokens);
  opts.max_step_seqs = config.max_batch_seqs;
  // One step's ViT batch: a few official 13-tile images on a GPU; the CPU reference keeps its workspace small.
  opts.max_step_tiles = std::max(desc.max_dynamic_tiles + 1, gpu ? 48 : 16);
  // Room for the cache plus the images being fed (pinned) and those encoded in the next step.
  opts.vision_pool_tiles = cache_tiles_of(config, gpu) + 2 * opts.max_step_tiles;
  opts.kv_blocks = config.kv_blocks;
  opts.max_answer_ids = kMaxAnswers;
  // Rows per MLP slice (bounds the [rows, 2 * ffn] workspace: 0.7 GB at 8192 rows for InternVL2-8B). On the H200
  // 8192-row slices ran the two biggest GEMMs at a larger M for 1.1-1.4% more QPM than 2048 (session 3, two A/B runs);
  // the CPU reference keeps the small workspace.
  opts.mlp_rows = gpu ? 8192 : 2048;
  // Decode steps are launch-bound on a GPU (hundreds of small kernels for a batch of a few tokens); replaying them as
  // graphs removes that cost. The CPU backend has no recordings, so the option would only add the scratch KV block
  // there.
  opts.decode_graphs = gpu && config.cuda_graphs;
  // Off unless asked: padding to a bucket costs up to 7 tiles of work per batch; only a GPU run tells whether the
  // launches saved pay for it.
  opts.vit_graphs = gpu && config.cuda_graphs && config.vit_graphs;
  return opts;
}

EnginePlan plan_engine(const EngineConfig& config, const ModelDesc& desc, const WeightSource& source,
                       const SizingTarget& target, size_t available) {
  EnginePlan p = plan_core(config, desc, source, target, available);
  if (!p.fits) p.refusal = refusal(config, desc, source, target, p);
  return p;
}

std::string describe_plan(const MemoryPlan& plan, int block_size) {
  return str("weights ", format_gib(plan.weights), ", KV pool ", format_gib(plan.kv_cache), " (", plan.kv_blocks,
             " blocks x ", block_size, " tokens), image pool ", format_gib(plan.vision_pool), ", workspace ",
             format_gib(plan.workspace), ", runtime reserve ", format_gib(plan.reserve));
}

}  // namespace fovea

// The memory planner (runtime/memory_plan.h, engine/engine_plan.h): its figures for InternVL2-8B's shapes against sums
// worked out by hand from the model's definition and the runner's documented buffers, its agreement with what a real
// runner allocates, and the refusal of what cannot fit, with what would.
#include <gtest/gtest.h>

#include <filesystem>

#include "backend/backend.h"
#include "engine/engine_plan.h"
#include "model/demo_model.h"
#include "runtime/internvl_runner.h"
#include "support/temp_dir.h"

namespace fovea {
namespace {

constexpr size_t kGiB = size_t(1) << 30;

// InternVL2-8B: InternViT-300M (24 layers of width 1024, MLP 4096) + InternLM2-7B (32 layers of width 4096, 32 heads of
// 128, 8 KV heads, FFN 14336, vocabulary 92,553, untied head).
ModelDesc internvl2_8b() {
  ModelDesc d;
  d.vision = VisionConfig{};  // the defaults are InternViT-300M's
  d.llm = LlmConfig{};        // and InternLM2-7B's
  d.max_dynamic_tiles = 12;
  d.dir = "InternVL2-8B";
  return d;
}

// The runner options an engine uses on a GPU, with a fixed pool of 1,000 KV blocks.
RunnerOptions gpu_options(const ModelDesc& desc) {
  RunnerOptions opts = engine_runner_options(EngineConfig{}, desc, /*gpu=*/true);
  opts.kv_blocks = 1000;
  return opts;
}

MemoryPlan plan(const ModelDesc& desc, const RunnerOptions& opts, bool w4 = false) {
  const auto source = make_config_source(desc, ConfigWeights{w4, 128, 0});
  return plan_memory(desc, *source, opts, cuda_sizing_target());
}

// Parameters of InternVL2-8B, from the definition: C = 1024, M = 4096 (ViT); H = 4096, F = 14336, V = 92553.
constexpr int64_t C = 1024, M = 4096, H = 4096, F = 14336, V = 92553, QKV = (32 + 2 * 8) * 128;
constexpr int64_t kVitLayer = 4 * C /* norm1, norm2 */ + 3 * C * C + 3 * C /* qkv */ + C * C + C /* proj */ +
                              2 * C /* ls1, ls2 */ + M * C + M /* fc1 */ + C * M + C /* fc2 */;
constexpr int64_t kVitEmbed = C * 588 + C /* patch 3x14x14 */ + C /* cls */ + 1025 * C /* positions */;
constexpr int64_t kProjector = 2 * 4 * C + H * 4 * C + H + H * H + H;
constexpr int64_t kProjections = QKV * H + H * H + 2 * F * H + H * F;  // qkv, o, gate_up, down: per layer
constexpr int64_t kLlmLayer = 2 * H /* norms */ + kProjections;
constexpr int64_t kParams = 24 * kVitLayer + kVitEmbed + kProjector + 2 * V * H + 32 * kLlmLayer + H;
static_assert(kParams == 8'075'365'376, "InternVL2-8B has 8.08 B parameters");

TEST(MemoryPlan, InternVL2_8BWeightsByHand) {
  const ModelDesc desc = internvl2_8b();
  RunnerOptions opts = gpu_options(desc);
  EXPECT_EQ(plan(desc, opts).weights,
            size_t(2 * kParams));  // bf16: 16,150,730,752 bytes (15.04 GiB)

  // FP8: the LLM projections as one byte per weight plus a float scale per output channel; the rest bf16.
  opts.fp8_llm = true;
  const int64_t dense = kParams - 32 * kProjections;
  const int64_t scales = 32 * (QKV + H + 2 * F + H) * 4;
  EXPECT_EQ(plan(desc, opts).weights, size_t(2 * dense + 32 * kProjections + scales));
  EXPECT_EQ(plan(desc, opts).weights, size_t(9'176'913'920));

  // 4-bit, group 128: half a byte per weight plus one 4-byte scale/zero word per 128 weights.
  opts.fp8_llm = false;
  const MemoryPlan w4 = plan(desc, opts, /*w4=*/true);
  EXPECT_EQ(w4.weights, size_t(2 * dense + 32 * (kProjections / 2 + kProjections / 128 * 4)));
  EXPECT_EQ(w4.weights, size_t(5'899'851'776));
  // linear_w4's one shared workspace: a bf16 copy of the largest linear (gate_up) on the planning target.
  EXPECT_EQ(w4.workspace - plan(desc, opts).workspace, size_t(2 * F * H * 2));
}

TEST(MemoryPlan, InternVL2_8BPoolsAndWorkspaceByHand) {
  const ModelDesc desc = internvl2_8b();
  const RunnerOptions opts = gpu_options(desc);
  ASSERT_EQ(opts.max_step_tokens, 16384);
  ASSERT_EQ(opts.max_step_tiles, 48);
  ASSERT_EQ(opts.vision_pool_tiles, 256 + 2 * 48);
  ASSERT_EQ(opts.mlp_rows, 8192);
  const MemoryPlan p = plan(desc, opts);
  // One block: K and V of 16 positions x 8 KV heads x 128 in bf16 over 32 layers = 2 MiB; decode graphs add one scratch
  // block to the 1,000.
  EXPECT_EQ(p.kv_block_bytes, size_t(2 * 32 * 16 * 8 * 128 * 2));
  EXPECT_EQ(p.kv_cache, size_t(1001) * (size_t(2) << 20));
  // Image pool: 352 tiles of 256 rows of width H in bf16.
  EXPECT_EQ(p.vision_pool, size_t(352) * 256 * H * 2);
  // LLM workspace at T = 16384 tokens, S = 256 sequences, MLP slices of 8192 rows, 64 sampled rows at a time:
  constexpr int64_t T = 16384, S = 256;
  const int64_t table = S * 1000;  // a flat block table: S sequences x min(pool, 32768 / 16) blocks
  const int64_t llm_i32 = 3 * T /* ids, positions, slots */ + (S + 1) + S + table + S + S * 64 /* answers */ +
                          (S + 1) + S + table /* the sampled rows' attention batch */;
  const int64_t llm_bf16 = 3 * T * H /* x, normed, branch */ + T * QKV + T * H /* attention out */ + 8192 * 2 * F +
                           8192 * F /* gate_up, silu */ + 3 * S * H + S * QKV /* sampled rows */ + 64 * V;
  const int64_t llm = llm_i32 * 4 + llm_bf16 * 2 + 64 * 4 /* argmax */ + 64 * 64 * 4 /* answer log-probs */;
  // ViT workspace for 48 tiles of 1,025 tokens (256 after the pixel shuffle):
  constexpr int64_t tiles = 48, rows = tiles * 1025, shuffled = tiles * 256;
  const int64_t vit =
      tiles * 448 * 448 * 3 /* RGB bytes */ + tiles * 3 * 448 * 448 * 4 /* normalised */ +
      2 * (tiles * 1024 * 588 + 3 * rows * C /* x, normed, attention out */ + rows * 3 * C + rows * M + 2 * shuffled * 4 * C + 2 * shuffled * H);
  EXPECT_EQ(p.workspace, size_t(llm + vit));
  EXPECT_EQ(p.workspace, size_t(3'079'035'272));
  EXPECT_EQ(p.reserve,
            size_t(96 + 512) << 20);  // cuBLASLt + split-KV partials + slack; no FP8 buffer
}

// cudaMalloc takes whole 2 MiB pages above 1 MiB (backend/cuda_allocation.h, measured on an H100): the plan counts
// them. Each layer's K and V are one tensor of (blocks + 1) x 16 positions x 8 heads x 128 in bf16 = (blocks + 1) x
// 32 KiB; at 3,001 and 3,002 blocks both fill 47 pages (98,566,144 bytes), so one more block leaves 32 KiB less
// rounding in each of the 64 tensors, and everything else (block table capped at 2,048 blocks a sequence) is the same.
TEST(MemoryPlan, CountsCudaMallocPages) {
  const ModelDesc desc = internvl2_8b();
  RunnerOptions opts = gpu_options(desc);
  opts.kv_blocks = 3000;
  const MemoryPlan a = plan(desc, opts);
  opts.kv_blocks = 3001;
  const MemoryPlan b = plan(desc, opts);
  EXPECT_EQ(a.kv_cache, size_t(3001) * 32 * 65536);
  EXPECT_EQ(a.workspace, b.workspace);
  EXPECT_EQ(a.rounding - b.rounding, size_t(64) * 32768);
  EXPECT_EQ(b.total() - a.total(), a.kv_block_bytes - size_t(64) * 32768);
  // Every tensor rounds up, by less than a page each.
  EXPECT_GT(a.rounding, size_t(64) * (98566144 - 98336768));
  EXPECT_EQ(a.total(), a.weights + a.kv_cache + a.vision_pool + a.workspace + a.reserve + a.rounding);
}

// The plan equals what a real runner allocates (CPU backend: float32), for the golden checkpoints and a kept-packed
// 4-bit one, dense and FP8.
TEST(MemoryPlan, EqualsWhatTheRunnerAllocates) {
  const test::TempDir w4_dir("plan_awq"), demo_dir("plan_demo");
  write_demo_model(w4_dir.string(), 3, WeightQuantMethod::Awq);
  write_demo_model(demo_dir.string(), 3);
  const std::string golden = std::string(FOVEA_SOURCE_DIR) + "/tests/data/golden/";
  struct Case {
    std::string dir;
    bool keep_w4, fp8;
  };
  const std::vector<Case> cases = {{golden + "internlm2/original", false, false},
                                   {golden + "qwen2/hf", false, false},
                                   {demo_dir.string(), false, true},
                                   {w4_dir.string(), true, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dir);
    LoadOptions load;
    load.keep_w4 = c.keep_w4;
    LoadedModel model = load_model(c.dir, load);
    const ModelDesc desc = model.desc;
    RunnerOptions opts;
    opts.kv_blocks = 37;
    opts.max_step_tokens = 300;
    opts.fp8_llm = c.fp8;
    std::unique_ptr<Backend> cpu = make_cpu_backend();
    const SizingTarget target = sizing_target_of(*cpu);
    auto source = make_checkpoint_source(std::move(model.weights), desc.dir);
    const MemoryPlan p = plan_memory(desc, *source, opts, target);
    const InternVLRunner runner(desc, std::move(source), std::move(cpu), opts);
    const RunnerMemory& m = runner.memory();
    EXPECT_EQ(p.weights, m.weights);
    EXPECT_EQ(p.kv_cache, m.kv_cache);
    EXPECT_EQ(p.vision_pool, m.vision_pool);
    EXPECT_EQ(p.workspace, m.workspace);
    EXPECT_EQ(p.reserve, 0u);
    EXPECT_EQ(p.rounding, 0u);
    if (c.keep_w4) {
      EXPECT_GT(m.w4_linears, 0);
    }
  }
}

TEST(EnginePlan, SizesTheKvPoolToTheRoomLeft) {
  const ModelDesc desc = internvl2_8b();
  const auto source = make_config_source(desc, ConfigWeights{});
  // Enough memory: the default 40 GB of positions.
  EnginePlan p = plan_engine(EngineConfig{}, desc, *source, cuda_sizing_target(), 140 * kGiB);
  EXPECT_TRUE(p.fits);
  EXPECT_EQ(p.opts.kv_blocks, int(40e9 / (32 * 8 * 128 * 2 * 2)) / 16);
  // 30 GiB: the pool takes what the rest leaves, up to the last whole block.
  p = plan_engine(EngineConfig{}, desc, *source, cuda_sizing_target(), 30 * kGiB);
  EXPECT_TRUE(p.fits) << p.refusal;
  EXPECT_LT(p.opts.kv_blocks, 19073);
  EXPECT_LE(p.memory.total(), 30 * kGiB);
  // One block more does not fit (cudaMalloc's 2 MiB pages make the pool grow in steps of 64 blocks here: each of the 64
  // K / V tensors takes 32 KiB a block).
  RunnerOptions more = p.opts;
  more.kv_blocks += 1;
  EXPECT_GT(plan_memory(desc, *source, more, cuda_sizing_target()).total(), 30 * kGiB);
  EXPECT_GT(p.memory.total() + 64 * p.memory.kv_block_bytes, 30 * kGiB);
  // No memory figure (the CPU backend): no limit, never refused.
  p = plan_engine(EngineConfig{}, desc, *source, cuda_sizing_target(), 0);
  EXPECT_TRUE(p.fits);
}

TEST(EnginePlan, RefusesWhatCannotFitAndSaysWhatWould) {
  const ModelDesc desc = internvl2_8b();
  const auto source = make_config_source(desc, ConfigWeights{});
  // 20 GiB: bf16 weights (15.04 GiB) leave less than the smallest KV pool (two steps of 16,384 tokens = 4 GiB) beside
  // the workspace; FP8 and 4-bit weights fit.
  EnginePlan p = plan_engine(EngineConfig{}, desc, *source, cuda_sizing_target(), 20 * kGiB);
  ASSERT_FALSE(p.fits);
  EXPECT_EQ(p.opts.kv_blocks, 2048);
  for (const char* part : {"InternVL2-8B does not fit", "weights 15.04 GiB", "20.00 GiB are available",
                           "--quantization fp8", "4-bit weights"})
    EXPECT_NE(p.refusal.find(part), std::string::npos) << part << " not in: " << p.refusal;
  // 14.5 GiB: only 4-bit weights fit (14.13 GiB with the smallest pool, 0.17 GiB of it cudaMalloc's page rounding).
  p = plan_engine(EngineConfig{}, desc, *source, cuda_sizing_target(), 29 * kGiB / 2);
  ASSERT_FALSE(p.fits);
  EXPECT_EQ(p.refusal.find("--quantization fp8"), std::string::npos) << p.refusal;
  EXPECT_NE(p.refusal.find("4-bit weights"), std::string::npos) << p.refusal;
  // An explicit pool that is too large: the largest one that fits is named.
  EngineConfig big;
  big.kv_blocks = 60000;
  p = plan_engine(big, desc, *source, cuda_sizing_target(), 60 * kGiB);
  ASSERT_FALSE(p.fits);
  EXPECT_NE(p.refusal.find("--kv-blocks "), std::string::npos) << p.refusal;
  // 4 GiB: nothing fits, and the message says why.
  p = plan_engine(EngineConfig{}, desc, *source, cuda_sizing_target(), 4 * kGiB);
  ASSERT_FALSE(p.fits);
  EXPECT_NE(p.refusal.find("nothing: before any KV block, the weights take 15.04 GiB"), std::string::npos)
      << p.refusal;
}

}  // namespace
}  // namespace fovea

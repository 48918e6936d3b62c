// Host-side pieces of the runtime (vision pool, step planning, vision refs) and InternVLRunner's behaviour on
// the demo checkpoint: full-size 448px tiles, bf16 weights, memory report, errors that leave it usable.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "backend/backend.h"
#include "image/normalize_kernels.h"
#include "recording_backend.h"
#include "model/demo_model.h"
#include "runtime/internvl_runner.h"
#include "runtime/simple_generate.h"
#include "runtime/step_plan.h"
#include "runtime/vision_pool.h"
#include "runtime/weights.h"
#include "support/temp_dir.h"

namespace fovea {
namespace {

TEST(VisionPool, AcquireReleaseReusesAnyFreeSlots) {
  auto be = make_cpu_backend();
  VisionPool pool(*be, 5, 4, 3);
  EXPECT_EQ(pool.bytes(), size_t(5 * 4 * 3 * 4));
  const int64_t a = pool.acquire(2), b = pool.acquire(2);
  EXPECT_EQ(pool.free_tiles(), 1);
  EXPECT_THROW(pool.acquire(2), Error);
  pool.release(a);
  const int64_t c = pool.acquire(3);  // slots 0, 1 (freed) and 4: not adjacent
  EXPECT_EQ(pool.slots(c), (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(pool.slots(b), (std::vector<int>{2, 3}));
  EXPECT_THROW(pool.release(a), Error);
  EXPECT_THROW(pool.slots(12345), Error);
  EXPECT_EQ(pool.slot_rows(4).shape, (Shape{4, 3}));
}

class StepPlanTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();
  VisionPool pool{*be, 4, 4, 2};  // 4 rows per tile
  StepLimits limits{/*max_tokens=*/32, /*max_seqs=*/4,   /*max_table_entries=*/16, /*vocab=*/100,
                    /*block_size=*/4,  /*kv_blocks=*/10, /*max_answer_ids=*/2};

  static SeqChunk chunk(std::vector<int32_t> tokens, int start, std::vector<int32_t> table) {
    SeqChunk c;
    c.tokens = std::move(tokens);
    c.start_pos = start;
    c.block_table = std::move(table);
    return c;
  }
};

TEST_F(StepPlanTest, FlattensChunksAndSplitsImagesAtSlots) {
  const int64_t image = pool.acquire(2);     // slots 0, 1: rows 0-3 in slot 0, 4-7 in slot 1
  SeqChunk a = chunk({1, 2, 3}, 5, {7, 3});  // positions 5..7 -> block 3 rows 1..3
  a.sample = true;
  a.answer_ids = {4, 5};
  SeqChunk b = chunk({9, 9, 9, 9, 9, 4}, 0, {2, 8});
  b.vision.push_back(VisionRef{image, 2, 4, 1});  // image rows 2..5 at chunk rows 1..4
  const StepPlan plan = plan_step({a, b}, limits, pool);
  EXPECT_EQ(plan.tokens, 9);
  EXPECT_EQ(plan.ids, (std::vector<int32_t>{1, 2, 3, 9, 9, 9, 9, 9, 4}));
  EXPECT_EQ(plan.positions, (std::vector<int32_t>{5, 6, 7, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(plan.slots, (std::vector<int32_t>{13, 14, 15, 8, 9, 10, 11, 32, 33}));
  EXPECT_EQ(plan.cu_q, (std::vector<int32_t>{0, 3, 9}));
  EXPECT_EQ(plan.ctx_len, (std::vector<int32_t>{8, 6}));
  EXPECT_EQ(plan.table_width, 2);
  EXPECT_EQ(plan.block_table, (std::vector<int32_t>{7, 3, 2, 8}));
  EXPECT_EQ(plan.max_q_len, 6);
  EXPECT_EQ(plan.max_ctx_len, 8);
  EXPECT_EQ(plan.sample_rows, (std::vector<int32_t>{2}));
  EXPECT_EQ(plan.sample_chunks, (std::vector<int>{0}));
  EXPECT_EQ(plan.answer_width, 2);
  EXPECT_EQ(plan.answer_ids, (std::vector<int32_t>{4, 5}));
  ASSERT_EQ(plan.vision.size(), 2u);
  EXPECT_EQ(plan.vision[0].slot, 0);
  EXPECT_EQ(plan.vision[0].slot_row, 2);
  EXPECT_EQ(plan.vision[0].rows, 2);
  EXPECT_EQ(plan.vision[0].dst_row, 4);
  EXPECT_EQ(plan.vision[1].slot, 1);
  EXPECT_EQ(plan.vision[1].slot_row, 0);
  EXPECT_EQ(plan.vision[1].rows, 2);
  EXPECT_EQ(plan.vision[1].dst_row, 6);
}

// The last decoder layer's batch: only the sampled chunks, one query row each (the chunk's last token) over the
// chunk's whole context, with its block-table row as padded to the step's width.
TEST_F(StepPlanTest, SampledRowsGetTheirOwnAttentionBatch) {
  SeqChunk a = chunk({1, 2, 3}, 5, {7, 3});  // context 8
  a.sample = true;
  SeqChunk b = chunk({4, 4, 4, 4}, 0, {2, 8, 9});  // not sampled: its rows stop at the last layer's KV write
  SeqChunk c = chunk({5}, 8, {4, 6, 1});  // context 9 in 3 blocks of 4
  c.sample = true;
  const StepPlan plan = plan_step({a, b, c}, limits, pool);
  EXPECT_EQ(plan.sample_rows, (std::vector<int32_t>{2, 7}));
  EXPECT_EQ(plan.sampled_ctx_len, (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(plan.sampled_max_ctx_len, 9);
  EXPECT_EQ(plan.table_width, 3);
  EXPECT_EQ(plan.sampled_block_table, (std::vector<int32_t>{7, 3, 0, 4, 6, 1}));
  // No sampled chunk: an empty batch (0 sequences).
  const StepPlan none = plan_step({b}, limits, pool);
  EXPECT_TRUE(none.sampled_ctx_len.empty() && none.sampled_block_table.empty());
}

TEST_F(StepPlanTest, RejectsBadChunks) {
  const int64_t image = pool.acquire(1);
  auto fails = [&](SeqChunk c) { EXPECT_THROW(plan_step({c}, limits, pool), Error); };
  fails(chunk({}, 0, {0}));      // no tokens
  fails(chunk({1, 2}, 3, {0}));  // positions 3..4 need 2 blocks
  fails(chunk({1}, 0, {10}));    // block outside the pool
  fails(chunk({100}, 0, {0}));   // id outside the vocabulary
  fails(chunk({-1}, 0, {0}));
  fails(chunk(std::vector<int32_t>(33, 1), 0, std::vector<int32_t>(9, 0)));  // more than max_tokens
  SeqChunk bad_image = chunk({1, 2}, 0, {0});
  bad_image.vision.push_back(VisionRef{image + 1, 0, 1, 0});
  fails(bad_image);
  bad_image.vision[0] = VisionRef{image, 3, 2, 0};  // rows 3..4 of a 4-row image
  fails(bad_image);
  bad_image.vision[0] = VisionRef{image, 0, 2, 1};  // chunk rows 1..2 of 2
  fails(bad_image);
  SeqChunk bad_answer = chunk({1}, 0, {0});
  bad_answer.sample = true;
  bad_answer.answer_ids = {100};
  fails(bad_answer);
  bad_answer.answer_ids = {1, 2, 3};  // more than max_answer_ids
  fails(bad_answer);
  EXPECT_THROW(plan_step(std::vector<SeqChunk>(5, chunk({1}, 0, {0})), limits, pool), Error);  // > max_seqs
  EXPECT_NO_THROW(plan_step({chunk({1, 2, 3, 4}, 0, {0}), chunk({5}, 4, {0, 1})}, limits, pool));
}

TEST(VisionRefs, MergeConsecutiveRowsOfOneImage) {
  // Positions 0..7: text, image 0 rows 0-2, image 1 rows 0-1, text, text.
  const std::vector<std::pair<int, int>> rows{{-1, -1}, {0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {-1, -1}, {-1, -1}};
  const std::vector<int64_t> handles{11, 22};
  auto refs = vision_refs_for_range(rows, handles, 2, 7);
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[0].handle, 11);
  EXPECT_EQ(refs[0].row_begin, 1);
  EXPECT_EQ(refs[0].rows, 2);
  EXPECT_EQ(refs[0].chunk_offset, 0);
  EXPECT_EQ(refs[1].handle, 22);
  EXPECT_EQ(refs[1].row_begin, 0);
  EXPECT_EQ(refs[1].rows, 2);
  EXPECT_EQ(refs[1].chunk_offset, 2);
}

class DemoRunner : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<test::TempDir>("runtime_demo");
    write_demo_model(dir_->string());
  }
  static void TearDownTestSuite() { dir_.reset(); }

  // recorded: ViT batches and decode steps replayed from recordings (vit_graphs, decode_graphs) through the test's
  // recording backend.
  // fp8 / fp8_vit: the LLM's projections / the ViT layers' linears in FP8 W8A8 with `scaling`'s scales.
  std::unique_ptr<InternVLRunner> make_runner(bool recorded = false, bool fp8 = false, bool fp8_vit = false,
                                              Fp8Scaling scaling = Fp8Scaling::Tensor) {
    RunnerOptions opts;
    opts.fp8_llm = fp8;
    opts.fp8_vit = fp8_vit;
    opts.fp8_scaling = scaling;
    opts.kv_blocks = 256;
    opts.max_step_tokens = 3600;
    opts.max_step_tiles = 5;
    opts.vision_pool_tiles = 13;
    opts.vit_graphs = recorded;
    opts.decode_graphs = recorded;
    std::unique_ptr<Backend> backend = make_backend("cpu");
    if (recorded) backend = std::make_unique<test::RecordingBackend>(std::move(backend));
    return std::make_unique<InternVLRunner>(load_model(dir_->string()), std::move(backend), opts);
  }

  // Exactly `tokens` new tokens (no stop id ends them early), with each one's logits.
  static SimpleGenerateOptions logits_of(int tokens) {
    SimpleGenerateOptions opts;
    opts.max_new_tokens = tokens;
    opts.stop_ids = {-1};
    opts.want_logits = true;
    return opts;
  }
  // A prompt of text around one image of `tiles` tiles, and random normalised pixels for it.
  static std::vector<int32_t> prompt_for(const ModelDesc& desc, int tiles) {
    std::vector<int32_t> prompt{desc.bos_id, 5, 6, desc.img_start_id};
    prompt.insert(prompt.end(), size_t(tiles) * desc.vision.tokens_per_tile(), desc.image_token_id);
    prompt.insert(prompt.end(), {desc.img_end_id, 7, 8, 9});
    return prompt;
  }
  static Tensor random_pixels(int tiles, int size, uint32_t seed) {
    Tensor px = Tensor::host(DType::F32, {tiles, 3, size, size});
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    for (int64_t i = 0; i < px.numel(); ++i) px.ptr<float>()[i] = dist(rng);
    return px;
  }

  // Random RGB bytes [tiles, S, S, 3] and the host pipeline's normalisation of them [tiles, 3, S, S].
  static Tensor random_bytes(int tiles, int size, uint32_t seed) {
    Tensor rgb = Tensor::host(DType::U8, {tiles, size, size, 3});
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> byte(0, 255);
    for (int64_t i = 0; i < rgb.numel(); ++i) rgb.ptr<uint8_t>()[i] = uint8_t(byte(rng));
    return rgb;
  }
  static Tensor normalized_on_host(const Tensor& rgb) {
    const int64_t tiles = rgb.dim(0), size = rgb.dim(1), plane = size * size;
    Tensor out = Tensor::host(DType::F32, {tiles, 3, size, size});
    for (int64_t t = 0; t < tiles; ++t) {
      float* r = out.ptr<float>() + t * 3 * plane;
      normalize_kernels::normalize_pixels_generic(rgb.ptr<uint8_t>() + t * plane * 3, size_t(plane),
                                                  normalize_kernels::kImageNet, r, r + plane, r + 2 * plane);
    }
    return out;
  }
  // The embeddings of the images, encoded in one call and released again.
  static std::vector<Tensor> embeddings(InternVLRunner& runner, const std::vector<Tensor>& images) {
    std::vector<Tensor> out;
    for (int64_t handle : runner.encode_images(images)) {
      out.push_back(runner.image_embedding(handle));
      runner.release_image(handle);
    }
    return out;
  }
  static bool bitwise_equal(const Tensor& a, const Tensor& b) {
    return a.shape == b.shape && a.dtype == b.dtype && std::memcmp(a.data, b.data, a.nbytes()) == 0;
  }

  static std::unique_ptr<test::TempDir> dir_;  // one demo model for the whole suite
};
std::unique_ptr<test::TempDir> DemoRunner::dir_;

TEST_F(DemoRunner, ThirteenTilesGenerateDeterministically) {
  auto runner = make_runner();
  const ModelDesc& desc = runner->desc();
  const RunnerMemory& mem = runner->memory();
  EXPECT_GT(mem.weights, 0u);
  EXPECT_EQ(mem.kv_cache, 256 * kv_block_bytes(desc, DType::F32, runner->block_size()));
  EXPECT_GT(mem.workspace, 0u);
  EXPECT_EQ(mem.vision_pool, size_t(13) * desc.vision.tokens_per_tile() * desc.llm.hidden * sizeof(float));
  EXPECT_EQ(runner->backend().memory_in_use(), mem.total());
  const std::vector<int32_t> prompt = prompt_for(desc, 13);
  const std::vector<Tensor> images{random_pixels(13, desc.vision.image_size, 1)};
  SimpleGenerateOptions opts;
  opts.max_new_tokens = 4;
  opts.stop_ids = {-1};
  const SimpleGenerateResult first = simple_generate(*runner, prompt, images, opts);
  ASSERT_EQ(first.tokens.size(), 4u);
  for (int32_t t : first.tokens) EXPECT_TRUE(t >= 0 && t < desc.llm.vocab);
  opts.prefill_splits = {100, 1800};
  EXPECT_EQ(simple_generate(*runner, prompt, images, opts).tokens, first.tokens);
  // The image matters: other pixels give other logits.
  opts.want_logits = true;
  opts.max_new_tokens = 1;
  const auto a = simple_generate(*runner, prompt, images, opts);
  const auto b = simple_generate(*runner, prompt, {random_pixels(13, desc.vision.image_size, 2)}, opts);
  EXPECT_NE(a.logits[0], b.logits[0]);
  EXPECT_EQ(runner->backend().memory_in_use(), mem.total());  // nothing allocated by encode/step
}

// A prompt prefilled in one step runs its last layer on the sampled row alone (LlmForward::last_layer_sampled);
// split so that its last token is a step of its own, every layer runs on every row. The first chunk of the split
// samples nothing, so its last layer only writes K and V, which the following steps read. Both give the same
// logits, bit for bit, for the prompt and the decode steps after it (the CPU reference computes each row alike
// whatever the other rows), in float and with the FP8 projections.
TEST_F(DemoRunner, LastLayerOnTheSampledRowsAloneGivesTheFullLayersLogits) {
  for (bool fp8 : {false, true}) {
    SCOPED_TRACE(fp8 ? "fp8" : "float");
    // A fresh runner each (simple_generate reuses KV blocks from 0: K and V left by an earlier run would hide one
    // that a step failed to write).
    auto run = [&](std::vector<int> splits) {
      auto runner = make_runner(false, fp8, false, Fp8Scaling::Channel);
      const ModelDesc& desc = runner->desc();
      SimpleGenerateOptions opts = logits_of(/*tokens=*/3);
      opts.prefill_splits = std::move(splits);
      return simple_generate(*runner, prompt_for(desc, 2), {random_pixels(2, desc.vision.image_size, 9)}, opts);
    };
    const int last = int(prompt_for(make_runner()->desc(), 2).size()) - 1;
    const auto whole = run({}), split = run({last});
    const auto three = run({100, last});  // a middle chunk that samples nothing
    ASSERT_EQ(whole.logits.size(), 3u);
    EXPECT_EQ(whole.tokens, split.tokens);
    EXPECT_EQ(whole.logits, split.logits);
    EXPECT_EQ(whole.logits, three.logits);
  }
}

// Calibration (fovea quantize) observes every LLM projection's input and needs all of a prompt's rows at every
// layer: with an observer set, the last layer runs on every row too.
TEST_F(DemoRunner, ObservedProjectionsSeeEveryRowOfTheLastLayer) {
  auto runner = make_runner();
  const ModelDesc& desc = runner->desc();
  std::vector<int64_t> rows;  // of each observed projection call: qkv, o, gate_up, down per layer
  set_linear_input_observer(
      [](void* context, const Tensor&, const Tensor& input) {
        static_cast<std::vector<int64_t>*>(context)->push_back(input.dim(0));
      },
      &rows);
  const std::vector<int32_t> prompt = prompt_for(desc, 1);
  const Tensor pixels = random_pixels(1, desc.vision.image_size, 4);
  const auto observed = simple_generate(*runner, prompt, {pixels}, logits_of(1));
  set_linear_input_observer(nullptr, nullptr);
  EXPECT_EQ(rows, std::vector<int64_t>(size_t(4 * desc.llm.layers), int64_t(prompt.size())));
  // And the logits are those of the run without an observer (which takes the sampled row alone).
  EXPECT_EQ(observed.logits, simple_generate(*runner, prompt, {pixels}, logits_of(1)).logits);
}

// ||b - a|| / ||a|| over one logits row; NaN when b holds a non-finite value (fails any bound).
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(b[i])) return std::nan("");
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += a[i] * a[i];
  }
  return std::sqrt(diff / norm);
}

// FP8 W8A8 LLM projections (the CPU reference of linear_fp8_scaled on the demo model), each scaling recipe: the
// projections' weights take a quarter of their float32 bytes plus the recipe's scales, and the prompt's logits
// stay close to the unquantized run's (E4M3 keeps 3 mantissa bits: a few percent of relative error, not more).
TEST_F(DemoRunner, Fp8ProjectionsStayCloseToTheUnquantizedForward) {
  auto plain = make_runner();
  const ModelDesc& desc = plain->desc();
  const LlmConfig& c = desc.llm;
  const int64_t h = c.hidden, qkv = int64_t(c.heads + 2 * c.kv_heads) * c.head_dim, o = int64_t(c.heads) * c.head_dim;
  const std::vector<int32_t> prompt = prompt_for(desc, 2);
  const std::vector<Tensor> images{random_pixels(2, desc.vision.image_size, 3)};
  const SimpleGenerateOptions opts = logits_of(/*tokens=*/1);
  const auto a = simple_generate(*plain, prompt, images, opts);
  ASSERT_EQ(a.logits.size(), 1u);
  for (Fp8Scaling scaling : {Fp8Scaling::Tensor, Fp8Scaling::Channel, Fp8Scaling::Block}) {
    SCOPED_TRACE(fp8_scaling_name(scaling));
    auto fp8 = make_runner(false, true, false, scaling);
    size_t projections = 0, scales = 0;
    const int64_t f = c.ffn;
    for (auto [n, k] : {std::pair{qkv, h}, std::pair{h, o}, std::pair{2 * f, h}, std::pair{h, f}}) {
      projections += size_t(n * k);
      size_t count = 1;
      for (int64_t d : fp8_weight_scale_shape(scaling, n, k)) count *= size_t(d);
      scales += count;
    }
    // float32 (the CPU's weight dtype) against one byte per element plus the recipe's float scales.
    EXPECT_EQ(plain->memory().weights - fp8->memory().weights,
              size_t(c.layers) * (projections * 3 - scales * sizeof(float)));
    const auto b = simple_generate(*fp8, prompt, images, opts);
    ASSERT_EQ(b.logits.size(), 1u);
    const double rel = relative_error(a.logits[0], b.logits[0]);
    EXPECT_GT(rel, 0.0);   // the quantization is really on
    EXPECT_LT(rel, 0.08);  // and only perturbs the logits
  }
}

// The default FP8 recipe (per channel x per token), whose norms and SwiGLU hand their linears an input already
// quantized (Fp8Rows), through decode recordings: every decode step replayed from a recording gives the eager
// run's tokens and logits exactly.
TEST_F(DemoRunner, Fp8PerTokenDecodeRecordingsEqualTheEagerRun) {
  auto eager = make_runner(false, true, false, Fp8Scaling::Channel);
  auto recorded = make_runner(true, true, false, Fp8Scaling::Channel);
  const ModelDesc& desc = eager->desc();
  const std::vector<int32_t> prompt = prompt_for(desc, 2);
  const std::vector<Tensor> images{random_pixels(2, desc.vision.image_size, 5)};
  const SimpleGenerateOptions opts = logits_of(/*tokens=*/6);
  const auto a = simple_generate(*eager, prompt, images, opts), b = simple_generate(*recorded, prompt, images, opts);
  ASSERT_EQ(a.tokens.size(), 6u);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_GT(recorded->decode_recordings(), 0);
}

// FP8 W8A8 ViT linears (qkv, fc1 with GELU; proj and fc2 stay dense): their weights take a quarter of their
// float32 bytes, the image embeddings change (the quantization is on) and the prompt's logits stay close to the
// unquantized run's. Per tensor, each linear quantizes its own input; per channel, the norms before them write it
// quantized (scale_add_norm_fp8). Also through ViT recordings: the eager run before each recording makes the FP8
// plans outside it.
TEST_F(DemoRunner, Fp8VitLinearsStayCloseToTheUnquantizedForward) {
  auto plain = make_runner();
  const ModelDesc& desc = plain->desc();
  const VisionConfig& v = desc.vision;
  const size_t layers = size_t(v.layers), out_features = size_t(3 * v.hidden + v.mlp);  // qkv's and fc1's
  const size_t linears = layers * size_t(v.hidden) * out_features;
  const std::vector<int32_t> prompt = prompt_for(desc, 2);
  const std::vector<Tensor> images{random_pixels(2, v.image_size, 4)};
  const SimpleGenerateOptions opts = logits_of(/*tokens=*/1);
  const auto a = simple_generate(*plain, prompt, images, opts);
  ASSERT_EQ(a.logits.size(), 1u);
  for (const Fp8Scaling scaling : {Fp8Scaling::Tensor, Fp8Scaling::Channel}) {
    SCOPED_TRACE(fp8_scaling_name(scaling));
    auto fp8 = make_runner(false, false, true, scaling), fp8_recorded = make_runner(true, false, true, scaling);
    const size_t scales = scaling == Fp8Scaling::Tensor ? 2 * layers : layers * out_features;
    EXPECT_EQ(plain->memory().weights - fp8->memory().weights, linears * 3 - scales * sizeof(float));
    const auto b = simple_generate(*fp8, prompt, images, opts);
    const auto c = simple_generate(*fp8_recorded, prompt, images, opts);
    ASSERT_EQ(b.logits.size(), 1u);
    ASSERT_EQ(c.logits.size(), 1u);
    EXPECT_EQ(b.logits[0], c.logits[0]);  // recorded or not, the same FP8 arithmetic
    const double rel = relative_error(a.logits[0], b.logits[0]);
    EXPECT_GT(rel, 0.0);
    EXPECT_LT(rel, 0.08);
  }
}

TEST_F(DemoRunner, ErrorsLeaveTheRunnerUsable) {
  auto runner = make_runner();
  const ModelDesc& desc = runner->desc();
  const int S = desc.vision.image_size;
  // More tiles than the pool holds: refused up front, nothing taken.
  EXPECT_THROW(runner->encode_images({random_pixels(8, S, 1), random_pixels(6, S, 2)}), Error);
  EXPECT_EQ(runner->free_vision_tiles(), 13);
  // Wrong pixel shapes and dtypes.
  EXPECT_THROW(runner->encode_images({Tensor::host(DType::F32, {1, 3, S, S - 14})}), Error);
  EXPECT_THROW(runner->encode_images({Tensor::host(DType::BF16, {1, 3, S, S})}), Error);
  EXPECT_EQ(runner->free_vision_tiles(), 13);
  const std::vector<int64_t> handles = runner->encode_images({random_pixels(2, S, 3), random_pixels(1, S, 4)});
  EXPECT_EQ(runner->free_vision_tiles(), 10);
  // A bad chunk fails the step; the next good step works.
  SeqChunk bad;
  bad.tokens = {1, 2, desc.llm.vocab};
  bad.block_table = {0};
  bad.sample = true;
  EXPECT_THROW(runner->step({bad}), Error);
  SeqChunk good = bad;
  good.tokens = {1, 2, 3};
  good.vision.push_back(VisionRef{handles[1], 250, 2, 1});
  const auto results = runner->step({good});
  EXPECT_TRUE(results[0].argmax >= 0 && results[0].argmax < desc.llm.vocab);
  runner->release_image(handles[0]);
  runner->release_image(handles[1]);
  EXPECT_THROW(runner->release_image(handles[1]), Error);
  EXPECT_EQ(runner->free_vision_tiles(), 13);
}

TEST_F(DemoRunner, ByteTilesEncodeExactlyLikeHostNormalisedOnes) {
  auto runner = make_runner();
  const int S = runner->desc().vision.image_size;
  // 3 + 4 tiles in batches of 5: the second image is split over two ViT batches.
  const std::vector<Tensor> bytes{random_bytes(3, S, 11), random_bytes(4, S, 12)};
  const std::vector<Tensor> floats{normalized_on_host(bytes[0]), normalized_on_host(bytes[1])};
  const std::vector<Tensor> from_floats = embeddings(*runner, floats);
  const std::vector<Tensor> from_bytes = embeddings(*runner, bytes);
  ASSERT_EQ(from_bytes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(bitwise_equal(from_bytes[i], from_floats[i])) << "image " << i;
  // Not equal by accident: the second image's embedding differs from the first's rows.
  EXPECT_FALSE(bitwise_equal(from_bytes[0], from_bytes[1].rows(0, from_bytes[0].dim(0))));

  // One call takes one kind of tiles; bytes in the F32 layout are refused. Nothing is taken from the pool.
  EXPECT_THROW(runner->encode_images({bytes[0], floats[1]}), Error);
  EXPECT_THROW(runner->encode_images({Tensor::host(DType::U8, {1, 3, S, S})}), Error);
  EXPECT_EQ(runner->free_vision_tiles(), 13);

  // Recorded ViT batches include the normalisation: batches of 5 and 2 tiles are recorded with the first
  // bytes, then replayed on new ones, and still match.
  auto recorded = make_runner(/*recorded=*/true);
  for (uint32_t seed : {21u, 22u}) {
    const std::vector<Tensor> more{random_bytes(2, S, seed), random_bytes(5, S, seed + 100)};
    const std::vector<Tensor> want = embeddings(*runner, {normalized_on_host(more[0]), normalized_on_host(more[1])});
    const std::vector<Tensor> got = embeddings(*recorded, more);
    for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(bitwise_equal(got[i], want[i])) << "seed " << seed << " image " << i;
  }
  EXPECT_GT(recorded->vit_recordings(), 0);
}

}  // namespace
}  // namespace fovea

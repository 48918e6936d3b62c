// Random weights from a config alone (runtime/dummy_weights.h, --load-format dummy) on the CPU backend: an 80-layer
// model keeps its activations finite and its logits alive, dense and with FP8 and 4-bit weights; the weights are
// deterministic per seed; the shapes, ties and optional tensors follow the config.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "runtime/dummy_weights.h"
#include "runtime/internvl_runner.h"
#include "runtime/memory_plan.h"
#include "runtime/simple_generate.h"
#include "runtime/weights.h"
#include "support/temp_dir.h"

namespace fovea {
namespace {

namespace fs = std::filesystem;

// The golden InternLM2 config made 80 layers deep (hidden 64, FFN 128: widths FP8 and 4-bit accept).
class DeepConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path golden = fs::path(FOVEA_SOURCE_DIR) / "tests/data/golden/internlm2/original";
    nlohmann::json config = nlohmann::json::parse(std::ifstream(golden / "config.json"));
    auto& llm = config["llm_config"];
    llm["num_hidden_layers"] = 80;
    llm["hidden_size"] = 64;
    llm["intermediate_size"] = 128;
    llm["num_attention_heads"] = 4;
    llm["num_key_value_heads"] = 2;
    dir_.write("config.json", config.dump(1));
    fs::copy_file(golden / "tokenizer_config.json", dir_ / "tokenizer_config.json");
    desc_ = load_model_desc(dir_.string());
  }

  std::unique_ptr<InternVLRunner> runner(const ConfigWeights& weights, bool fp8 = false) {
    RunnerOptions opts;
    opts.kv_blocks = 64;
    opts.max_step_tokens = 600;
    opts.max_step_tiles = 2;
    opts.vision_pool_tiles = 2;
    opts.fp8_llm = fp8;
    return std::make_unique<InternVLRunner>(desc_, make_dummy_source(desc_, weights), make_backend("cpu"), opts);
  }

  // Text around one image tile, with random pixels.
  SimpleGenerateResult generate(InternVLRunner& r, int32_t first_text_token) {
    std::vector<int32_t> prompt{desc_.bos_id, first_text_token, 6, desc_.img_start_id};
    prompt.insert(prompt.end(), size_t(desc_.vision.tokens_per_tile()), desc_.image_token_id);
    prompt.insert(prompt.end(), {desc_.img_end_id, 7, 8});
    Tensor pixels = Tensor::host(DType::F32, {1, 3, 448, 448});
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-2.f, 2.f);
    for (int64_t i = 0; i < pixels.numel(); ++i) pixels.ptr<float>()[i] = dist(rng);
    SimpleGenerateOptions opts;
    opts.max_new_tokens = 3;
    opts.want_logits = true;
    opts.stop_ids = {-1};
    return simple_generate(r, prompt, {pixels}, opts);
  }

  // Finite, spread logits: no NaN or infinity after 80 layers, and neither collapsed nor exploded.
  static void expect_alive(const SimpleGenerateResult& result) {
    ASSERT_EQ(result.logits.size(), 3u);
    for (const std::vector<float>& logits : result.logits) {
      double sum = 0, sum_sq = 0;
      for (float v : logits) {
        ASSERT_TRUE(std::isfinite(v));
        sum += v, sum_sq += double(v) * v;
      }
      const double mean = sum / double(logits.size());
      const double std = std::sqrt(sum_sq / double(logits.size()) - mean * mean);
      // Fan-in scaling hands the head a unit-scale input, so the logits' std is about 1 (0.94-1.0 measured); a
      // gain of 3 per matrix gives 3, a collapsed stream 0.
      EXPECT_GT(std, 0.5) << "logits collapsed";
      EXPECT_LT(std, 2.0) << "logits grew";
    }
  }

  test::TempDir dir_{"dummy"};
  ModelDesc desc_;
};

TEST_F(DeepConfig, EightyLayersStayFiniteAndAlive) {
  ASSERT_EQ(desc_.llm.layers, 80);
  auto r = runner(ConfigWeights{});
  const SimpleGenerateResult a = generate(*r, 5);
  expect_alive(a);
  // Another prompt gives other logits: the input still reaches the head through 80 layers.
  const SimpleGenerateResult b = generate(*r, 9);
  EXPECT_NE(a.logits[0], b.logits[0]);
}

TEST_F(DeepConfig, Fp8And4BitWeightsStayFiniteAndAlive) {
  auto fp8 = runner(ConfigWeights{}, /*fp8=*/true);
  expect_alive(generate(*fp8, 5));
  auto w4 = runner(ConfigWeights{/*w4=*/true, /*w4_group=*/32, 0});
  EXPECT_EQ(w4->memory().w4_linears, 4 * 80);
  expect_alive(generate(*w4, 5));
}

TEST_F(DeepConfig, DeterministicPerSeed) {
  auto a = runner(ConfigWeights{false, 128, 11}), b = runner(ConfigWeights{false, 128, 11});
  auto c = runner(ConfigWeights{false, 128, 12});
  const SimpleGenerateResult ra = generate(*a, 5), rb = generate(*b, 5), rc = generate(*c, 5);
  EXPECT_EQ(ra.logits, rb.logits);
  EXPECT_NE(ra.logits, rc.logits);
}

TEST_F(DeepConfig, ShapesAndTiesFollowTheConfig) {
  // The golden InternLM2 config has qkv biases in the ViT, none in the LLM, and an untied head; tying it shares one
  // tensor.
  const auto source = make_dummy_source(desc_, ConfigWeights{});
  EXPECT_TRUE(source->has("vit.0.qkv.bias"));
  EXPECT_FALSE(source->has("llm.0.qkv.bias"));
  EXPECT_EQ(source->storage_key("llm.lm_head"), nullptr);
  ModelDesc tied = desc_;
  tied.llm.tie_embeddings = true;
  const size_t untied = runner(ConfigWeights{})->memory().weights;
  RunnerOptions opts;
  opts.kv_blocks = 8;
  const InternVLRunner tied_runner(tied, make_dummy_source(tied, ConfigWeights{}), make_backend("cpu"), opts);
  EXPECT_EQ(untied - tied_runner.memory().weights, size_t(desc_.llm.vocab) * 64 * 4);  // one [V, H] F32 less
}

// A CPU backend that logs every allocation's dtype and the most bytes held at once.
class AllocationLog final : public CpuBackend {
 public:
  Tensor alloc(DType dtype, const Shape& shape) override {
    Tensor t = CpuBackend::alloc(dtype, shape);
    peak_ = std::max(peak_, memory_in_use());
    dtypes_.push_back(dtype);
    return t;
  }
  size_t peak() const { return peak_; }
  int64_t count(DType dtype) const { return std::count(dtypes_.begin(), dtypes_.end(), dtype); }

 private:
  size_t peak_ = 0;
  std::vector<DType> dtypes_;
};

// --load-format dummy with --quantization fp8 (a 78B model on one H200) makes the LLM's projections as E4M3 codes
// directly: the bytes held while uploading never exceed the final weights', which are the dense upload's less 3 of
// every 4 projection bytes (float32 here, 2 of every 2 in bf16 on a GPU) plus one float scale per output channel.
// A dense copy of any projection on the way would raise the peak above that.
TEST_F(DeepConfig, Fp8DummyWeightsAreMadeAsFp8WithNoDenseCopy) {
  const auto source = make_dummy_source(desc_, ConfigWeights{});
  AllocationLog dense_backend, fp8_backend;
  const DeviceWeights dense = upload_weights(desc_, *source, dense_backend);
  const DeviceWeights fp8 = upload_weights(desc_, *source, fp8_backend, /*fp8_llm=*/true);
  EXPECT_EQ(dense_backend.peak(), dense.bytes);
  EXPECT_EQ(fp8_backend.peak(), fp8.bytes);
  EXPECT_EQ(fp8_backend.memory_in_use(), fp8.bytes);
  // Hidden 64, 4 heads and 2 KV heads of 16, FFN 128: qkv [128, 64], o [64, 64], gate_up [256, 64], down [64, 128].
  const int64_t layers = 80, projection_weights = 128 * 64 + 64 * 64 + 256 * 64 + 64 * 128, out_channels = 512;
  ASSERT_EQ(desc_.llm.layers, layers);
  EXPECT_EQ(fp8.bytes, dense.bytes - size_t(layers * projection_weights * 3) + size_t(layers * out_channels * 4));
  EXPECT_EQ(fp8_backend.count(DType::F8E4M3), 4 * layers);
  EXPECT_EQ(dense_backend.count(DType::F8E4M3), 0);
}

// --load-format dummy with --quantization w4a16 (a 78B model on one 80 GB GPU) makes the LLM's projections in the
// packed 4-bit layout directly (random codes + one scale per group): the bytes held while uploading never exceed the
// final weights', no projection-shaped dense tensor is ever allocated, and the memory planner (which "uploads" the
// same model into a backend that only counts bytes) names exactly those bytes: its tolerance is zero, as
// runtime/memory_plan.h promises byte-for-byte agreement.
TEST_F(DeepConfig, W4DummyWeightsArePackedWithNoDenseCopyAndMatchThePlan) {
  const ConfigWeights w4_options{/*w4=*/true, /*w4_group=*/32, /*seed=*/0};
  const auto source = make_dummy_source(desc_, w4_options);
  AllocationLog dense_backend, w4_backend;
  const DeviceWeights dense = upload_weights(desc_, *make_dummy_source(desc_, ConfigWeights{}), dense_backend);
  const DeviceWeights w4 = upload_weights(desc_, *source, w4_backend);
  const int64_t layers = 80;
  ASSERT_EQ(desc_.llm.layers, layers);
  EXPECT_EQ(w4.w4.linears, 4 * layers);
  EXPECT_EQ(w4_backend.peak(), w4.bytes);
  EXPECT_EQ(w4_backend.memory_in_use(), w4.bytes);
  // Hidden 64, 4 heads and 2 KV heads of 16, FFN 128: qkv [128, 64], o [64, 64], gate_up [256, 64], down [64, 128].
  const int64_t dense_elems = 128 * 64 + 64 * 64 + 256 * 64 + 64 * 128;
  // 4 bits a code, plus one 32-bit param per group of 32 columns: 0.5 + 4/32 = 0.625 bytes per weight.
  const size_t packed_bytes = size_t(dense_elems) * 5 / 8;
  EXPECT_EQ(w4.w4.bytes, size_t(layers) * packed_bytes);
  EXPECT_EQ(w4.bytes + size_t(layers * dense_elems) * 4, dense.bytes + size_t(layers) * packed_bytes);
  // The 4-bit upload allocates only U32 codes / params beyond what the dense upload also allocates; no F32 tensor of a
  // projection's size exists on the way (the dense upload's F32 count less the 4 projections of each layer).
  EXPECT_EQ(w4_backend.count(DType::F32), dense_backend.count(DType::F32) - 4 * layers);

  // The planner's weight figure for the same config and options equals the real upload's.
  RunnerOptions opts;
  opts.kv_blocks = 64;
  opts.max_step_tokens = 600;
  opts.max_step_tiles = 2;
  opts.vision_pool_tiles = 2;
  const std::unique_ptr<Backend> cpu = make_backend("cpu");
  const MemoryPlan plan = plan_memory(desc_, *make_config_source(desc_, w4_options), opts, sizing_target_of(*cpu));
  EXPECT_EQ(plan.weights, w4.bytes);
  auto r = runner(w4_options);
  EXPECT_EQ(plan.weights, r->memory().weights);
  EXPECT_EQ(plan.workspace, r->memory().workspace);
}

TEST_F(DeepConfig, W4DummyGenerationIsDeterministicPerSeed) {
  auto a = runner(ConfigWeights{true, 32, 11}), b = runner(ConfigWeights{true, 32, 11});
  auto c = runner(ConfigWeights{true, 32, 12});
  const SimpleGenerateResult ra = generate(*a, 5), rb = generate(*b, 5), rc = generate(*c, 5);
  expect_alive(ra);
  EXPECT_EQ(ra.tokens, rb.tokens);
  EXPECT_EQ(ra.logits, rb.logits);
  EXPECT_NE(ra.logits, rc.logits);
}

// A source that stores the ViT's layer-1 proj weight once with layer 0's (the same storage key and values), as a
// tied lm_head is stored once with the embedding.
class SharedProjSource : public WeightSource {
 public:
  explicit SharedProjSource(std::unique_ptr<WeightSource> inner) : inner_(std::move(inner)) {}
  bool has(const std::string& name) const override { return inner_->has(name); }
  bool has_w4(const std::string& linear) const override { return inner_->has_w4(linear); }
  W4Info w4_info(const std::string& linear, const Shape& shape) const override {
    return inner_->w4_info(linear, shape);
  }
  const void* storage_key(const std::string& name) const override {
    return name == kShared || name == kAlias ? static_cast<const void*>(&key_) : inner_->storage_key(name);
  }
  void write_dense(const std::string& name, Tensor& dst, Backend& backend) override {
    inner_->write_dense(name == kAlias ? kShared : name, dst, backend);
  }
  void write_fp8(const std::string& name, Fp8Linear& dst, Backend& backend) override {
    inner_->write_fp8(name, dst, backend);
  }
  void write_w4(const std::string& linear, W4Weight& dst, Backend& backend) override {
    inner_->write_w4(linear, dst, backend);
  }
  static constexpr const char* kShared = "vit.0.proj.weight";
  static constexpr const char* kAlias = "vit.1.proj.weight";

 private:
  std::unique_ptr<WeightSource> inner_;
  int key_ = 0;
};

// The loader folds each ViT layer's ls1 into its proj rows (WeightUploader::fold_scale). Two layers' proj weights
// stored once would be uploaded once; after layer 0's fold, layer 1 must get an upload of its own: each layer's
// rows end up scaled by its own ls1 alone (not by the other layer's too), and the bytes count both uploads.
TEST_F(DeepConfig, LayerScalesFoldIntoEachLayersOwnWeightWhenTwoShareStorage) {
  ASSERT_GE(desc_.vision.layers, 2);
  auto backend = make_backend("cpu");
  SharedProjSource source(make_dummy_source(desc_, ConfigWeights{}));
  const DeviceWeights w = upload_weights(desc_, source, *backend);
  const DeviceWeights plain = upload_weights(desc_, *make_dummy_source(desc_, ConfigWeights{}), *backend);
  const int64_t C = desc_.vision.hidden;
  Tensor raw = backend->alloc(backend->weight_dtype(), {C, C});
  make_dummy_source(desc_, ConfigWeights{})->write_dense(SharedProjSource::kShared, raw, *backend);
  const VitLayerWeights &l0 = w.vision.layers[0], &l1 = w.vision.layers[1];
  ASSERT_NE(l0.proj_w.data, l1.proj_w.data);
  for (const VitLayerWeights* l : {&l0, &l1}) {
    for (int64_t r = 0; r < C; ++r)
      for (int64_t c = 0; c < C; ++c)
        ASSERT_EQ(l->proj_w.ptr<float>()[r * C + c], raw.ptr<float>()[r * C + c] * l->ls1.ptr<float>()[r])
            << "row " << r << " col " << c;
  }
  // Layer 0 is what the unshared upload makes, and the shared storage was uploaded twice.
  EXPECT_EQ(std::memcmp(l0.proj_w.data, plain.vision.layers[0].proj_w.data, l0.proj_w.nbytes()), 0);
  EXPECT_EQ(w.bytes, plain.bytes);
}

}  // namespace
}  // namespace fovea

// The InternVL forward against transformers' float32 reference (tests/data/golden, see its README): each tiny
// model in both checkpoint formats, on every backend of this build (CUDA cases skip without a GPU).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/backend.h"
#include "golden_util.h"
#include "recording_backend.h"
#include "runtime/internvl_runner.h"
#include "runtime/simple_generate.h"

namespace fovea {
namespace {

struct GoldenParam {
  std::string backend;  // "cpu" or "cuda"
  std::string model;    // "internlm2" or "qwen2"
  std::string format;   // "hf" or "original"
};

std::string param_name(const ::testing::TestParamInfo<GoldenParam>& info) {
  return info.param.backend + "_" + info.param.model + "_" + info.param.format;
}

struct CaseInput {
  std::vector<int32_t> prompt;
  std::vector<int> tiles;  // indices into golden::all_tiles()
};

class GoldenForward : public ::testing::TestWithParam<GoldenParam> {
 protected:
  void SetUp() override {
    if (!golden::available()) GTEST_SKIP() << "tests/data/golden is absent";
    if (GetParam().backend == "cuda" && !cuda_backend_available()) GTEST_SKIP() << "no CUDA backend or GPU";
  }

  bool is_cpu() const { return GetParam().backend == "cpu"; }
  // float32 CPU must match transformers' float32 closely; bf16 CUDA only roughly.
  double tolerance() const { return is_cpu() ? 1e-4 : 2e-2; }

  // decode_graphs, vit_graphs: on the CPU the recordings come from test::RecordingBackend, on CUDA from CUDA
  // graphs.
  std::unique_ptr<InternVLRunner> make_runner(int max_step_tiles = 4, bool decode_graphs = false,
                                              bool vit_graphs = false) {
    const std::string dir = golden::golden_dir() + "/" + GetParam().model + "/" + GetParam().format;
    RunnerOptions opts;
    opts.kv_blocks = 160;
    opts.block_size = 16;
    opts.max_step_tokens = 1200;
    opts.max_step_tiles = max_step_tiles;
    opts.vision_pool_tiles = 8;
    opts.max_step_seqs = 8;
    opts.decode_graphs = decode_graphs;
    opts.vit_graphs = vit_graphs;
    std::unique_ptr<Backend> backend = make_backend(GetParam().backend);
    if ((decode_graphs || vit_graphs) && is_cpu()) backend = std::make_unique<test::RecordingBackend>(std::move(backend));
    return std::make_unique<InternVLRunner>(load_model(dir), std::move(backend), opts);
  }

  CaseInput case_input(const std::string& name) {
    CaseInput in;
    in.prompt = golden::reference_ids(GetParam().model, name + ".input_ids");
    if (name != "text") {
      for (int32_t t : golden::reference_ids(GetParam().model, name + ".tiles")) in.tiles.push_back(t);
    }
    return in;
  }

  std::vector<Tensor> images_of(const CaseInput& in) {
    if (in.tiles.empty()) return {};
    return {golden::select_tiles(tiles(), in.tiles)};
  }

  const Tensor& tiles() {
    if (tiles_.empty()) tiles_ = golden::all_tiles();
    return tiles_;
  }

  // Logits of the prompt's last token, and the greedy tokens, compared with the reference.
  void expect_matches_reference(const std::string& name, const SimpleGenerateResult& got, size_t steps) {
    const Tensor step_logits = golden::reference(GetParam().model, name + ".step_logits");
    const std::vector<int32_t> generated = golden::reference_ids(GetParam().model, name + ".generated");
    const int64_t V = step_logits.dim(1);
    ASSERT_GE(got.tokens.size(), steps);
    ASSERT_GE(got.logits.size(), steps);
    for (size_t i = 0; i < steps; ++i) {
      ASSERT_EQ(int64_t(got.logits[i].size()), V);
      const double err = golden::relative_error(got.logits[i].data(), step_logits.ptr<float>() + int64_t(i) * V, V);
      EXPECT_LE(err, tolerance()) << name << " step " << i;
      EXPECT_EQ(got.tokens[i], generated[i]) << name << " step " << i;
      if (got.tokens[i] != generated[i]) break;  // later steps see different inputs
    }
  }

 private:
  Tensor tiles_;
};

TEST_P(GoldenForward, VisionFeaturesAndProjectorMatch) {
  auto runner = make_runner();
  for (const std::string name : {"t1", "t3"}) {
    const CaseInput in = case_input(name);
    Tensor vit, projected;
    runner->encode_tiles_for_test(golden::select_tiles(tiles(), in.tiles), &vit, &projected);
    const Tensor want_vit = golden::reference(GetParam().model, name + ".vision_features");
    const Tensor want_proj = golden::reference(GetParam().model, name + ".projector");
    EXPECT_LE(golden::relative_error(vit, want_vit), tolerance()) << name;
    EXPECT_LE(golden::relative_error(projected, want_proj), tolerance()) << name;
  }
}

TEST_P(GoldenForward, PromptLogitsAndGreedyDecodeMatch) {
  auto runner = make_runner();
  for (const std::string name : {"text", "t1", "t3"}) {
    const CaseInput in = case_input(name);
    SimpleGenerateOptions opts;
    opts.max_new_tokens = is_cpu() ? 8 : 1;
    opts.want_logits = true;
    opts.stop_ids = {-1};  // the reference never stops
    const SimpleGenerateResult got = simple_generate(*runner, in.prompt, images_of(in), opts);
    expect_matches_reference(name, got, size_t(opts.max_new_tokens));
    EXPECT_EQ(runner->free_vision_tiles(), runner->vision_pool_tiles());  // images released
  }
}

TEST_P(GoldenForward, ChunkedPrefillMatchesOneChunk) {
  auto runner = make_runner();
  const CaseInput in = case_input("t3");
  SimpleGenerateOptions opts;
  opts.max_new_tokens = 2;
  opts.want_logits = true;
  opts.stop_ids = {-1};
  const SimpleGenerateResult whole = simple_generate(*runner, in.prompt, images_of(in), opts);
  // Cuts before, inside and after the image span: on the tile boundary (row 256 is at 263 without BOS, 264 with
  // it), inside tiles, a one-token chunk (9..10), and a last chunk of two tokens.
  opts.prefill_splits = {3, 9, 10, 200, 263, 264, 266, 523, 700, 786};
  const SimpleGenerateResult chunked = simple_generate(*runner, in.prompt, images_of(in), opts);
  // bf16 runs may legitimately diverge after the first token (t3's smallest greedy margin is 0.04).
  const size_t steps = is_cpu() ? whole.tokens.size() : 1;
  for (size_t i = 0; i < steps; ++i) {
    ASSERT_EQ(chunked.tokens[i], whole.tokens[i]) << "step " << i;
    const double err =
        golden::relative_error(chunked.logits[i].data(), whole.logits[i].data(), int64_t(whole.logits[i].size()));
    EXPECT_LE(err, is_cpu() ? 1e-5 : 2e-2) << "step " << i;
  }
  expect_matches_reference("t3", chunked, steps);
}

TEST_P(GoldenForward, ImagesSplitOverHandlesAndTileBatches) {
  // Two tiles per ViT batch, and the 3-tile image given as two images (tiles 0-1 and 2): the embeddings come
  // from two handles and two encoder batches, the prompt is unchanged.
  auto runner = make_runner(/*max_step_tiles=*/2);
  const CaseInput in = case_input("t3");
  const std::vector<Tensor> images{golden::select_tiles(tiles(), {in.tiles[0], in.tiles[1]}),
                                   golden::select_tiles(tiles(), {in.tiles[2]})};
  SimpleGenerateOptions opts;
  opts.max_new_tokens = 1;
  opts.want_logits = true;
  opts.stop_ids = {-1};
  expect_matches_reference("t3", simple_generate(*runner, in.prompt, images, opts), 1);
}

TEST_P(GoldenForward, BatchedSequencesInOneStep) {
  // Three sequences in one step, each with its own blocks: the text prompt whole, the t1 prompt whole, and the
  // t1 prompt's first 100 tokens (not sampled). Results must equal the references of the separate runs.
  auto runner = make_runner();
  const CaseInput text = case_input("text"), t1 = case_input("t1");
  const std::vector<int64_t> handles = runner->encode_images(images_of(t1));
  auto blocks = [](int first, int count) {
    std::vector<int32_t> table;
    for (int b = 0; b < count; ++b) table.push_back(first + b);
    return table;
  };
  std::vector<std::pair<int, int>> image_rows(t1.prompt.size(), {-1, -1});
  int row = 0;
  for (size_t p = 0; p < t1.prompt.size(); ++p)
    if (t1.prompt[p] == runner->desc().image_token_id) image_rows[p] = {0, row++};
  std::vector<SeqChunk> chunks(3);
  chunks[0].tokens = text.prompt;
  chunks[0].block_table = blocks(0, 2);
  chunks[0].sample = true;
  chunks[0].answer_ids = {5, 0, 7};
  chunks[0].want_logits = true;
  chunks[1].tokens = t1.prompt;
  chunks[1].block_table = blocks(40, 18);
  chunks[1].vision = vision_refs_for_range(image_rows, handles, 0, int(t1.prompt.size()));
  chunks[1].sample = true;
  chunks[2].tokens.assign(t1.prompt.begin(), t1.prompt.begin() + 100);
  chunks[2].block_table = blocks(100, 7);
  chunks[2].vision = vision_refs_for_range(image_rows, handles, 0, 100);
  const std::vector<SeqResult> results = runner->step(chunks);
  ASSERT_EQ(results.size(), 3u);
  const Tensor text_logits = golden::reference(GetParam().model, "text.logits");
  const int64_t V = text_logits.numel();
  ASSERT_EQ(int64_t(results[0].logits.size()), V);
  EXPECT_LE(golden::relative_error(results[0].logits.data(), text_logits.ptr<float>(), V), tolerance());
  EXPECT_EQ(results[0].argmax, golden::reference_ids(GetParam().model, "text.generated")[0]);
  EXPECT_EQ(results[1].argmax, golden::reference_ids(GetParam().model, "t1.generated")[0]);
  EXPECT_EQ(results[2].argmax, -1);
  EXPECT_TRUE(results[1].logits.empty());
  // Log-probs of the answer ids: log_softmax of the reference logits.
  double max_logit = -INFINITY, sum = 0.0;
  for (int64_t i = 0; i < V; ++i) max_logit = std::max(max_logit, double(text_logits.ptr<float>()[i]));
  for (int64_t i = 0; i < V; ++i) sum += std::exp(double(text_logits.ptr<float>()[i]) - max_logit);
  ASSERT_EQ(results[0].answer_logprobs.size(), 3u);
  // On the GPU the logits are bf16: one step of the top logit (2^-7 of its power of two: 0.125 for 16-32) moves
  // every log-prob by up to as much, since the top token holds most of the softmax's mass. Two such steps.
  const double bf16_step = std::ldexp(1.0, std::ilogb(std::max(std::abs(max_logit), 1.0)) - 7);
  for (size_t k = 0; k < 3; ++k) {
    const double want = text_logits.ptr<float>()[chunks[0].answer_ids[k]] - max_logit - std::log(sum);
    EXPECT_NEAR(results[0].answer_logprobs[k], want, is_cpu() ? 1e-3 : 2 * bf16_step) << k;
  }
  for (int64_t h : handles) runner->release_image(h);
}

TEST_P(GoldenForward, RecordedVisionEncodeMatches) {
  // max_step_tiles 4: buckets 1, 2, 4. t3 runs padded to 4 tiles, t1 as 1; each bucket is recorded once and
  // then replayed on new pixels (the padding tile holding zeros, later stale rows).
  auto runner = make_runner(4, false, /*vit_graphs=*/true);
  for (const std::string name : {"t3", "t1", "t3", "t1"}) {
    const CaseInput in = case_input(name);
    Tensor vit, projected;
    runner->encode_tiles_for_test(golden::select_tiles(tiles(), in.tiles), &vit, &projected);
    EXPECT_LE(golden::relative_error(vit, golden::reference(GetParam().model, name + ".vision_features")),
              tolerance())
        << name;
    EXPECT_LE(golden::relative_error(projected, golden::reference(GetParam().model, name + ".projector")),
              tolerance())
        << name;
  }
  // The engine's path: encode_images into the vision pool.
  const CaseInput t3 = case_input("t3");
  const std::vector<int64_t> handles = runner->encode_images(images_of(t3));
  ASSERT_EQ(handles.size(), 1u);
  EXPECT_LE(golden::relative_error(runner->image_embedding(handles[0]),
                                   golden::reference(GetParam().model, "t3.projector")),
            tolerance());
  runner->release_image(handles[0]);
  EXPECT_EQ(runner->vit_recordings(), 2);
}

TEST_P(GoldenForward, RecordedDecodeStepsMatch) {
  auto runner = make_runner(4, /*decode_graphs=*/true);
  const CaseInput in = case_input("t1");
  SimpleGenerateOptions opts;
  opts.max_new_tokens = is_cpu() ? 8 : 2;
  opts.want_logits = true;
  opts.stop_ids = {-1};
  const SimpleGenerateResult got = simple_generate(*runner, in.prompt, images_of(in), opts);
  expect_matches_reference("t1", got, is_cpu() ? 8 : 1);
  EXPECT_EQ(runner->decode_recordings(), 1);  // one sequence, one table-width bucket: recorded once, replayed
}

TEST_P(GoldenForward, RecordedDecodeOfAPaddedBatch) {
  // Three sequences prefilled together, then one decode step of all three: the step pads to 4 rows (one
  // padding row in the scratch block) and its results must be those of the references.
  auto runner = make_runner(4, /*decode_graphs=*/true);
  const CaseInput text = case_input("text"), t1 = case_input("t1");
  const std::vector<int64_t> handles = runner->encode_images(images_of(t1));
  std::vector<std::pair<int, int>> image_rows(t1.prompt.size(), {-1, -1});
  int row = 0;
  for (size_t p = 0; p < t1.prompt.size(); ++p)
    if (t1.prompt[p] == runner->desc().image_token_id) image_rows[p] = {0, row++};
  auto blocks = [](int first, int count) {
    std::vector<int32_t> table;
    for (int b = 0; b < count; ++b) table.push_back(first + b);
    return table;
  };
  std::vector<SeqChunk> prefill(3);
  const std::vector<const CaseInput*> inputs{&text, &t1, &text};
  const std::vector<int> first_block{0, 20, 60};
  for (size_t i = 0; i < 3; ++i) {
    prefill[i].tokens = inputs[i]->prompt;
    prefill[i].block_table = blocks(first_block[i], 19);
    prefill[i].sample = true;
  }
  prefill[1].vision = vision_refs_for_range(image_rows, handles, 0, int(t1.prompt.size()));
  const std::vector<SeqResult> first = runner->step(prefill);
  std::vector<SeqChunk> decode(3);
  for (size_t i = 0; i < 3; ++i) {
    decode[i].tokens = {first[i].argmax};
    decode[i].start_pos = int32_t(inputs[i]->prompt.size());
    decode[i].block_table = prefill[i].block_table;
    decode[i].sample = true;
    decode[i].want_logits = true;
  }
  decode[2].answer_ids = {3, 1};
  const std::vector<SeqResult> second = runner->step(decode);
  EXPECT_EQ(runner->decode_recordings(), 1);
  for (size_t i = 0; i < 3; ++i) {
    const std::string name = i == 1 ? "t1" : "text";
    const std::vector<int32_t> generated = golden::reference_ids(GetParam().model, name + ".generated");
    ASSERT_EQ(first[i].argmax, generated[0]) << i;
    const Tensor step_logits = golden::reference(GetParam().model, name + ".step_logits");
    const int64_t V = step_logits.dim(1);
    ASSERT_EQ(int64_t(second[i].logits.size()), V);
    EXPECT_LE(golden::relative_error(second[i].logits.data(), step_logits.ptr<float>() + V, V), tolerance()) << i;
    if (is_cpu()) {
      EXPECT_EQ(second[i].argmax, generated[1]) << i;
    }
  }
  ASSERT_EQ(second[2].answer_logprobs.size(), 2u);
  EXPECT_LT(second[2].answer_logprobs[0], 0.0f);
  for (int64_t h : handles) runner->release_image(h);
}

std::vector<GoldenParam> all_params() {
  std::vector<GoldenParam> params;
  for (const char* backend : {"cpu", "cuda"})
    for (const char* model : {"internlm2", "qwen2", "vit6b", "qwen3"})
      for (const char* format : {"hf", "original"}) params.push_back({backend, model, format});
  return params;
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenForward, ::testing::ValuesIn(all_params()), param_name);

}  // namespace
}  // namespace fovea

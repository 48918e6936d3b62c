// The family table (tests/data/family/family.json): every row's tiny stand-in config either loads with random weights
// written under its format's own tensor names and runs a CPU step (an image tile, a prompt, two decoded tokens), or is
// refused before any weight is read, with the row's stated reason. A supported row claims "golden-tested": the goldens
// it lists must exist and cover its vision tower and its LLM in its format.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "backend/backend.h"
#include "random_checkpoint.h"
#include "runtime/internvl_runner.h"
#include "runtime/simple_generate.h"
#include "support/temp_dir.h"

namespace fovea {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kFamily = std::string(FOVEA_SOURCE_DIR) + "/tests/data/family";

const json& family() {
  static const json doc = json::parse(std::ifstream(kFamily + "/family.json"));
  return doc;
}

std::vector<std::string> row_names() {
  std::vector<std::string> names;
  for (const json& row : family()["models"]) names.push_back(row["name"].get<std::string>());
  return names;
}

const json& row_of(const std::string& name) {
  for (const json& row : family()["models"])
    if (row["name"] == name) return row;
  throw std::runtime_error("no family row " + name);
}

// What each golden model (tests/data/golden) checks against transformers: its ViT and its LLM in both formats.
struct GoldenCoverage {
  bool vit_6b;
  LlmArch original, hf;
};
const std::map<std::string, GoldenCoverage> kGoldens = {
    {"internlm2", {false, LlmArch::InternLM2, LlmArch::Llama}},
    {"qwen2", {false, LlmArch::Qwen2, LlmArch::Qwen2}},
    {"vit6b", {true, LlmArch::Llama, LlmArch::Llama}},
    {"qwen3", {false, LlmArch::Qwen3, LlmArch::Qwen3}},
};

class FamilyRow : public ::testing::TestWithParam<std::string> {
 protected:
  const json& row() const { return row_of(GetParam()); }
  std::string dir() const { return kFamily + "/" + GetParam(); }
};

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_P(FamilyRow, LoadsAndRunsOrIsRefusedWithItsReason) {
  const json& r = row();
  if (r["status"] == "refused") {
    const std::string message = error_of([&] { load_model_desc(dir()); });
    ASSERT_FALSE(message.empty()) << GetParam() << " loads, but the table says it is refused";
    EXPECT_NE(message.find(r["refusal"].get<std::string>()), std::string::npos) << message;
    EXPECT_NE(message.find("config.json"), std::string::npos) << message;
    return;
  }
  ASSERT_EQ(r["status"], "supported");
  const ModelDesc desc = load_model_desc(dir());
  const json& vision = family()["vision_towers"][r["vision"].get<std::string>()];
  EXPECT_EQ(desc.vision.qk_norm, vision["qk_norm"].get<bool>());
  EXPECT_EQ(desc.vision.norm == VitNorm::RmsNorm, vision["norm"] == "rms_norm");
  EXPECT_EQ(desc.vision.qkv_bias, vision["qkv_bias"].get<bool>());
  EXPECT_EQ(desc.format == CheckpointFormat::HfInternVL, r["format"] == "hf");

  // Golden coverage of the claim "golden-tested".
  bool vit_covered = false, llm_covered = false;
  for (const json& g : r["golden"]) {
    const std::string name = g.get<std::string>();
    ASSERT_TRUE(kGoldens.count(name)) << name;
    ASSERT_TRUE(fs::exists(std::string(FOVEA_SOURCE_DIR) + "/tests/data/golden/" + name + "/reference.safetensors"));
    const GoldenCoverage& c = kGoldens.at(name);
    vit_covered = vit_covered || c.vit_6b == desc.vision.qk_norm;
    llm_covered = llm_covered || (desc.format == CheckpointFormat::HfInternVL ? c.hf : c.original) == desc.llm.arch;
  }
  EXPECT_TRUE(vit_covered) << GetParam() << ": no listed golden has its vision tower";
  EXPECT_TRUE(llm_covered) << GetParam() << ": no listed golden has its LLM in this format";

  // Random weights under the format's own names, loaded and run on the CPU.
  const test::TempDir scratch("family_" + GetParam());
  for (const char* f : {"config.json", "tokenizer_config.json"}) fs::copy_file(dir() + "/" + f, scratch / f);
  test::write_random_checkpoint(desc, scratch.string());
  RunnerOptions opts;
  opts.kv_blocks = 40;
  opts.max_step_tokens = 300;
  opts.max_step_tiles = 1;
  opts.vision_pool_tiles = 1;
  opts.max_step_seqs = 2;
  InternVLRunner runner(load_model(scratch.string()), make_backend("cpu"), opts);
  std::vector<int32_t> prompt = {5, 6, desc.img_start_id};
  prompt.insert(prompt.end(), size_t(desc.vision.tokens_per_tile()), desc.image_token_id);
  prompt.insert(prompt.end(), {desc.img_end_id, 7, 8});
  Tensor tile = Tensor::host(DType::F32, {1, 3, desc.vision.image_size, desc.vision.image_size});
  for (int64_t i = 0; i < tile.numel(); ++i) tile.ptr<float>()[i] = float(i % 17) / 8.f - 1.f;
  SimpleGenerateOptions gen;
  gen.max_new_tokens = 2;
  gen.want_logits = true;
  gen.stop_ids = {-1};
  const SimpleGenerateResult out = simple_generate(runner, prompt, {tile}, gen);
  ASSERT_EQ(out.tokens.size(), 2u);
  for (const std::vector<float>& logits : out.logits) {
    ASSERT_EQ(int64_t(logits.size()), desc.llm.vocab);
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  }
}

// A refused row is refused before its weights are read: a checkpoint of garbage behind it changes nothing.
TEST(Family, RefusalComesBeforeAnyWeightIsRead) {
  const test::TempDir scratch("family_refused");
  fs::copy_file(kFamily + "/InternVL3_5-30B-A3B/config.json", scratch / "config.json");
  scratch.write("model.safetensors", "not a safetensors file");
  const std::string message = error_of([&] { load_model(scratch.string()); });
  EXPECT_NE(message.find("Qwen3-MoE"), std::string::npos) << message;
}

TEST(Family, TableListsEveryGenerationAndBothFormats) {
  std::set<std::string> series, formats;
  for (const json& r : family()["models"]) {
    series.insert(r["series"].get<std::string>());
    formats.insert(r["format"].get<std::string>());
    EXPECT_TRUE(fs::exists(kFamily + "/" + r["name"].get<std::string>() + "/config.json")) << r["name"];
  }
  EXPECT_EQ(series, (std::set<std::string>{"InternVL2", "InternVL2.5", "InternVL3", "InternVL3.5"}));
  EXPECT_EQ(formats, (std::set<std::string>{"original", "hf"}));
  EXPECT_GE(family()["models"].size(), 45u);
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Family, FamilyRow, ::testing::ValuesIn(row_names()), param_name);

}  // namespace
}  // namespace fovea

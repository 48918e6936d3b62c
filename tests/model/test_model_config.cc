// config.json parsing: each unsupported setting is rejected with an error naming the key.
#include <gtest/gtest.h>

#include "model/model_desc.h"
#include "test_util.h"

namespace fovea {
namespace {

using test::TempDir;

// Copies the json files of golden model `src` (e.g. "internlm2/original"), replaces `from` by `to` in its
// config.json (which must occur), and returns the error load_model_desc throws ("" when none).
// The json files of golden model `src` in `dir`.
void copy_json(const std::string& src, const TempDir& dir) {
  for (const char* f : {"config.json", "tokenizer_config.json"})
    std::filesystem::copy_file(test::golden_dir() + "/" + src + "/" + f, dir.file(f));
}

std::string desc_error(const std::string& src, const std::string& from, const std::string& to) {
  TempDir dir("config");
  copy_json(src, dir);
  test::edit_config(dir.path().string(), [&](std::string& text) {
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  });
  try {
    load_model_desc(dir.path().string());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_rejected(const std::string& src, const std::string& from, const std::string& to,
                     const std::string& mention) {
  const std::string message = desc_error(src, from, to);
  ASSERT_FALSE(message.empty()) << "accepted: " << to;
  EXPECT_NE(message.find(mention), std::string::npos) << message;
  EXPECT_NE(message.find("config.json"), std::string::npos) << message;
}

TEST(ModelConfig, UnchangedGoldenConfigsAreAccepted) {
  EXPECT_EQ(desc_error("internlm2/original", "\"select_layer\": -1", "\"select_layer\": -1"), "");
  EXPECT_EQ(desc_error("qwen2/hf", "\"use_qk_norm\": false", "\"use_qk_norm\": false"), "");
}

// An -hf config that names its template (InternVL2 conversions, the benchmark's model) keeps it; others get
// internvl2_5, the template of the InternVL2.5/3 conversions.
TEST(ModelConfig, HfConfigTemplateKeyIsHonoured) {
  TempDir dir("hf_template");
  for (const char* f : {"config.json", "tokenizer_config.json"})
    std::filesystem::copy_file(test::golden_dir() + "/internlm2/hf/" + f, dir.file(f));
  EXPECT_EQ(load_model_desc(dir.path().string()).chat_template, ChatTemplateKind::InternVL2_5);
  test::edit_config(dir.path().string(), [&](std::string& text) {
    const size_t at = text.find("\"model_type\": \"internvl\"");
    ASSERT_NE(at, std::string::npos);
    text.insert(at, "\"template\": \"internlm2-chat\", ");
  });
  EXPECT_EQ(load_model_desc(dir.path().string()).chat_template, ChatTemplateKind::InternLM2Chat);
  expect_rejected("internlm2/hf", "\"model_type\": \"internvl\"", "\"template\": \"chatml\", \"model_type\": \"internvl\"",
                  "chatml");
}

TEST(ModelConfig, RejectsOtherSelectLayer) {
  expect_rejected("internlm2/original", "\"select_layer\": -1", "\"select_layer\": -4", "select_layer");
}

// InternViT-6B's settings load; a 300M checkpoint whose config asks for them then needs their tensors.
TEST(ModelConfig, InternViT6BSettingsAreRead) {
  EXPECT_EQ(desc_error("internlm2/original", "\"qk_normalization\": false", "\"qk_normalization\": true"), "");
  EXPECT_EQ(desc_error("qwen2/hf", "\"use_qk_norm\": false", "\"use_qk_norm\": true"), "");
  EXPECT_EQ(desc_error("internlm2/original", "\"norm_type\": \"layer_norm\"", "\"norm_type\": \"rms_norm\""), "");
  expect_rejected("vit6b/original", "\"norm_type\": \"rms_norm\"", "\"norm_type\": \"group_norm\"", "group_norm");
  expect_rejected("vit6b/hf", "\"norm_type\": \"rms_norm\"", "\"norm_type\": \"batch_norm\"",
                  "vision_config.norm_type");
}

// Every refusal of an architecture names the config key and the value that asked for it.
TEST(ModelConfig, RejectsUnknownArchitectures) {
  expect_rejected("internlm2/original", "InternLM2ForCausalLM", "MixtralForCausalLM",
                  "llm_config.architectures[0] 'MixtralForCausalLM': unknown architecture");
  expect_rejected("internlm2/original", "\"model_type\": \"internvl_chat\"", "\"model_type\": \"llava\"",
                  "model_type 'llava': unknown architecture");
  expect_rejected("qwen2/hf", "\"model_type\": \"qwen2\"", "\"model_type\": \"gemma\"",
                  "text_config.model_type 'gemma': unknown architecture");
}

// A vision tower other than InternViT (a LLaVA-style SigLIP / CLIP config) is refused by its key, not read as
// InternViT's sizes.
TEST(ModelConfig, RejectsOtherVisionTowers) {
  expect_rejected("internlm2/original", "\"model_type\": \"intern_vit_6b\"", "\"model_type\": \"siglip_vision_model\"",
                  "vision_config.model_type 'siglip_vision_model': unknown vision tower");
  expect_rejected("internlm2/original", "\"InternVisionModel\"", "\"CLIPVisionModel\"",
                  "vision_config.architectures[0] 'CLIPVisionModel': unknown vision tower");
  expect_rejected("qwen2/hf", "\"model_type\": \"internvl_vision\"", "\"model_type\": \"clip_vision_model\"",
                  "vision_config.model_type 'clip_vision_model': unknown vision tower");
}

// The family's other LLMs are refused by name, with the key and the value that ask for them.
TEST(ModelConfig, RefusesTheFamilysUnsupportedLlmsByName) {
  expect_rejected("qwen3/original", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
                  "llm_config.architectures[0] 'Qwen3MoeForCausalLM': Qwen3-MoE");
  expect_rejected("qwen3/hf", "\"model_type\": \"qwen3\"", "\"model_type\": \"qwen3_moe\"",
                  "text_config.model_type 'qwen3_moe': Qwen3-MoE");
  expect_rejected("qwen3/original", "Qwen3ForCausalLM", "GptOssForCausalLM", "GPT-OSS");
  expect_rejected("internlm2/original", "InternLM2ForCausalLM", "Phi3ForCausalLM", "'Phi3ForCausalLM': Phi-3");
  expect_rejected("internlm2/original", "InternLM2ForCausalLM", "InternLM3ForCausalLM", "InternLM3 is not supported");
}

TEST(ModelConfig, Qwen3HeadDimBiasAndRope) {
  // Qwen3Config's head_dim defaults to 128, not hidden / heads: the mapping then needs [(4 + 4) * 128, 64] rows.
  TempDir dir("qwen3_head_dim");
  copy_json("qwen3/original", dir);
  test::edit_config(dir.path().string(), [](std::string& text) {
    const size_t at = text.find("\"head_dim\": 24,");
    ASSERT_NE(at, std::string::npos);
    text.erase(at, std::string("\"head_dim\": 24,").size());
  });
  EXPECT_EQ(load_model_desc(dir.path().string()).llm.head_dim, 128);
  expect_rejected("qwen3/original", "\"attention_bias\": false", "\"attention_bias\": true", "attention_bias");
  expect_rejected("qwen3/original", "\"rope_scaling\": null",
                  "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}", "rope_scaling type 'yarn'");
  expect_rejected("qwen3/hf", "\"rope_type\": \"default\"", "\"rope_type\": \"llama3\"",
                  "rope_parameters type 'llama3'");
  expect_rejected("qwen3/original", "\"use_sliding_window\": false", "\"use_sliding_window\": true",
                  "use_sliding_window");
}

TEST(ModelConfig, RejectsOtherPixelShuffleTemplateAndNorm) {
  expect_rejected("internlm2/original", "\"ps_version\": \"v2\"", "\"ps_version\": \"v1\"", "ps_version");
  expect_rejected("internlm2/original", "\"template\": \"internlm2-chat\"", "\"template\": \"phi3-chat\"", "phi3-chat");
  expect_rejected("qwen2/hf", "\"vision_feature_layer\": -1", "\"vision_feature_layer\": -2", "vision_feature_layer");
}

TEST(ModelConfig, RejectsInconsistentSizes) {
  expect_rejected("internlm2/original", "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4",
                  "num_key_value_heads");
  expect_rejected("internlm2/original", "\"downsample_ratio\": 0.5", "\"downsample_ratio\": 0.25", "downsample_ratio");
}

TEST(ModelConfig, RejectsBadJsonAndMissingFields) {
  expect_rejected("internlm2/original", "\"template\"", "\"template\" ,,", "bad JSON");
  expect_rejected("qwen2/hf", "\"hidden_size\": 80", "\"hidden_sizes\": 80", "hidden_size");
}

// Issue 19: values above INT_MAX used to be narrowed silently (4294967360 read as 64 and the model answered).
TEST(ModelConfig, RejectsIntegersOutsideIntRange) {
  expect_rejected("internlm2/original", "\"hidden_size\": 72", "\"hidden_size\": 4294967368", "hidden_size");
  expect_rejected("internlm2/original", "\"vocab_size\": 310", "\"vocab_size\": 4294967606", "vocab_size");
  expect_rejected("internlm2/original", "\"vocab_size\": 310", "\"vocab_size\": -4294966986", "out of range");
}

// max_dynamic_patch sizes the ViT workspace: 2^31-1 overflowed (engine_load.cc, UBSan), 100000 asked for 60 GB.
TEST(ModelConfig, RejectsHugeMaxDynamicPatch) {
  expect_rejected("internlm2/original", "\"max_dynamic_patch\": 12", "\"max_dynamic_patch\": 2147483647",
                  "max_dynamic_patch");
  expect_rejected("internlm2/original", "\"max_dynamic_patch\": 12", "\"max_dynamic_patch\": 100000",
                  "over the limit");
  EXPECT_EQ(desc_error("internlm2/original", "\"max_dynamic_patch\": 12",
                       "\"max_dynamic_patch\": " + std::to_string(kMaxDynamicTiles)), "");
}

// Each used to load (or fail later with "bad workspace sizes") and answer token 0 from NaN logits.
TEST(ModelConfig, RejectsNonPositiveEpsilonsRopeAndPositions) {
  expect_rejected("internlm2/original", "\"max_position_embeddings\": 32768", "\"max_position_embeddings\": 0",
                  "max_position_embeddings");
  expect_rejected("qwen2/hf", "\"max_position_embeddings\": 32768", "\"max_position_embeddings\": -1",
                  "max_position_embeddings");
  expect_rejected("internlm2/original", "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": -1e-05", "rms_norm_eps");
  expect_rejected("internlm2/original", "\"rope_theta\": 1000000.0", "\"rope_theta\": 0", "rope_theta");
  expect_rejected("qwen2/hf", "\"rope_theta\": 1000000.0", "\"rope_theta\": -10000.0", "rope_theta");
  expect_rejected("internlm2/original", "\"layer_norm_eps\": 1e-06", "\"layer_norm_eps\": -1e-06",
                  "vision_config.layer_norm_eps");
}

TEST(ModelConfig, SpecialTokensOutsideVocabAreRejected) {
  // With vocab 300 the InternLM2 ids (302, 303, 304) from tokenizer_config.json fall outside.
  const std::string message = desc_error("internlm2/original", "\"vocab_size\": 310", "\"vocab_size\": 300");
  EXPECT_NE(message.find("outside the vocabulary"), std::string::npos) << message;
  EXPECT_NE(message.find("<img>"), std::string::npos) << message;
}

TEST(ModelConfig, MissingDirectoryOrConfig) {
  TempDir dir("noconfig");
  try {
    load_model_desc(dir.path().string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fovea

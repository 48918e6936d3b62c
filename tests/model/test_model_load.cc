// load_model on the golden checkpoints (both formats, both LLM families), sharded checkpoints, broken
// checkpoints, and the demo model round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "golden_pixels.h"
#include "model/demo_model.h"
#include "model/model_desc.h"
#include "model/safetensors.h"
#include "model/weight_check.h"
#include "model/weight_map.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace fovea {
namespace {

using test::golden_dir;
using test::TempDir;

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

void expect_identical_weights(const ModelWeights& a, const ModelWeights& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    ASSERT_TRUE(b.has(name)) << name;
    EXPECT_TRUE(same_bytes(t.load(), b.get(name)))
        << name << " differs: " << shape_str(t.shape) << " vs " << shape_str(b.get(name).shape);
  }
}

// The names model_desc.h promises, for a desc.
std::vector<std::string> canonical_names(const ModelDesc& d) {
  std::vector<std::string> names = {"vit.patch.weight", "vit.patch.bias", "vit.cls",         "vit.pos",
                                    "proj.norm.weight", "proj.norm.bias", "proj.fc1.weight", "proj.fc1.bias",
                                    "proj.fc2.weight",  "proj.fc2.bias",  "llm.embed",       "llm.norm",
                                    "llm.lm_head"};
  for (int l = 0; l < d.vision.layers; ++l) {
    std::vector<std::string> layer = {"norm1.weight", "qkv.weight", "proj.weight", "proj.bias", "ls1",
                                      "norm2.weight", "fc1.weight", "fc1.bias",    "fc2.weight", "fc2.bias", "ls2"};
    if (d.vision.norm == VitNorm::LayerNorm) layer.insert(layer.end(), {"norm1.bias", "norm2.bias"});
    if (d.vision.qkv_bias) layer.push_back("qkv.bias");
    if (d.vision.qk_norm) layer.insert(layer.end(), {"q_norm", "k_norm"});
    for (const std::string& n : layer) names.push_back("vit." + std::to_string(l) + "." + n);
  }
  for (int l = 0; l < d.llm.layers; ++l) {
    for (const char* n : {"attn_norm", "qkv.weight", "o.weight", "ffn_norm", "gate_up.weight", "down.weight"})
      names.push_back("llm." + std::to_string(l) + "." + n);
    if (d.llm.qkv_bias) names.push_back("llm." + std::to_string(l) + ".qkv.bias");
    if (d.llm.qk_norm) {
      names.push_back("llm." + std::to_string(l) + ".q_norm");
      names.push_back("llm." + std::to_string(l) + ".k_norm");
    }
  }
  return names;
}

TEST(GoldenLoad, InternLM2OriginalEqualsLlamaHf) {
  const LoadedModel orig = load_model(golden_dir() + "/internlm2/original");
  const LoadedModel hf = load_model(golden_dir() + "/internlm2/hf");
  EXPECT_EQ(orig.desc.format, CheckpointFormat::InternVLChat);
  EXPECT_EQ(hf.desc.format, CheckpointFormat::HfInternVL);
  EXPECT_EQ(orig.desc.llm.arch, LlmArch::InternLM2);
  EXPECT_EQ(hf.desc.llm.arch, LlmArch::Llama);
  expect_identical_weights(orig.weights, hf.weights);
  EXPECT_EQ(orig.weights.tensors.size(), canonical_names(orig.desc).size());
  for (const auto& name : canonical_names(orig.desc)) EXPECT_TRUE(orig.weights.has(name)) << name;
  // Not tied: a separate output matrix.
  EXPECT_FALSE(orig.desc.llm.tie_embeddings);
  EXPECT_NE(orig.weights.get("llm.lm_head").data, orig.weights.get("llm.embed").data);
}

TEST(GoldenLoad, Qwen2OriginalEqualsHfAndTiesEmbeddings) {
  const LoadedModel orig = load_model(golden_dir() + "/qwen2/original");
  const LoadedModel hf = load_model(golden_dir() + "/qwen2/hf");
  EXPECT_EQ(orig.desc.llm.arch, LlmArch::Qwen2);
  EXPECT_EQ(hf.desc.llm.arch, LlmArch::Qwen2);
  expect_identical_weights(orig.weights, hf.weights);
  for (const auto& name : canonical_names(orig.desc)) EXPECT_TRUE(orig.weights.has(name)) << name;
  EXPECT_TRUE(orig.desc.llm.tie_embeddings);
  EXPECT_EQ(orig.weights.get("llm.lm_head").data, orig.weights.get("llm.embed").data);
  EXPECT_EQ(orig.weights.get("llm.0.qkv.bias").shape, Shape{(5 + 2) * 16});
}

// InternVL2-40B/76B-shaped: InternViT-6B (RMSNorm layers, no qkv bias, q/k norm over all heads) with a Llama LLM
// that the original format also names LlamaForCausalLM.
TEST(GoldenLoad, InternViT6BOriginalEqualsHf) {
  const LoadedModel orig = load_model(golden_dir() + "/vit6b/original");
  const LoadedModel hf = load_model(golden_dir() + "/vit6b/hf");
  for (const ModelDesc* d : {&orig.desc, &hf.desc}) {
    EXPECT_EQ(d->llm.arch, LlmArch::Llama);
    EXPECT_EQ(d->vision.norm, VitNorm::RmsNorm);
    EXPECT_TRUE(d->vision.qk_norm);
    EXPECT_FALSE(d->vision.qkv_bias);
    EXPECT_FLOAT_EQ(d->vision.qk_norm_eps, 1e-6f);
    EXPECT_FLOAT_EQ(d->llm.rope_theta, 5e5f);
    EXPECT_EQ(d->chat_template, d == &orig.desc ? ChatTemplateKind::Hermes2 : ChatTemplateKind::InternVL2_5);
    EXPECT_EQ(d->bos_id, 300);  // add_bos_token with bos_token <|begin_of_text|>
    EXPECT_EQ(d->eos_ids, (std::vector<int>{303}));
  }
  expect_identical_weights(orig.weights, hf.weights);
  EXPECT_EQ(orig.weights.tensors.size(), canonical_names(orig.desc).size());
  for (const auto& name : canonical_names(orig.desc)) EXPECT_TRUE(orig.weights.has(name)) << name;
  EXPECT_EQ(orig.weights.get("vit.1.q_norm").shape, Shape{60});
  EXPECT_EQ(orig.weights.get("proj.norm.weight").shape, Shape{4 * 60});
  const SafetensorsFile hf_file(golden_dir() + "/vit6b/hf/model.safetensors");
  EXPECT_TRUE(same_bytes(orig.weights.get("vit.0.k_norm"),
                         hf_file.tensor("vision_tower.encoder.layer.0.attention.k_norm.weight")));
}

// InternVL3.5-shaped: Qwen3 with an explicit head_dim (4 heads of 24 over a hidden size of 64) and per-head q/k norm.
TEST(GoldenLoad, Qwen3OriginalEqualsHf) {
  const LoadedModel orig = load_model(golden_dir() + "/qwen3/original");
  const LoadedModel hf = load_model(golden_dir() + "/qwen3/hf");
  for (const ModelDesc* d : {&orig.desc, &hf.desc}) {
    EXPECT_EQ(d->llm.arch, LlmArch::Qwen3);
    EXPECT_TRUE(d->llm.qk_norm);
    EXPECT_FALSE(d->llm.qkv_bias);
    EXPECT_EQ(d->llm.head_dim, 24);
    EXPECT_FLOAT_EQ(d->llm.rms_eps, 1e-6f);
    EXPECT_TRUE(d->llm.tie_embeddings);
    EXPECT_EQ(d->vision.norm, VitNorm::LayerNorm);
    EXPECT_EQ(d->bos_id, -1);
    EXPECT_EQ(d->image_token_id, 287);
    EXPECT_EQ(d->eos_ids, (std::vector<int>{282, 280}));  // <|im_end|>, then <|endoftext|>
  }
  EXPECT_EQ(orig.desc.chat_template, ChatTemplateKind::InternVL2_5);
  expect_identical_weights(orig.weights, hf.weights);
  EXPECT_EQ(orig.weights.tensors.size(), canonical_names(orig.desc).size());
  EXPECT_EQ(orig.weights.get("llm.0.q_norm").shape, Shape{24});
  EXPECT_EQ(orig.weights.get("llm.0.qkv.weight").shape, (Shape{(4 + 2 * 2) * 24, 64}));
  EXPECT_EQ(orig.weights.get("llm.0.o.weight").shape, (Shape{64, 4 * 24}));
  EXPECT_EQ(orig.weights.get("llm.lm_head").data, orig.weights.get("llm.embed").data);
}

TEST(GoldenLoad, CanonicalLayoutMatchesTheHfTensors) {
  // Independent of the loader's own mapping: read the -hf file directly and check the fused layouts.
  const LoadedModel m = load_model(golden_dir() + "/internlm2/original");
  const SafetensorsFile hf(golden_dir() + "/internlm2/hf/model.safetensors");
  const std::string attn = "language_model.model.layers.1.self_attn.";
  const Tensor qkv = m.weights.get("llm.1.qkv.weight");
  ASSERT_EQ(qkv.shape, (Shape{(6 + 2 * 2) * 12, 72}));
  EXPECT_TRUE(same_bytes(qkv.rows(0, 72), hf.tensor(attn + "q_proj.weight")));
  EXPECT_TRUE(same_bytes(qkv.rows(72, 96), hf.tensor(attn + "k_proj.weight")));
  EXPECT_TRUE(same_bytes(qkv.rows(96, 120), hf.tensor(attn + "v_proj.weight")));
  const Tensor gate_up = m.weights.get("llm.0.gate_up.weight");
  EXPECT_TRUE(same_bytes(gate_up.rows(0, 200), hf.tensor("language_model.model.layers.0.mlp.gate_proj.weight")));
  EXPECT_TRUE(same_bytes(gate_up.rows(200, 400), hf.tensor("language_model.model.layers.0.mlp.up_proj.weight")));
  const Tensor patch = hf.tensor("vision_tower.embeddings.patch_embeddings.projection.weight");
  EXPECT_EQ(m.weights.get("vit.patch.weight").shape, (Shape{48, 3 * 14 * 14}));
  EXPECT_EQ(std::memcmp(m.weights.get("vit.patch.weight").data, patch.data, patch.nbytes()), 0);
  EXPECT_EQ(m.weights.get("vit.pos").shape, (Shape{1025, 48}));
  EXPECT_EQ(m.weights.get("vit.cls").shape, Shape{48});
  const Tensor vit_qkv = m.weights.get("vit.1.qkv.bias");
  EXPECT_TRUE(same_bytes(vit_qkv.rows(48, 96), hf.tensor("vision_tower.encoder.layer.1.attention.k_proj.bias")));
}

TEST(GoldenLoad, DescFieldsAndSpecialTokens) {
  const ModelDesc a = load_model_desc(golden_dir() + "/internlm2/original");
  EXPECT_EQ(a.vision.hidden, 48);
  EXPECT_EQ(a.vision.layers, 2);
  EXPECT_EQ(a.vision.heads, 3);
  EXPECT_EQ(a.vision.mlp, 100);
  EXPECT_EQ(a.vision.tokens(), 1025);
  EXPECT_EQ(a.llm.hidden, 72);
  EXPECT_EQ(a.llm.heads, 6);
  EXPECT_EQ(a.llm.kv_heads, 2);
  EXPECT_EQ(a.llm.head_dim, 12);
  EXPECT_EQ(a.llm.ffn, 200);
  EXPECT_EQ(a.llm.vocab, 310);
  EXPECT_FLOAT_EQ(a.llm.rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(a.llm.rms_eps, 1e-5f);
  EXPECT_EQ(a.chat_template, ChatTemplateKind::InternLM2Chat);
  EXPECT_EQ(a.max_dynamic_tiles, 12);
  EXPECT_TRUE(a.use_thumbnail);
  EXPECT_EQ(a.image_token_id, 304);
  EXPECT_EQ(a.img_start_id, 302);
  EXPECT_EQ(a.img_end_id, 303);
  EXPECT_EQ(a.bos_id, 1);
  EXPECT_EQ(a.eos_ids, (std::vector<int>{300, 2}));

  const ModelDesc b = load_model_desc(golden_dir() + "/internlm2/hf");
  EXPECT_EQ(b.image_token_id, 304);
  EXPECT_EQ(b.eos_ids, a.eos_ids);
  EXPECT_EQ(b.chat_template, ChatTemplateKind::InternVL2_5);

  const ModelDesc q = load_model_desc(golden_dir() + "/qwen2/original");
  EXPECT_TRUE(q.llm.qkv_bias);
  EXPECT_EQ(q.chat_template, ChatTemplateKind::Hermes2);
  EXPECT_EQ(q.image_token_id, 285);
  EXPECT_EQ(q.img_start_id, 283);
  EXPECT_EQ(q.bos_id, -1);
  EXPECT_EQ(q.eos_ids, (std::vector<int>{282, 280}));
  const ModelDesc qh = load_model_desc(golden_dir() + "/qwen2/hf");
  EXPECT_EQ(qh.image_token_id, 285);
  EXPECT_EQ(qh.eos_ids, q.eos_ids);
}

TEST(GoldenLoad, ShardedCheckpointLoadsTheSame) {
  TempDir dir("shards");
  const std::string src = golden_dir() + "/internlm2/original";
  test::copy_checkpoint(src, dir.path().string(), [](std::vector<NamedTensor>&) {});
  const SafetensorsFile all(dir.file("model.safetensors"));
  std::vector<NamedTensor> first, second;
  std::string weight_map;
  for (const auto& name : all.names()) {
    const bool vision = name.rfind("vision_model.", 0) == 0;
    (vision ? first : second).push_back({name, all.tensor(name)});
    weight_map += (weight_map.empty() ? "" : ",") + std::string("\"") + name + "\":\"" +
                  (vision ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors") + "\"";
  }
  write_safetensors(dir.file("model-00001-of-00002.safetensors"), first);
  write_safetensors(dir.file("model-00002-of-00002.safetensors"), second);
  dir.write("model.safetensors.index.json", "{\"weight_map\":{" + weight_map + "}}");
  std::filesystem::remove(dir.file("model.safetensors"));
  expect_identical_weights(load_model(dir.path().string()).weights, load_model(src).weights);
}

TEST(GoldenPixels, DecodeMatchesThePythonValues) {
  // Values printed by tools/golden/make_golden.py's make_pixels() for these indices.
  const Tensor all = test::golden_pixel_values(golden_dir(), {0, 1, 2, 3});
  auto at = [&](int t, int c, int y, int x) { return all.ptr<float>()[((t * 3 + c) * 448 + y) * 448 + x]; };
  EXPECT_EQ(at(0, 0, 0, 0), 1.75f);
  EXPECT_EQ(at(0, 0, 0, 1), -1.25f);
  EXPECT_EQ(at(3, 1, 100, 201), 1.5f);
  EXPECT_EQ(at(2, 2, 447, 447), 1.5f);
  EXPECT_EQ(at(1, 0, 13, 14), -1.5f);
  double sum = 0;
  for (int64_t i = 0; i < all.numel(); ++i) sum += all.ptr<float>()[i];
  EXPECT_EQ(sum, -302794.5);
  const Tensor t1 = test::golden_pixel_values(golden_dir(), {3});
  EXPECT_EQ(t1.ptr<float>()[(1 * 448 + 100) * 448 + 201], 1.5f);
}

TEST(BadCheckpoint, MissingTensorNamesFileAndTensor) {
  TempDir dir("missing");
  test::copy_checkpoint(golden_dir() + "/internlm2/original", dir.path().string(), [](auto& tensors) {
    std::erase_if(tensors,
                  [](const NamedTensor& t) { return t.name == "language_model.model.layers.1.ffn_norm.weight"; });
  });
  const std::string message = error_of([&] { load_model(dir.path().string()); });
  EXPECT_NE(message.find("language_model.model.layers.1.ffn_norm.weight"), std::string::npos) << message;
  EXPECT_NE(message.find(dir.file("model.safetensors")), std::string::npos) << message;
}

// A checkpoint whose tensors disagree with its config's InternViT-6B / Qwen3 settings is refused at load, naming
// the file and the tensor the config asks for (or its wrong shape); nothing reaches a backend.
TEST(BadCheckpoint, TensorsThatDisagreeWithTheFamilySettings) {
  struct Case {
    const char* src;
    const char* from;
    const char* to;
    std::vector<std::string> mention;
  };
  const Case cases[] = {
      // A 300M checkpoint (no q/k norm tensors) whose config asks for InternViT-6B's q/k norm.
      {"internlm2/original", "\"qk_normalization\": false", "\"qk_normalization\": true",
       {"vision_model.encoder.layers.0.attn.q_norm.weight", "model.safetensors"}},
      {"qwen2/hf", "\"use_qk_norm\": false", "\"use_qk_norm\": true",
       {"vision_tower.encoder.layer.0.attention.q_norm.weight"}},
      // A 6B checkpoint (RMSNorm, no bias) whose config says LayerNorm.
      {"vit6b/original", "\"norm_type\": \"rms_norm\"", "\"norm_type\": \"layer_norm\"",
       {"vision_model.encoder.layers.0.norm1.bias"}},
      // Qwen3 tensors of head_dim 24 under a config saying 32.
      {"qwen3/original", "\"head_dim\": 24", "\"head_dim\": 32",
       {"language_model.model.layers.0.self_attn.q_proj.weight", "[128, 64]"}},
      // A Qwen3 config over a Qwen2 checkpoint: no q_norm.
      {"qwen2/original", "Qwen2ForCausalLM", "Qwen3ForCausalLM", {"language_model.model.layers.0.self_attn"}},
  };
  for (const Case& c : cases) {
    TempDir dir("family_mismatch");
    test::copy_checkpoint(golden_dir() + "/" + c.src, dir.path().string(), [](auto&) {});
    test::edit_config(dir.path().string(), [&](std::string& text) {
      const size_t at = text.find(c.from);
      ASSERT_NE(at, std::string::npos) << c.from;
      text.replace(at, std::string(c.from).size(), c.to);
    });
    const std::string message = error_of([&] { load_model(dir.path().string()); });
    for (const std::string& part : c.mention)
      EXPECT_NE(message.find(part), std::string::npos) << c.src << " " << c.to << ": " << message;
  }
}

// The config's layer counts against the tensors: a checkpoint with more layers than its config says is refused
// naming the first extra tensor, its file and the config key with its value (it would otherwise run the first
// layers only, silently); one with fewer is refused naming the first missing tensor. Both at load_model, which
// reads headers only, before any weight is read.
TEST(BadCheckpoint, LayerCountsThatDisagreeWithTheConfig) {
  struct Case {
    const char* src;
    const char* section;
    int layers;
    std::vector<std::string> mention;
  };
  const Case cases[] = {
      {"internlm2/original", "llm_config", 1,
       {"language_model.model.layers.1.", "llm_config.num_hidden_layers is 1", "model.safetensors",
        "more layers than its config"}},
      {"internlm2/original", "vision_config", 1,
       {"vision_model.encoder.layers.1.", "vision_config.num_hidden_layers is 1", "more layers than its config"}},
      {"qwen2/hf", "text_config", 1, {"language_model.", "layers.1.", "text_config.num_hidden_layers is 1"}},
      {"qwen2/hf", "vision_config", 1, {"vision_tower.encoder.layer.1.", "vision_config.num_hidden_layers is 1"}},
      // Fewer layers in the checkpoint than the config: the missing layer's first tensor, and its file.
      {"internlm2/original", "llm_config", 3, {"language_model.model.layers.2.", "model.safetensors"}},
      {"qwen2/hf", "vision_config", 3, {"vision_tower.encoder.layer.2."}},
  };
  for (const Case& c : cases) {
    TempDir dir("layer_count");
    test::copy_checkpoint(golden_dir() + "/" + c.src, dir.path().string(), [](auto&) {});
    test::edit_config(dir.path().string(), [&](std::string& text) {
      nlohmann::json config = nlohmann::json::parse(text);
      ASSERT_EQ(config[c.section]["num_hidden_layers"], 2) << c.src << " " << c.section;
      config[c.section]["num_hidden_layers"] = c.layers;
      text = config.dump(1);
    });
    const std::string message = error_of([&] { load_model(dir.path().string()); });
    for (const std::string& part : c.mention)
      EXPECT_NE(message.find(part), std::string::npos) << c.src << " " << c.section << " " << c.layers << ": " << message;
  }
}

// A tensor of an absurd layer number (a corrupt or hostile header) is refused, not parsed into an overflow.
TEST(BadCheckpoint, HugeLayerNumbersAreRefused) {
  TempDir dir("huge_layer");
  test::copy_checkpoint(golden_dir() + "/internlm2/original", dir.path().string(), [](auto& tensors) {
    tensors.push_back({"language_model.model.layers.99999999999999999999.ffn_norm.weight", test::f32_tensor({4}, 0)});
  });
  const std::string message = error_of([&] { load_model(dir.path().string()); });
  EXPECT_NE(message.find("more layers than its config"), std::string::npos) << message;
  EXPECT_NE(message.find("llm_config.num_hidden_layers is 2"), std::string::npos) << message;
}

TEST(BadCheckpoint, WrongShapeNamesFileAndTensor) {
  TempDir dir("shape");
  test::copy_checkpoint(golden_dir() + "/qwen2/original", dir.path().string(), [](auto& tensors) {
    for (auto& t : tensors)
      if (t.name == "vision_model.encoder.layers.0.mlp.fc1.weight") t.tensor = t.tensor.view({50, 96});
  });
  const std::string message = error_of([&] { load_model(dir.path().string()); });
  EXPECT_NE(message.find("vision_model.encoder.layers.0.mlp.fc1.weight"), std::string::npos) << message;
  EXPECT_NE(message.find(dir.file("model.safetensors")), std::string::npos) << message;
  EXPECT_NE(message.find("[50, 96]"), std::string::npos) << message;
}

// Issue 19: a checkpoint with NaN weights loaded and answered token 0 without an error. (The runner reads each
// weight through this check: tests/runtime/test_streaming_load.cc.)
TEST(BadCheckpoint, NonFiniteWeightsAreRefusedByName) {
  TempDir dir("nan");
  const std::string victim = "language_model.model.layers.1.feed_forward.w2.weight";
  test::copy_checkpoint(golden_dir() + "/internlm2/original", dir.path().string(), [&](auto& tensors) {
    for (auto& t : tensors) {
      if (t.name != victim) continue;
      Tensor copy = Tensor::host(t.tensor.dtype, t.tensor.shape);
      std::memcpy(copy.data, t.tensor.data, t.tensor.nbytes());
      // All-ones bytes are a NaN in every float dtype; put it in the middle, where a sampled check could miss it.
      std::memset(static_cast<char*>(copy.data) + copy.nbytes() / 2, 0xff, dtype_size(copy.dtype));
      t.tensor = copy;
    }
  });
  // Loading describes the weights from the headers; the values are read (and checked) when a weight is read.
  const LoadedModel m = load_model(dir.path().string());
  const std::string message = error_of([&] { check_weights_finite(m.weights, dir.path().string()); });
  EXPECT_NE(message.find("NaN or infinite"), std::string::npos) << message;
  EXPECT_NE(message.find("llm.1.down.weight"), std::string::npos) << message;
  check_tensor_finite("llm.0.down.weight", m.weights.get("llm.0.down.weight"), dir.path().string());  // no throw
}

TEST(WeightCheck, CountsNanAndInfinityInEveryFloatDtype) {
  struct Case { DType dtype; std::vector<uint8_t> bytes; int64_t bad; };
  const std::vector<Case> cases = {
      {DType::F32, {0, 0, 0x80, 0x7f, 0, 0, 0xc0, 0xff, 0xff, 0xff, 0x7f, 0x7f}, 2},  // +inf, -nan, max finite
      {DType::BF16, {0x80, 0x7f, 0x7f, 0x7f, 0xc1, 0xff}, 2},                           // +inf, max, -nan
      {DType::F16, {0x00, 0x7c, 0xff, 0x7b, 0x01, 0xfe}, 2},                           // +inf, max, -nan
      {DType::F8E4M3, {0x7f, 0x7e, 0xff, 0x00}, 2},                                    // nan, 448, -nan, 0
  };
  for (const Case& c : cases) {
    Tensor t = Tensor::host(c.dtype, {int64_t(c.bytes.size() / dtype_size(c.dtype))});
    std::memcpy(t.data, c.bytes.data(), c.bytes.size());
    EXPECT_EQ(count_non_finite(t), c.bad) << dtype_name(c.dtype);
  }
}

// Issue 19: shard names with "../" in model.safetensors.index.json were followed outside the model directory.
TEST(BadCheckpoint, ShardPathsOutsideTheModelDirectoryAreRefused) {
  TempDir dir("escape");
  const std::string src = golden_dir() + "/internlm2/original";
  const std::filesystem::path model = dir.path() / "model";
  std::filesystem::create_directories(model);
  test::copy_checkpoint(src, model.string(), [](std::vector<NamedTensor>&) {});
  // The weights sit one level up; the index points at them with "../" (and, separately, an absolute path).
  std::filesystem::rename(model / "model.safetensors", dir.path() / "outside.safetensors");
  const SafetensorsFile all(dir.file("outside.safetensors"));
  for (const std::string& shard :
       std::vector<std::string>{"../outside.safetensors", (dir.path() / "outside.safetensors").string()}) {
    std::string weight_map;
    for (const auto& name : all.names())
      weight_map += (weight_map.empty() ? "" : ",") + std::string("\"") + name + "\":\"" + shard + "\"";
    dir.write("model/model.safetensors.index.json", "{\"weight_map\":{" + weight_map + "}}");
    const std::string message = error_of([&] { load_model(model.string()); });
    EXPECT_NE(message.find("not a file inside the model directory"), std::string::npos) << message;
  }
}

TEST(BadCheckpoint, UntiedModelWithoutLmHead) {
  TempDir dir("nohead");
  test::copy_checkpoint(golden_dir() + "/internlm2/original", dir.path().string(), [](auto& tensors) {
    std::erase_if(tensors, [](const NamedTensor& t) { return t.name == "language_model.output.weight"; });
  });
  const std::string message = error_of([&] { load_model(dir.path().string()); });
  EXPECT_NE(message.find("language_model.output.weight"), std::string::npos) << message;
}

// A config naming fewer LLM layers than the checkpoint holds used to load and silently skip the rest.
TEST(BadCheckpoint, FewerLayersInTheConfigThanInTheWeights) {
  TempDir dir("fewer_layers");
  test::copy_checkpoint(golden_dir() + "/internlm2/original", dir.path().string(), [](auto&) {});
  bool edited = false;
  test::edit_config(dir.path().string(), [&](std::string& text) {
    const std::string llm = "\"llm_config\"";
    const size_t at = text.find("\"num_hidden_layers\": 2", text.find(llm));
    ASSERT_NE(at, std::string::npos);
    text.replace(at, 22, "\"num_hidden_layers\": 1");
    edited = true;
  });
  ASSERT_TRUE(edited);
  const std::string message = error_of([&] { load_model(dir.path().string()); });
  EXPECT_NE(message.find("num_hidden_layers is 1"), std::string::npos) << message;
  EXPECT_NE(message.find("language_model.model.layers.1."), std::string::npos) << message;
}

// bos/eos ids that config.json states outside the vocabulary are refused, naming the key and the value.
TEST(BadCheckpoint, BosOrEosOutsideTheVocabulary) {
  for (const char* edit : {"\"eos_token_id\": 2", "\"bos_token_id\": 1"}) {
    TempDir dir("bad_special_ids");
    test::copy_checkpoint(golden_dir() + "/internlm2/original", dir.path().string(), [](auto&) {});
    const std::string key = std::string(edit).substr(0, std::string(edit).find(':'));
    test::edit_config(dir.path().string(), [&](std::string& text) {
      const size_t at = text.find(edit);
      ASSERT_NE(at, std::string::npos) << edit;
      text.replace(at, std::string(edit).size(), key + ": 99999");
    });
    const std::string message = error_of([&] { load_model(dir.path().string()); });
    EXPECT_NE(message.find(key.substr(1, key.size() - 2) + " 99999 is outside the vocabulary"), std::string::npos)
        << message;
  }
}

TEST(WeightMap, RegroupsInternLM2Wqkv) {
  LlmConfig l;
  l.heads = 4, l.kv_heads = 2, l.head_dim = 1, l.hidden = 1;
  // Rows grouped per KV head: [q0 q1 k0 v0 | q2 q3 k1 v1], one row per head (head_dim 1).
  Tensor wqkv = Tensor::host(DType::F32, {8, 1});
  const float grouped[] = {0, 1, 10, 20, 2, 3, 11, 21};
  std::memcpy(wqkv.data, grouped, sizeof grouped);
  const Tensor out = regroup_internlm2_wqkv(wqkv, l);
  const float expected[] = {0, 1, 2, 3, 10, 11, 20, 21};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out.ptr<float>()[i], expected[i]) << i;
}

TEST(DemoModel, WritesAndLoadsBack) {
  TempDir dir("demo");
  write_demo_model(dir.path().string(), 0);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model", "tokenizer_config.json", "README.txt"})
    EXPECT_TRUE(std::filesystem::exists(dir.file(f))) << f;
  const LoadedModel m = load_model(dir.path().string());
  const ModelDesc& d = m.desc;
  EXPECT_EQ(d.format, CheckpointFormat::InternVLChat);
  EXPECT_EQ(d.llm.arch, LlmArch::InternLM2);
  EXPECT_EQ(d.chat_template, ChatTemplateKind::InternLM2Chat);
  EXPECT_EQ(d.max_dynamic_tiles, 12);
  EXPECT_TRUE(d.use_thumbnail);
  EXPECT_EQ(d.vision.image_size, 448);
  EXPECT_EQ(d.vision.patch_size, 14);
  EXPECT_EQ(d.vision.hidden, 64);
  EXPECT_EQ(d.vision.heads, 4);
  EXPECT_EQ(d.vision.mlp, 128);
  EXPECT_EQ(d.llm.hidden, 64);
  EXPECT_EQ(d.llm.heads, 4);
  EXPECT_EQ(d.llm.kv_heads, 2);
  EXPECT_EQ(d.llm.ffn, 176);
  EXPECT_EQ(d.llm.layers, 2);

  const auto tokenizer = load_tokenizer(dir.path().string());
  EXPECT_EQ(d.llm.vocab, tokenizer->vocab_size());
  EXPECT_EQ(d.image_token_id, tokenizer->token_id("<IMG_CONTEXT>"));
  EXPECT_EQ(d.img_start_id, tokenizer->token_id("<img>"));
  EXPECT_EQ(d.img_end_id, tokenizer->token_id("</img>"));
  EXPECT_EQ(d.eos_ids, (std::vector<int>{tokenizer->token_id("<|im_end|>"), tokenizer->token_id("</s>")}));

  for (const auto& [name, t] : m.weights.tensors) {
    EXPECT_EQ(t.dtype, DType::BF16) << name;
    const Tensor f = t.load().to_f32();
    double sum_sq = 0;
    for (int64_t i = 0; i < f.numel(); ++i) {
      ASSERT_TRUE(std::isfinite(f.ptr<float>()[i])) << name;
      sum_sq += double(f.ptr<float>()[i]) * f.ptr<float>()[i];
    }
    if (name.find("weight") != std::string::npos && name.find("norm") == std::string::npos && f.numel() > 1000) {
      const double std = std::sqrt(sum_sq / double(f.numel()));
      EXPECT_NEAR(std, 0.02, 0.004) << name;  // N(0, 0.02) matrices
    }
  }
  EXPECT_EQ(m.weights.get("llm.norm").to_f32().ptr<float>()[5], 1.0f);
}

TEST(DemoModel, DeterministicPerSeed) {
  TempDir a("demo_a"), b("demo_b"), c("demo_c");
  write_demo_model(a.path().string(), 7);
  write_demo_model(b.path().string(), 7);
  write_demo_model(c.path().string(), 8);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model", "tokenizer_config.json"})
    EXPECT_EQ(test::read_bytes(a.file(f)), test::read_bytes(b.file(f))) << f;
  EXPECT_NE(test::read_bytes(a.file("model.safetensors")), test::read_bytes(c.file("model.safetensors")));
}

}  // namespace
}  // namespace fovea

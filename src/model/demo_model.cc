#include "model/demo_model.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/safetensors_writer.h"
#include "model/w4_pack.h"
#include "tokenizer/demo_tokenizer.h"

namespace fovea {
namespace fs = std::filesystem;
namespace {

using S = DemoModelShape;
constexpr int kImage = 448, kPatch = 14;

// splitmix64 and an Irwin-Hall normal (sum of 4 uniforms): integer and + - * only, so the same seed gives the
// same bits on every machine (no libm in the loop).
class DemoRng {
 public:
  explicit DemoRng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x1234567ull) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float normal() {
    float sum = 0.0f;
    for (int i = 0; i < 4; ++i) sum += float(next() >> 40) * (1.0f / 16777216.0f);
    return (sum - 2.0f) * 1.7320508f;  // variance 4/12 -> 1
  }

 private:
  uint64_t state_;
};

// Act-order's g_idx: the rows of a random permutation, grouped `group` at a time in permutation order (GPTQ
// quantizes columns in descending activation order and stores each row's group; any order is valid).
std::vector<int32_t> shuffled_groups(DemoRng& rng, int64_t rows, int64_t group) {
  std::vector<int64_t> perm(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) perm[size_t(i)] = i;
  for (int64_t i = rows - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[size_t(rng.next() % uint64_t(i + 1))]);
  std::vector<int32_t> g_idx(static_cast<size_t>(rows));
  for (int64_t p = 0; p < rows; ++p) g_idx[size_t(perm[size_t(p)])] = int32_t(p / group);
  return g_idx;
}

struct Writer {
  DemoRng rng;
  std::vector<NamedTensor> tensors;
  WeightQuantMethod quantize = WeightQuantMethod::None;
  DemoRng order_rng{0};  // act-order permutations; separate so the weights stay those of the dense demo

  void add(const std::string& name, Shape shape, float mean, float std) {
    Tensor t = Tensor::host(DType::BF16, std::move(shape));
    uint16_t* p = t.ptr<uint16_t>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = f32_to_bf16(mean + std * rng.normal());
    tensors.push_back({name, std::move(t)});
  }
  void matrix(const std::string& name, Shape shape) { add(name, std::move(shape), 0.0f, 0.02f); }
  // An LLM linear "<prefix>.weight" [out, in]: dense, or the same values packed to 4 bits.
  void linear(const std::string& prefix, int64_t out, int64_t in) {
    matrix(prefix + ".weight", {out, in});
    if (quantize == WeightQuantMethod::None) return;
    const Tensor dense = tensors.back().tensor.to_f32();
    tensors.pop_back();
    const int64_t group = DemoModelShape::kQuantGroup;
    PackedW4Linear packed;
    if (quantize == WeightQuantMethod::Awq) {
      packed = pack_awq(dense.ptr<float>(), out, in, group);
    } else {
      packed = pack_gptq(dense.ptr<float>(), out, in, shuffled_groups(order_rng, in, group), in / group, true);
    }
    tensors.push_back({prefix + ".qweight", packed.qweight});
    tensors.push_back({prefix + ".qzeros", packed.qzeros});
    tensors.push_back({prefix + ".scales", packed.scales});
    if (!packed.g_idx.empty()) tensors.push_back({prefix + ".g_idx", packed.g_idx});
  }
  void bias(const std::string& name, int64_t n) { add(name, {n}, 0.0f, 0.02f); }
  void norm(const std::string& name, int64_t n) { add(name, {n}, 1.0f, 0.0f); }
};

void add_vision(Writer& w) {
  const int64_t c = S::kVisionHidden, m = S::kVisionMlp, grid = kImage / kPatch;
  w.add("vision_model.embeddings.class_embedding", {1, 1, c}, 0.0f, 0.02f);
  w.matrix("vision_model.embeddings.patch_embedding.weight", {c, 3, kPatch, kPatch});
  w.bias("vision_model.embeddings.patch_embedding.bias", c);
  w.add("vision_model.embeddings.position_embedding", {1, grid * grid + 1, c}, 0.0f, 0.02f);
  for (int l = 0; l < S::kVisionLayers; ++l) {
    const std::string b = "vision_model.encoder.layers." + std::to_string(l) + ".";
    w.matrix(b + "attn.qkv.weight", {3 * c, c});
    w.bias(b + "attn.qkv.bias", 3 * c);
    w.matrix(b + "attn.proj.weight", {c, c});
    w.bias(b + "attn.proj.bias", c);
    w.matrix(b + "mlp.fc1.weight", {m, c});
    w.bias(b + "mlp.fc1.bias", m);
    w.matrix(b + "mlp.fc2.weight", {c, m});
    w.bias(b + "mlp.fc2.bias", c);
    w.norm(b + "norm1.weight", c);
    w.bias(b + "norm1.bias", c);
    w.norm(b + "norm2.weight", c);
    w.bias(b + "norm2.bias", c);
    w.add(b + "ls1", {c}, 0.1f, 0.0f);  // InternViT's layer-scale init
    w.add(b + "ls2", {c}, 0.1f, 0.0f);
  }
  const int64_t in = 4 * c, h = S::kLlmHidden;
  w.norm("mlp1.0.weight", in);
  w.bias("mlp1.0.bias", in);
  w.matrix("mlp1.1.weight", {h, in});
  w.bias("mlp1.1.bias", h);
  w.matrix("mlp1.3.weight", {h, h});
  w.bias("mlp1.3.bias", h);
}

void add_llm(Writer& w, int vocab) {
  const int64_t h = S::kLlmHidden, d = h / S::kLlmHeads, f = S::kLlmFfn;
  w.matrix("language_model.model.tok_embeddings.weight", {vocab, h});
  for (int l = 0; l < S::kLlmLayers; ++l) {
    const std::string b = "language_model.model.layers." + std::to_string(l) + ".";
    w.linear(b + "attention.wqkv", (S::kLlmHeads + 2 * S::kLlmKvHeads) * d, h);
    w.linear(b + "attention.wo", h, h);
    w.linear(b + "feed_forward.w1", f, h);
    w.linear(b + "feed_forward.w3", f, h);
    w.linear(b + "feed_forward.w2", h, f);
    w.norm(b + "attention_norm.weight", h);
    w.norm(b + "ffn_norm.weight", h);
  }
  w.norm("language_model.model.norm.weight", h);
  w.matrix("language_model.output.weight", {vocab, h});
}

// The keys AutoAWQ / LMDeploy (awq) and transformers' GPTQConfig (gptq) write; see model/quantization.cc.
nlohmann::ordered_json demo_quantization_config(WeightQuantMethod method) {
  if (method == WeightQuantMethod::Awq)
    return {{"quant_method", "awq"},
            {"version", "gemm"},
            {"bits", 4},
            {"group_size", S::kQuantGroup},
            {"zero_point", true}};
  return {{"quant_method", "gptq"},     {"bits", 4},   {"group_size", S::kQuantGroup},
          {"desc_act", true},           {"sym", true}, {"true_sequential", true},
          {"checkpoint_format", "gptq"}};
}

nlohmann::ordered_json demo_config(int vocab, WeightQuantMethod quantize) {
  nlohmann::ordered_json vision = {{"architectures", {"InternVisionModel"}},
                                   {"model_type", "intern_vit_6b"},
                                   {"hidden_size", S::kVisionHidden},
                                   {"num_hidden_layers", S::kVisionLayers},
                                   {"num_attention_heads", S::kVisionHeads},
                                   {"intermediate_size", S::kVisionMlp},
                                   {"image_size", kImage},
                                   {"patch_size", kPatch},
                                   {"layer_norm_eps", 1e-6},
                                   {"norm_type", "layer_norm"},
                                   {"qkv_bias", true},
                                   {"qk_normalization", false},
                                   {"hidden_act", "gelu"}};
  nlohmann::ordered_json llm = {{"architectures", {"InternLM2ForCausalLM"}},
                                {"model_type", "internlm2"},
                                {"hidden_size", S::kLlmHidden},
                                {"num_hidden_layers", S::kLlmLayers},
                                {"num_attention_heads", S::kLlmHeads},
                                {"num_key_value_heads", S::kLlmKvHeads},
                                {"intermediate_size", S::kLlmFfn},
                                {"vocab_size", vocab},
                                {"rms_norm_eps", 1e-5},
                                {"rope_theta", 1000000.0},
                                {"max_position_embeddings", 32768},
                                {"hidden_act", "silu"},
                                {"bias", false},
                                {"tie_word_embeddings", false},
                                {"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}},
                                {"bos_token_id", 1},
                                {"eos_token_id", 2}};
  if (quantize == WeightQuantMethod::Awq) llm["quantization_config"] = demo_quantization_config(quantize);
  nlohmann::ordered_json config = {{"architectures", {"InternVLChatModel"}},
                                   {"model_type", "internvl_chat"},
                                   {"template", "internlm2-chat"},
                                   {"downsample_ratio", 0.5},
                                   {"dynamic_image_size", true},
                                   {"force_image_size", kImage},
                                   {"max_dynamic_patch", 12},
                                   {"min_dynamic_patch", 1},
                                   {"use_thumbnail", true},
                                   {"ps_version", "v2"},
                                   {"select_layer", -1},
                                   {"torch_dtype", "bfloat16"},
                                   {"llm_config", llm},
                                   {"vision_config", vision}};
  if (quantize == WeightQuantMethod::Gptq) config["quantization_config"] = demo_quantization_config(quantize);
  return config;
}

// Real InternVL2 checkpoints list their special tokens here; the loader reads the ids from this file.
nlohmann::ordered_json demo_tokenizer_config(const DemoTokenizerIds& ids) {
  nlohmann::ordered_json decoder = nlohmann::ordered_json::object();
  const std::pair<int, const char*> tokens[] = {{ids.bos, "<s>"},
                                                {ids.eos, "</s>"},
                                                {ids.im_end, "<|im_end|>"},
                                                {ids.im_start, "<|im_start|>"},
                                                {ids.img_start, "<img>"},
                                                {ids.img_end, "</img>"},
                                                {ids.img_context, "<IMG_CONTEXT>"}};
  for (const auto& [id, content] : tokens) {
    FOVEA_CHECK(id >= 0, "demo tokenizer has no ", content);
    decoder[std::to_string(id)] = {{"content", content}, {"special", true}};
  }
  return {{"tokenizer_class", "InternLM2Tokenizer"}, {"added_tokens_decoder", decoder}};
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  FOVEA_CHECK(out.good(), "cannot write ", path.string());
}

constexpr const char* kReadme =
    "Fovea demo model\n"
    "================\n\n"
    "A tiny InternVL2-format checkpoint written by `fovea make-demo-model`. The weights are RANDOM\n"
    "(deterministic from the seed): the model runs every code path of InternVL2 (InternViT, pixel shuffle,\n"
    "projector, InternLM2 with grouped wqkv) but its answers are meaningless.\n\n"
    "vision: image 448, patch 14, hidden 64, 2 layers, 4 heads, mlp 128\n"
    "LLM (InternLM2): hidden 64, 2 layers, 4 heads, 2 KV heads, ffn 176, vocab = the demo tokenizer's\n"
    "weights: bf16, model.safetensors; tokenizer: tokenizer.model (demo SentencePiece BPE)\n";

}  // namespace

void write_demo_model(const std::string& dir, uint64_t seed, WeightQuantMethod quantize) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  FOVEA_CHECK(fs::is_directory(dir), "cannot create directory ", dir, ec ? ": " + ec.message() : "");
  const fs::path root(dir);
  const DemoTokenizerIds ids = write_demo_sentencepiece_model((root / "tokenizer.model").string());
  FOVEA_CHECK(ids.vocab_size > 0, "demo tokenizer reports an empty vocabulary");

  Writer w{DemoRng(seed), {}, quantize, DemoRng(seed + 0x5eed)};
  add_vision(w);
  add_llm(w, ids.vocab_size);
  write_safetensors((root / "model.safetensors").string(), w.tensors, {{"format", "pt"}});
  write_text(root / "config.json", demo_config(ids.vocab_size, quantize).dump(2) + "\n");
  write_text(root / "tokenizer_config.json", demo_tokenizer_config(ids).dump(2) + "\n");
  std::string readme = kReadme;
  if (quantize != WeightQuantMethod::None)
    readme += "quantized: the LLM layers' linears are 4-bit " +
              std::string(quantize == WeightQuantMethod::Awq ? "AWQ" : "GPTQ") + " (round-to-nearest, group " +
              std::to_string(S::kQuantGroup) + "), see quantization_config\n";
  write_text(root / "README.txt", readme);
}

}  // namespace fovea

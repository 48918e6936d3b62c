#include "runtime/dummy_weights.h"

#include <cmath>
#include <regex>

#include "backend/w4_layout.h"
#include "runtime/weights.h"

namespace fovea {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class ConfigSource : public WeightSource {
 public:
  ConfigSource(const ModelDesc& desc, const ConfigWeights& options) : desc_(desc), options_(options) {}

  bool has(const std::string& name) const override {
    if (ends_with(name, ".qkv.bias")) return name.rfind("vit.", 0) == 0 ? desc_.vision.qkv_bias : desc_.llm.qkv_bias;
    if (ends_with(name, ".weight") && has_w4(name.substr(0, name.size() - 7))) return false;
    return true;
  }

  bool has_w4(const std::string& linear) const override {
    if (!options_.w4) return false;
    const int64_t k = llm_projection_inputs(linear);
    return k > 0 && k % group_for(k) == 0 && k % w4::kChunkColumns == 0;
  }

  W4Info w4_info(const std::string& linear, const Shape& dense_shape) const override {
    FOVEA_CHECK(has_w4(linear), "weight ", linear, " is not 4-bit");
    return {group_for(dense_shape[1]), false};
  }

  const void* storage_key(const std::string& name) const override {
    const bool tied = desc_.llm.tie_embeddings && (name == "llm.lm_head" || name == "llm.embed");
    return tied ? &tied_embedding_ : nullptr;
  }

  void write_dense(const std::string&, Tensor&, Backend&) override {}
  void write_fp8(const std::string&, Fp8Linear&, Backend&) override {}
  void write_w4(const std::string&, W4Weight&, Backend&) override {}

 protected:
  // The input width of LLM projection `linear` ("llm.L.qkv" / o / gate_up / down), 0 for any other name.
  int64_t llm_projection_inputs(const std::string& linear) const {
    static const std::regex kProjection(R"(llm\.\d+\.(qkv|o|gate_up|down))");
    std::smatch m;
    if (!std::regex_match(linear, m, kProjection)) return 0;
    const LlmConfig& l = desc_.llm;
    if (m[1] == "o") return int64_t(l.heads) * l.head_dim;
    if (m[1] == "down") return l.ffn;
    return l.hidden;
  }
  int64_t group_for(int64_t k) const { return options_.w4_group > 0 ? options_.w4_group : k; }

  const ModelDesc& desc() const { return desc_; }
  const ConfigWeights& options() const { return options_; }

 private:
  ModelDesc desc_;
  ConfigWeights options_;
  char tied_embedding_ = 0;  // its address is the embedding's storage key
};

// Random values whose scale keeps activations finite and alive through any depth: every matrix [N, K] (linears,
// embeddings, position embeddings, the patch embedding) has std 1/sqrt(K) (fan-in scaling), so a linear's output
// has its input's scale and the pre-norm residual stream grows additively with depth, not geometrically; norm gains
// are 1 +- 10%, layer scales 0.1 +- 10% (InternViT's init), biases and the CLS token have std 0.02. Uniform
// distributions (what fill_random makes); FP8 codes are uniform over +-448 with a per-tensor scale, 4-bit codes
// uniform over 0..15 around a zero point of 8 with one scale, both giving the dense weights' std.
class DummySource final : public ConfigSource {
 public:
  using ConfigSource::ConfigSource;

  void write_dense(const std::string& name, Tensor& dst, Backend& backend) override {
    RandomFill fill = fill_for(name);
    if (dst.rank() >= 2) {
      uniform(&fill, 0.f, matrix_std(dst.shape));
    } else if (ends_with(name, "bias") || name == "vit.cls") {
      uniform(&fill, 0.f, 0.02f);
    } else if (ends_with(name, "ls1") || ends_with(name, "ls2")) {
      uniform(&fill, 0.1f, 0.01f / std::sqrt(3.f));
    } else {  // norm gains (LayerNorm, RMSNorm, q/k norms): 1 +- 10%
      uniform(&fill, 1.f, 0.1f / std::sqrt(3.f));
    }
    backend.fill_random(dst, fill);
  }

  void write_fp8(const std::string& name, Fp8Linear& dst, Backend& backend) override {
    RandomFill codes = fill_for(name + "#fp8.codes");
    codes.offset = -kE4M3Max;
    codes.scale = 2 * kE4M3Max;
    backend.fill_random(dst.codes, codes);
    RandomFill scale = fill_for(name + "#fp8.scale");
    scale.offset = matrix_std(dst.codes.shape) / (kE4M3Max / std::sqrt(3.f));  // uniform codes have rms 448/sqrt(3)
    scale.scale = 0;
    backend.fill_random(dst.scale, scale);
  }

  void write_w4(const std::string& linear, W4Weight& dst, Backend& backend) override {
    backend.fill_random(dst.codes, fill_for(linear + "#w4.codes"));  // all 32 bits: every code uniform in 0..15
    // q - 8 for q uniform in 0..15 has rms sqrt(21.5).
    const float s = matrix_std({dst.n(), dst.k}) / std::sqrt(21.5f);
    RandomFill params = fill_for(linear + "#w4.params");
    params.bits_and = 0;
    params.bits_or = w4::make_param(f32_to_f16(s), /*scale_is_bf16=*/false, /*zero=*/8);
    backend.fill_random(dst.params, params);
  }

 private:
  static float matrix_std(const Shape& shape) { return 1.f / std::sqrt(float(shape.back())); }
  // Uniform with this mean and std: [mean - std sqrt(3), mean + std sqrt(3)).
  static void uniform(RandomFill* fill, float mean, float std) {
    const float half = std * std::sqrt(3.f);
    fill->offset = mean - half;
    fill->scale = 2 * half;
  }
  // Each tensor its own stream: FNV-1a of its name.
  RandomFill fill_for(const std::string& name) const {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
    RandomFill fill;
    fill.seed = options().seed;
    fill.stream = h;
    return fill;
  }
};

}  // namespace

std::unique_ptr<WeightSource> make_config_source(const ModelDesc& desc, const ConfigWeights& options) {
  return std::make_unique<ConfigSource>(desc, options);
}

std::unique_ptr<WeightSource> make_dummy_source(const ModelDesc& desc, const ConfigWeights& options) {
  return std::make_unique<DummySource>(desc, options);
}

}  // namespace fovea

#include "runtime/dummy_weights.h"

#include <regex>

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
    return k > 0 && k % group_for(k) == 0;
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

}  // namespace

std::unique_ptr<WeightSource> make_config_source(const ModelDesc& desc, const ConfigWeights& options) {
  return std::make_unique<ConfigSource>(desc, options);
}

}  // namespace fovea

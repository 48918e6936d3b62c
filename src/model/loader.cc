// load_model: config -> ModelDesc, safetensors -> canonical weights described from the headers, read when loaded
// (zero-copy views where no layout change).
#include <cstdint>
#include <regex>

#include "model/model_desc.h"
#include "model/safetensors.h"
#include "model/weight_map.h"

namespace fovea {
namespace {

// A checkpoint with more layers than its config says would load and run only the first ones, silently: the maps
// read the layers the config names and nothing else. Every "layers.N." / "layer.N." tensor (the ViT's when the
// name says vision: vision_model / vision_tower) must be of a layer the config has.
void check_no_extra_layers(const SafetensorsSet& set, const ModelDesc& desc) {
  static const std::regex kLayer(R"((^|\.)layers?\.(\d{1,9})\.)");
  static const std::regex kHugeLayer(R"((^|\.)layers?\.\d{10,}\.)");
  const char* llm_section = desc.format == CheckpointFormat::InternVLChat ? "llm_config" : "text_config";
  for (const std::string& name : set.names()) {
    std::smatch m;
    const bool numbered = std::regex_search(name, m, kLayer);
    if (!numbered && !std::regex_search(name, kHugeLayer)) continue;
    const bool vision = name.find("vision") != std::string::npos;
    const int64_t layer = numbered ? std::stoll(m[2].str()) : INT64_MAX;
    const int layers = vision ? desc.vision.layers : desc.llm.layers;
    FOVEA_CHECK(layer < layers, set.file_of(name), ": tensor ", name, " is of layer ",
                numbered ? m[2].str() : std::string("(10+ digits)"), " but ", desc.dir, "/config.json ",
                vision ? "vision_config" : llm_section, ".num_hidden_layers is ", layers,
                ": the checkpoint holds more layers than its config");
  }
}

}  // namespace

const WeightRef& ModelWeights::ref(const std::string& name) const {
  const auto it = tensors.find(name);
  FOVEA_CHECK(it != tensors.end(), "model has no weight ", name);
  return it->second;
}

LoadedModel load_model(const std::string& dir, const LoadOptions& options) {
  LoadedModel model;
  model.desc = load_model_desc(dir);
  const auto set = std::make_shared<SafetensorsSet>(dir);  // the weights' refs keep it (and its mappings) alive
  set->set_quantization(model.desc.quantization);          // packed 4-bit linears read as dequantized X.weight
  model.desc.w4.kept_packed = options.keep_w4 && model.desc.quantization.packed();
  check_no_extra_layers(*set, model.desc);
  map_vision_weights(*set, model.desc, &model.weights);
  map_projector_weights(*set, model.desc, &model.weights);
  map_llm_weights(*set, &model.desc, &model.weights);
  // A checkpoint that stores lm_head is not tied, whatever the flags say; the runtime reads this field.
  model.desc.llm.tie_embeddings = model.weights.storage_key("llm.lm_head") == model.weights.storage_key("llm.embed");
  model.weights.keep_alive = set->keep_alive();
  return model;
}

}  // namespace fovea

// load_model: config -> ModelDesc, safetensors -> canonical weights described from the headers, read when loaded
// (zero-copy views where no layout change).
#include "model/model_desc.h"
#include "model/safetensors.h"
#include "model/weight_map.h"

namespace fovea {

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
  map_vision_weights(*set, model.desc, &model.weights);
  map_projector_weights(*set, model.desc, &model.weights);
  map_llm_weights(*set, &model.desc, &model.weights);
  // A checkpoint that stores lm_head is not tied, whatever the flags say; the runtime reads this field.
  model.desc.llm.tie_embeddings = model.weights.storage_key("llm.lm_head") == model.weights.storage_key("llm.embed");
  model.weights.keep_alive = set->keep_alive();
  return model;
}

}  // namespace fovea

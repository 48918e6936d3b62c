#include "quantize/quantized_config.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config_json.h"
#include "model/quantization.h"

namespace fovea {
namespace {

using Json = nlohmann::ordered_json;

// The modules left dense name the ViT and the projector in both layouts (original: vision_model, mlp1; -hf:
// vision_tower, multi_modal_projector): a loader that matched only one would take the other's dense linears
// for quantized ones with missing scales (transformers did, on an -hf checkpoint). AWQ's list is matched by
// substring in vLLM and AutoAWQ but from the start of the module path in transformers, so the -hf names also
// come with their "model." prefix.
Json quantization_config(const QuantizeOptions& opt, const std::string& llm_blocks) {
  const int group = opt.group;
  switch (opt.method) {
    case QuantizeMethod::Awq: {
      Json skip = Json::array({"lm_head", "output"});
      if (!opt.include_vision)
        skip.insert(skip.begin(), {"vision_model", "mlp1", "vision_tower", "multi_modal_projector", "model.vision_tower",
                                   "model.multi_modal_projector"});
      return {{"quant_method", "awq"}, {"bits", 4},           {"group_size", group},
              {"zero_point", true},    {"version", "gemm"},   {"modules_to_not_convert", skip}};
    }
    case QuantizeMethod::Gptq:
    case QuantizeMethod::Rtn:
      return {{"quant_method", "gptq"},
              {"bits", 4},
              {"group_size", group},
              {"desc_act", opt.method == QuantizeMethod::Gptq && opt.act_order},
              {"sym", true},
              {"damp_percent", 0.01},
              {"true_sequential", false},
              {"static_groups", false},
              {"checkpoint_format", "gptq"},
              {"block_name_to_quantize", llm_blocks},
              {"quantizer", opt.method == QuantizeMethod::Rtn ? "fovea rtn" : "fovea gptq"}};
    case QuantizeMethod::Fp8: {
      Json ignore = Json::array({"re:.*lm_head$", "re:.*\\.output$"});
      if (!opt.include_vision)
        ignore.insert(ignore.begin(), {"re:.*vision_model.*", "re:^mlp1.*", "re:.*vision_tower.*",
                                       "re:.*multi_modal_projector.*"});
      const Json weights = {{"num_bits", 8},    {"type", "float"},     {"strategy", "channel"},
                            {"symmetric", true}, {"dynamic", false},    {"group_size", nullptr},
                            {"observer", "minmax"}};
      const Json inputs = {{"num_bits", 8},    {"type", "float"},   {"strategy", "token"},
                           {"symmetric", true}, {"dynamic", true},   {"observer", nullptr}};
      return {{"quant_method", "compressed-tensors"},
              {"format", "float-quantized"},
              {"quantization_status", "compressed"},
              {"config_groups",
               {{"group_0",
                 {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", inputs},
                  {"output_activations", nullptr}}}}},
              {"ignore", ignore},
              {"kv_cache_scheme", nullptr}};
    }
  }
  return {};
}

}  // namespace

std::string write_quantized_config(const QuantizeOptions& opt, const std::filesystem::path& in,
                                   const std::filesystem::path& out, const std::string& llm_blocks) {
  std::ifstream file(in);
  FOVEA_CHECK(file.good(), "cannot read ", in.string());
  Json config = Json::parse(file, nullptr, false);
  FOVEA_CHECK(config.is_object(), in.string(), " is not a JSON object");
  const Json q = quantization_config(opt, llm_blocks);
  config["quantization_config"] = q;
  for (const char* sub : {"llm_config", "text_config"})
    if (config.contains(sub) && config[sub].is_object()) config[sub]["quantization_config"] = q;
  std::ofstream dst(out, std::ios::binary);
  dst << config.dump(2) << "\n";
  FOVEA_CHECK(dst.good(), "cannot write ", out.string());
  dst.close();
  const nlohmann::json plain = nlohmann::json::parse(config.dump());
  return read_checkpoint_quantization(JsonSection{plain, out.string()}).describe();
}

}  // namespace fovea

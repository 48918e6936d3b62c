// quantization_config -> CheckpointQuantization. The keys and defaults are the ones the writers use:
//  AWQ: AutoAWQ's AwqConfig.to_transformers_dict (casper-hansen/AutoAWQ awq/models/_config.py: quant_method, bits,
//   group_size, zero_point, version lowercased) and LMDeploy's auto_awq (InternLM/lmdeploy
//   lmdeploy/lite/apis/auto_awq.py: the same keys, version "gemm", written into the LLM's config).
//  GPTQ: transformers' GPTQConfig (huggingface/transformers src/transformers/utils/quantization_config.py: bits,
//   group_size 128, desc_act false, sym true, checkpoint_format "gptq" by default); GPTQModel also spells the
//   format "format".
#include "model/quantization.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "model/config_json.h"

namespace fovea {
namespace {

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

void read_awq(const JsonSection& q) {
  const std::string version = lowercase(q.get_string("version", "gemm"));
  FOVEA_CHECK(version == "gemm", q.where, ".version '", version,
              "' is not supported (only AWQ 'gemm' packing; gemv / marlin / exllama layouts differ)");
  FOVEA_CHECK(q.get_bool("zero_point", true), q.where,
              ".zero_point false (symmetric AWQ without qzeros) is not supported");
  // transformers' AwqConfig.backend "llm-awq" is the mit-han-lab packing, not AutoAWQ's.
  const std::string backend = lowercase(q.get_string("backend", "autoawq"));
  FOVEA_CHECK(backend == "autoawq", q.where, ".backend '", backend, "' is not supported (autoawq packing only)");
}

void read_gptq(const JsonSection& q, CheckpointQuantization* out) {
  out->desc_act = q.get_bool("desc_act", false);
  out->sym = q.get_bool("sym", true);
  FOVEA_CHECK(!q.get_bool("is_marlin_format", false), q.where,
              ".is_marlin_format true is not supported (repack to the gptq format)");
  const std::string format = lowercase(q.get_string("checkpoint_format", q.get_string("format", "gptq")));
  FOVEA_CHECK(format == "gptq" || format == "gptq_v2", q.where, ".checkpoint_format '", format,
              "' is not supported (gptq, gptq_v2)");
  out->zeros_minus_one = format == "gptq";
}

// compressed-tensors (neuralmagic/compressed-tensors QuantizationConfig): every config group's weights must be
// 8-bit floats with channel or tensor scales; activation schemes are the runtime's business (--quantization).
void read_compressed_tensors(const JsonSection& q, CheckpointQuantization* out) {
  const std::string format = lowercase(q.get_string("format", ""));
  FOVEA_CHECK(format == "float-quantized", q.where, ".format '", format,
              "' is not supported (compressed-tensors float-quantized FP8 weights only)");
  const JsonSection groups = q.child("config_groups");
  FOVEA_CHECK(!groups.json.empty(), q.where, ".config_groups is empty");
  for (const auto& [name, group] : groups.json.items()) {
    const std::string where = groups.where + "." + name + ".weights";
    FOVEA_CHECK(group.is_object() && group.contains("weights") && group["weights"].is_object(), where, " is missing");
    const JsonSection w{group["weights"], where};
    const std::string type = lowercase(w.get_string("type", "")), strategy = lowercase(w.get_string("strategy", ""));
    FOVEA_CHECK(w.get_int("num_bits") == 8 && type == "float", where, " must be 8-bit float weights");
    FOVEA_CHECK(strategy == "channel" || strategy == "tensor", where, ".strategy '", strategy,
                "' is not supported (channel, tensor)");
  }
  out->fp8_weights = true;
}

CheckpointQuantization parse_quantization(const JsonSection& q) {
  CheckpointQuantization out;
  out.source = q.where;
  const std::string method = lowercase(q.get_string("quant_method", ""));
  if (method == "compressed-tensors") {
    read_compressed_tensors(q, &out);
    return out;
  }
  if (method == "awq") {
    out.method = WeightQuantMethod::Awq;
  } else if (method == "gptq") {
    out.method = WeightQuantMethod::Gptq;
  } else {
    FOVEA_FAIL(q.where, ".quant_method '", method,
               "' is not supported (4-bit awq and gptq checkpoints load; fp8 is a run option: --quantization fp8)");
  }
  out.bits = q.get_int("bits");
  FOVEA_CHECK(out.bits == 4, q.where, ".bits ", out.bits, " is not supported (4-bit ", method, " only)");
  out.group_size = q.get_int("group_size", 128);
  FOVEA_CHECK(out.group_size == -1 || out.group_size > 0, q.where, ".group_size ", out.group_size,
              " must be positive or -1 (one group over K)");
  if (out.method == WeightQuantMethod::Awq) {
    read_awq(q);
  } else {
    read_gptq(q, &out);
  }
  return out;
}

}  // namespace

std::string CheckpointQuantization::describe() const {
  if (fp8_weights) return "fp8 e4m3 weights, scales per channel or tensor (compressed-tensors)";
  if (method == WeightQuantMethod::None) return "none";
  std::string s = str(method == WeightQuantMethod::Awq ? "awq" : "gptq", " ", bits, "-bit, ");
  s += group_size < 0 ? std::string("one group over K") : str("group ", group_size);
  if (method == WeightQuantMethod::Gptq) {
    if (desc_act) s += ", act-order";
    s += sym ? ", sym" : ", asym";
    s += zeros_minus_one ? ", v1 zeros" : ", v2 zeros";
  }
  return s;
}

CheckpointQuantization read_checkpoint_quantization(const JsonSection& root) {
  const char* const key = "quantization_config";
  if (root.has(key)) return parse_quantization(root.child(key));
  for (const char* sub : {"llm_config", "text_config"}) {
    if (!root.has(sub) || !root.json[sub].is_object()) continue;
    const JsonSection section = root.child(sub);
    if (section.has(key)) return parse_quantization(section.child(key));
  }
  return {};
}

}  // namespace fovea

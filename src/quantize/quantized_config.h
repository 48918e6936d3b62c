// The quantization_config `fovea quantize` writes, in the keys the other engines read:
//  awq:  AutoAWQ / transformers AwqConfig (quant_method, bits, group_size, zero_point, version "gemm",
//        modules_to_not_convert);
//  gptq / rtn: AutoGPTQ / transformers GPTQConfig (bits, group_size, desc_act, sym, damp_percent,
//        checkpoint_format "gptq");
//  fp8:  compressed-tensors (llm-compressor's FP8_DYNAMIC scheme): format float-quantized, one config group
//        targeting Linear with 8-bit float channel-wise static weights and token-wise dynamic activations,
//        ignore = the modules left dense.
// It goes at the config's top level (vLLM, transformers) and into llm_config / text_config (LMDeploy).
#pragma once
#include <filesystem>
#include <string>

#include "quantize/quantize_checkpoint.h"

namespace fovea {

// Writes `out` = `in` with the quantization_config; returns how the loader describes the result. `llm_blocks`:
// the decoder layers' module path ("model.language_model.layers"), GPTQ's block_name_to_quantize.
std::string write_quantized_config(const QuantizeOptions& opt, const std::filesystem::path& in,
                                   const std::filesystem::path& out, const std::string& llm_blocks);

}  // namespace fovea

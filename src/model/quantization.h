// 4-bit weight-only checkpoints (W4A16): AWQ ("gemm" packing, AutoAWQ and LMDeploy) and GPTQ (AutoGPTQ, optimum,
// GPTQModel). config.json's quantization_config says which; the loader dequantizes each packed linear to a bf16
// [out, in] weight at load (model/w4_dequant.h), so every backend runs them as dense bf16 models for now.
#pragma once
#include <cstdint>
#include <string>

namespace fovea {

struct JsonSection;

enum class WeightQuantMethod : uint8_t { None, Awq, Gptq };

struct CheckpointQuantization {
  WeightQuantMethod method = WeightQuantMethod::None;
  int bits = 0;
  int group_size = -1;           // -1: one group spans the whole input dimension
  bool desc_act = false;         // GPTQ act-order: g_idx maps input rows to groups in any order
  bool sym = false;              // GPTQ symmetric (every zero is 2^(bits-1)); the dequantization does not need it
  bool zeros_minus_one = false;  // GPTQ "gptq" (v1) checkpoint format: the packed zeros word holds z - 1 per nibble
  // compressed-tensors float-quantized (what `fovea quantize --method fp8` and llm-compressor write): X.weight
  // is E4M3 with X.weight_scale ([out, 1] per channel or one per tensor); the loader dequantizes it to bf16.
  bool fp8_weights = false;
  std::string source;            // where the config came from, for messages ("/m/config.json: llm_config")

  bool packed() const { return method != WeightQuantMethod::None; }
  std::string describe() const;  // "none", "awq 4-bit, group 128", "gptq 4-bit, group 128, act-order, sym, v1 zeros"
};

// Reads quantization_config from config.json's top level, else from llm_config or text_config (LMDeploy writes
// InternVL's into llm_config). Absent: method None. Throws naming the key for anything not supported: other
// quant methods, compressed-tensors other than 8-bit float weights (channel / tensor scales), bits other than 4, AWQ versions other than gemm or without zero points, GPTQ formats other than
// gptq / gptq_v2.
CheckpointQuantization read_checkpoint_quantization(const JsonSection& root);

}  // namespace fovea

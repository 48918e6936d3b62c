// `fovea quantize`: a dense (bf16 / f32) InternVL checkpoint -> a quantized copy in the layouts other engines read.
//  awq:  AutoAWQ gemm packing (qweight / qzeros / scales), quantization_config {quant_method awq, bits 4,
//        group_size, zero_point true, version gemm}; the AWQ scales are folded into the op before each linear
//        (q/k/v: the attention norm, gate/up: the MLP norm, down: up's rows); o_proj is not scaled (see .cc).
//  gptq: AutoGPTQ packing (qweight / qzeros / scales / g_idx, v1 zeros), {quant_method gptq, bits 4, group_size,
//        desc_act, sym true, checkpoint_format gptq}.
//  rtn:  round-to-nearest in the GPTQ layout (no calibration): the baseline.
//  fp8:  compressed-tensors float-quantized: E4M3 weight + per-output-channel weight_scale [out, 1], dynamic
//        per-token activations (no calibration).
// The LLM layers' linears are quantized; embeddings, lm_head, norms, the ViT and the projector are copied as
// they are, unless include_vision (their linears then get round-to-nearest / FP8: calibration covers the LLM).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "quantize/calibration.h"

namespace fovea {

enum class QuantizeMethod { Awq, Gptq, Rtn, Fp8 };
QuantizeMethod parse_quantize_method(const std::string& name);  // throws naming the choices

struct QuantizeOptions {
  std::string model_dir, out_dir;
  QuantizeMethod method = QuantizeMethod::Awq;
  int group = 128;  // 4-bit methods; -1: one group over the input
  bool act_order = false;       // gptq
  bool include_vision = false;  // also the ViT's and the projector's linears
  CalibrationOptions calibration;
};

// done / total units of work and what runs now ("layer 3 down").
using QuantizeProgress = std::function<void(int done, int total, const std::string& what)>;

struct QuantizeSummary {
  int linears = 0;                // linears quantized
  double seconds_calibration = 0;
  int calibration_tasks = 0;
  int64_t calibration_rows_kept = 0;  // per linear (the fewest of any): what the 4-bit methods were fitted on
  int64_t calibration_rows_seen = 0;  // per linear: every row the calibration tasks produced
  size_t calibration_bytes = 0;       // the kept rows' memory (bf16)
  std::string config_source;      // what quantization_config says, as inspect shows it
};

QuantizeSummary quantize_checkpoint(const QuantizeOptions& options, const QuantizeProgress& progress);

}  // namespace fovea

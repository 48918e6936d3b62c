// The arithmetic of `fovea bench`: the FLOP model of one request (PERF.md, generalised to any ModelDesc) and
// the GEMM peak the MFU is measured against (a large matmul through the backend's own linear op).
#pragma once
#include <string>

#include "model/model_desc.h"

namespace fovea {

struct RequestFlops {
  double vit = 0, projector = 0, llm = 0, lm_head = 0;
  double total() const { return vit + projector + llm + lm_head; }
};

// tiles: image tiles; prompt_tokens: the whole prompt (image tokens included); output_tokens: generated.
// ViT per tile 2·P_vit·T_v + layers·4·T_v²·C; projector 2·P_proj·tokens_per_tile per tile; LLM prefill
// 2·P_llm·L + layers·4·(heads·D)·L²/2 (causal); each later token 2·P_llm + layers·4·(heads·D)·context; the LM
// head 2·H·V per generated token.
RequestFlops request_flops(const ModelDesc& desc, int tiles, int prompt_tokens, int output_tokens);

struct GemmPeak {
  int m = 0, n = 0, k = 0;
  int iterations = 0;
  double seconds = 0;  // all timed iterations
  double tflops = 0;
  std::string backend;
  std::string dtype;   // the backend's weight dtype
};

// y[M,N] = x[M,K]·w[N,K]^T on `backend_name` ("cpu", "cuda", "auto"), random inputs, a warm-up call, then as
// many calls as fit in about `budget_s` seconds (at least 3). fp8: through linear_fp8 (E4M3 weights, the
// activation's quantization included), the peak an FP8 run's MFU is measured against.
GemmPeak measure_gemm_peak(const std::string& backend_name, int m, int n, int k, double budget_s = 2.0,
                           bool fp8 = false);

}  // namespace fovea

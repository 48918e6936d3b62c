// Round-to-nearest 4-bit quantization of a dense [out, in] float weight into the packed checkpoint layouts that
// model/w4_dequant.h reads: what `fovea make-demo-model --quantize awq|gptq` writes. Not AWQ's scale search nor
// GPTQ's Hessian updates (those choose better q; the format is the same): per group min/max asymmetric for AWQ
// (AutoAWQ's zero_point default), absmax symmetric with zero 2^(bits-1) for GPTQ (transformers' sym default).
#pragma once
#include <cstdint>
#include <vector>

#include "model/w4_dequant.h"

namespace fovea {

// AWQ gemm: qweight [in, out/8], qzeros [in/group, out/8] (AWQ nibble order), scales F16 [in/group, out].
// `in` must be a multiple of `group` and `out` of 8.
PackedW4Linear pack_awq(const float* w, int64_t out, int64_t in, int64_t group);

// GPTQ: qweight [in/8, out], qzeros [groups, out/8], scales F16 [groups, out], g_idx I32 [in] = `g_idx` (row k in
// group g_idx[k]; act-order permutes them). `v1_zeros`: store every zeros word minus 0x11111111 (the "gptq" format).
PackedW4Linear pack_gptq(const float* w, int64_t out, int64_t in, const std::vector<int32_t>& g_idx, int64_t groups,
                         bool v1_zeros);

// Codes chosen elsewhere (fovea quantize: GPTQ, AWQ): w[n, k] ~ (q[n, k] - zeros[g, n]) * scales[g, n] with
// g = g_idx[k]. Scales must already be float16 values (they are stored as F16).
struct W4Codes {
  int64_t out = 0, in = 0, groups = 0;
  std::vector<uint8_t> q;        // [out, in], 0..15
  std::vector<int> zeros;        // [groups, out], 0..15
  std::vector<float> scales;     // [groups, out]
  std::vector<int32_t> g_idx;    // [in]
};
// AWQ gemm layout; needs g_idx[k] == k / (in / groups) (AWQ has no act-order).
PackedW4Linear pack_awq_codes(const W4Codes& c);
// GPTQ layout with the codes' g_idx; `v1_zeros` as in pack_gptq.
PackedW4Linear pack_gptq_codes(const W4Codes& c, bool v1_zeros);

}  // namespace fovea

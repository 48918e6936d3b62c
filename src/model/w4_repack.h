// A checkpoint's 4-bit linear (AWQ gemm, GPTQ; layouts in w4_dequant.h) repacked on the host into the layout the
// backends' linear_w4 reads (backend/w4_layout.h), so the GPU keeps W4A16 weights packed. Rows stay output rows,
// so the weight map's row operations (InternLM2's wqkv regrouping, q/k/v and gate/up concatenation) apply to
// codes and params as they do to dense weights.
//
// Act-order (GPTQ g_idx not k / group): the input columns are sorted by group, stably, so every group is
// contiguous in the stored order; `perm` says which input column each stored column is.
#pragma once
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/w4_dequant.h"

namespace fovea {

struct W4HostLinear {
  Tensor codes;   // [out, w4::code_words(in)] I32
  Tensor params;  // [out, in / group] I32
  Tensor perm;    // [in] I32, or empty when the stored order is the input order
  int64_t in = 0, group = 0;
};

// Repacks `packed` (validated as dequantize_w4 validates it; errors start with `where`). Returns false and says
// why in *why_not when the linear cannot be kept packed with the exact values of the dequantization: float32
// scales that are not 16-bit values, act-order groups of unequal sizes, input rows not a multiple of the group.
bool repack_w4(const PackedW4Linear& packed, const CheckpointQuantization& q, const std::string& where,
               W4HostLinear* out, std::string* why_not);

// What repack_w4 decides before reading any code: the dims, the stored column order (empty: the input order) and
// whether the linear can stay packed (false and *why_not as repack_w4 says them). Reads only the shapes, the scales
// and g_idx, so a loader can decide for every linear before reading the weights.
struct W4RepackPlan {
  w4::PackedDims dims;
  std::vector<int32_t> order;
};
bool plan_repack_w4(const PackedW4Linear& packed, const CheckpointQuantization& q, const std::string& where,
                    W4RepackPlan* plan, std::string* why_not);

// The inverse of a [K] I32 permutation, as linear_w4 wants it beside perm.
Tensor inverse_permutation(const Tensor& perm);

}  // namespace fovea

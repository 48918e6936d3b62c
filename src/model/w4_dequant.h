// Packed 4-bit linears (AWQ gemm, GPTQ) -> the dense [out, in] weight, w = (q - z) * s per group, computed exactly in
// float and rounded once to the output dtype. Layouts (int32 words, nibble i = bits 4i..4i+3):
//  AWQ gemm: qweight [in, out/8] packs 8 OUTPUT columns per word in the order AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
//   (nibble i holds column 8c + AWQ_ORDER[i]); qzeros [in/group, out/8] the same way; scales [in/group, out];
//   row k belongs to group k / group. Confirmed against casper-hansen/AutoAWQ awq/modules/linear/gemm.py
//   (WQLinear_GEMM.from_linear packs with that order_map) and awq/utils/packing_utils.py (dequantize_gemm unpacks
//   with AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]); LMDeploy's WeightOnlyQLinear (lmdeploy/lite/quantization/
//   modules/linear.py) packs its "awq" layout the same way.
//  GPTQ: qweight [in/8, out] packs 8 INPUT rows per word in plain order (nibble i of word r is row 8r + i);
//   qzeros [groups, out/8] packs 8 output columns per word in plain order; scales [groups, out]; g_idx [in] is the
//   group of each input row (any order with act-order; k / group without). The "gptq" (v1) checkpoint format
//   stores every packed zeros word as (true word - 0x11111111): GPTQModel saves v1 by subtracting that constant
//   from the word and loads it by adding it back (ModelCloud/GPTQModel gptqmodel/utils/model.py,
//   convert_gptq_v2_to_v1_format_module / convert_gptq_v1_to_v2_format_module), which matches AutoGPTQ's
//   per-nibble "zeros + 1" (AutoGPTQ/AutoGPTQ auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py) whenever no zero
//   is 0. qweight packing and g_idx use confirmed against the same qlinear_cuda_old.py (pack / forward).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/quantization.h"

namespace fovea {

namespace w4 {
inline constexpr int kPerWord = 8;  // 4-bit values per int32 word
// AWQ_REVERSE_ORDER: output column 8c + j sits in nibble kAwqNibbleOfColumn[j] of word c (AWQ_ORDER's inverse).
inline constexpr int kAwqNibbleOfColumn[kPerWord] = {0, 4, 1, 5, 2, 6, 3, 7};
inline constexpr uint32_t kV1ZeroOffset = 0x11111111u;  // GPTQ v1: stored zeros word = true word - this
}  // namespace w4

struct PackedW4Linear {  // one linear as the checkpoint stores it (host tensors)
  Tensor qweight, qzeros, scales;
  Tensor g_idx;  // GPTQ only; empty: row k is in group k / group_size
};

namespace w4 {
struct PackedDims {
  int64_t in = 0, out = 0, group = 0, groups = 0;
};
// Validates every tensor of `packed` against the layout `q` names (errors start with `where`); the dims.
PackedDims packed_dims(const PackedW4Linear& packed, const CheckpointQuantization& q, const std::string& where);
// The group of every input row: g_idx when present (validated), else row / group.
std::vector<int32_t> input_groups(const PackedW4Linear& packed, const PackedDims& d, const std::string& where);
}  // namespace w4

// The dense [out, in] weight in `out_dtype` (BF16 or F32). Every shape and dtype is validated against the layout
// above and `q.group_size`; errors start with `where` (the file and the linear's name). Rows are split over
// ThreadPool::global().
Tensor dequantize_w4(const PackedW4Linear& packed, const CheckpointQuantization& q, DType out_dtype,
                     const std::string& where);

}  // namespace fovea

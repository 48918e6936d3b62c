// Choosing 4-bit codes for one linear W [out, in] (row n = output channel, column k = input channel):
//  - round-to-nearest per group (the baseline);
//  - GPTQ (Frantar et al. 2022): columns quantized one at a time, each one's rounding error pushed onto the
//    not-yet-quantized columns through the inverse Hessian of the layer's squared output error, H = 2 X^T X
//    (X: calibration inputs), dampened by 1% of its mean diagonal; act-order quantizes columns by descending
//    H diagonal and records each column's group in g_idx. Follows AutoGPTQ's fasterquant (group parameters
//    found from the error-updated columns when a group starts);
//  - AWQ (Lin et al. 2023): per-input-channel scales s = mean|x|^alpha (normalised), alpha from a grid that
//    minimises || X W^T - X (Q(W diag(s)) diag(s)^-1)^T ||^2 on the calibration rows; alpha = 0 is RTN, so the
//    chosen scales never do worse than RTN on those rows.
// Asymmetric groups (min/max, zero point) are AutoAWQ's; symmetric (absmax, zero 8) AutoGPTQ's sym default.
#pragma once
#include <cstdint>
#include <vector>

#include "model/w4_pack.h"

namespace fovea {

// Round-to-nearest with g_idx[k] = k / group.
W4Codes rtn_w4(const float* w, int64_t out, int64_t in, int64_t group, bool sym);

// `xtx` [in, in] = sum over calibration rows of x x^T (any positive multiple works: only its shape matters).
W4Codes gptq_w4(const float* w, int64_t out, int64_t in, const std::vector<double>& xtx, int64_t group, bool act_order,
                bool sym, double damp = 0.01);

// The AWQ scales [in] for the linears whose weights are stacked (by rows) in `w` [out, in] and share the input
// rows `x` [rows, in]; `alpha` (if given) receives the chosen exponent.
std::vector<float> awq_search_scales(const float* w, int64_t out, int64_t in, const float* x, int64_t rows,
                                     int64_t group, int grid = 20, float* alpha = nullptr);

// The dense weight the codes stand for, [out, in].
std::vector<float> dequantize_codes(const W4Codes& c);

// sum over rows of || x (a - b)^T ||^2 for two [out, in] weights: the output error of replacing a by b.
double output_error(const float* a, const float* b, int64_t out, int64_t in, const float* x, int64_t rows);

// x x^T summed over `rows` rows of x [rows, in], added into `xtx` [in, in].
void accumulate_xtx(const float* x, int64_t rows, int64_t in, std::vector<double>* xtx);

}  // namespace fovea

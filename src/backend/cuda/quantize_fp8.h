// Launch of the per-group FP8 quantization (kernels_fp8.cu) for the finer scaling recipes of
// backend/fp8_recipe.h; the per-tensor one is launch_quantize_fp8 in kernels.h.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace fovea::cuda {

// x [rows, cols] bf16 in groups of `group` consecutive columns of one row (group = cols: per token; 128:
// DeepSeek's 1x128 blocks; the last group may be partial). scales[g * scale_ld + r] = max|x[r, group g]| / 448 (1
// when all zero): the group-major layout cuBLASLt's OUTER_VEC_32F (one group) and VEC128_32F modes read for the
// B operand (scale_ld >= rows: VEC128 wants each block's column 16-byte aligned, fp8_activation_scale_ld). xq = e4m3(x / scale), saturating. x 8-byte and xq 4-byte aligned, cols a multiple of 4 (throws
// otherwise).
void launch_quantize_fp8_groups(const __nv_bfloat16* x, int64_t rows, int64_t cols, int64_t group, uint8_t* xq,
                                float* scales, int64_t scale_ld, cudaStream_t stream);
// The row stride of the 1x128 activation block scales for `rows` tokens: rows rounded up to a multiple of 4 (16
// bytes), as TransformerEngine's GEMM_READY block-scaled tensors lay them out for cuBLASLt.
inline int64_t fp8_activation_scale_ld(int64_t rows) { return (rows + 3) / 4 * 4; }
// Fused producers of a per-token (Channel) FP8 activation (kernels_fp8_fused.cu): codes [rows, cols] and
// scales [rows] equal to launch_scale_add_layer_norm / launch_scale_add_rms_norm (residual null: x is normalised,
// as launch_layer_norm / launch_rms_norm do; layer: LayerNorm with beta, else RMSNorm) or launch_silu_mul, each
// followed by launch_quantize_fp8_groups(group = cols), byte for byte, when both take the same vector width
// (every buffer 16-byte aligned and cols a multiple of 8, as the engine's buffers are).
void launch_norm_fp8(__nv_bfloat16* residual, const __nv_bfloat16* x, const __nv_bfloat16* scale, bool layer,
                     const __nv_bfloat16* gamma, const __nv_bfloat16* beta, float eps, uint8_t* codes,
                     float* scales, int rows, int cols, cudaStream_t stream);
void launch_silu_mul_fp8(const __nv_bfloat16* gate_up, uint8_t* codes, float* scales, int rows, int half_cols,
                         cudaStream_t stream);
// Raises the fused SwiGLU kernel's shared-memory limit (rows up to 49,152 values; wider ones are refused). Called
// once at start-up, with the attention kernels' (a graph capture must not contain it).
void prepare_fp8_kernels();
// y[r, c] = act(y[r, c] * col_scale[c] + bias[c]) in place (col_scale and bias may be null; act: GELU (erf) when
// gelu): the epilogue of an FP8 GEMM whose vector-scaled cuBLASLt kernels could not fuse it (LtFp8Gemm::run
// returned false), and ChannelAct128's per-channel weight scale after its block GEMM.
void launch_fp8_epilogue(__nv_bfloat16* y, const __nv_bfloat16* bias, int64_t rows, int64_t cols, bool gelu,
                         cudaStream_t stream, const float* col_scale = nullptr);

}  // namespace fovea::cuda

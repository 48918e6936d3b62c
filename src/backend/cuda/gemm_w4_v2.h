// The fused W4A16 kernel (gemm_w4_v2.cu; the tiling and why it replaced v1: gemm_w4.h). Internal to gemm_w4.cu,
// which launches the split-K reduction after it.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace fovea::cuda {

// Raises the v2 kernels' shared-memory limits (once, outside graph captures).
void prepare_w4_v2_kernels();
// Same contract as launch_w4_fused without the reduction: y (splits == 1) or the float32 partials (splits > 1).
void launch_w4_fused_v2(const bf16* x, const uint32_t* codes, const uint32_t* params, const bf16* bias, bf16* y,
                        float* partials, int m, int n, int k, int group, int splits, cudaStream_t stream);

}  // namespace fovea::cuda

// FP8 (E4M3) GEMM through cuBLASLt for W8A8 linears: y[M,N] (bf16) = x8[M,K] · w8[N,K]^T scaled by x_scale and
// w_scale under one of the recipes of backend/fp8_recipe.h (+ bias, then GELU if asked). The recipe sets
// cuBLASLt's A/B scale modes (sm_90, cuBLAS >= 12.9): SCALAR_32F (per tensor), OUTER_VEC_32F (per channel x per
// token) or BLK128x128_32F x VEC128_32F (DeepSeek's blocks), with the scale layouts fp8_recipe.h describes;
// float32 accumulation without cuBLASLt's "fast accumulation" (which keeps fewer bits on Hopper).
// The scales are device pointers read when the GEMM runs, so a recorded graph sees each replay's activation
// scale. Plans are cached per (M, N, K, epilogue); the cuBLASLt handle and workspace are LtGemm's (same stream). The
// heuristic's first algorithm that cuBLASLt accepts on the real operands is used (no timing).
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <set>
#include <tuple>

#include "backend/cuda/gemm_lt.h"
#include "backend/fp8_recipe.h"

namespace fovea::cuda {

class LtFp8Gemm {
 public:
  // Borrows bf16's handle and workspace; `bf16` must outlive this.
  LtFp8Gemm(cudaStream_t stream, const LtGemm& bf16);
  ~LtFp8Gemm();
  LtFp8Gemm(const LtFp8Gemm&) = delete;
  LtFp8Gemm& operator=(const LtFp8Gemm&) = delete;

  // x8 [M,K] and w8 [N,K] hold E4M3 codes, row-major; K a multiple of 16, N of 8 (cuBLASLt's FP8 alignment).
  // epilogue: None, Bias, Gelu or BiasGelu (bias non-null exactly for the Bias ones). x_scale / w_scale: one
  // float each (Tensor), M / N floats (Channel), or ceil(K/128) columns of M (row stride M rounded up to 4) /
  // the weight's block scales (Block).
  // Returns false, having written nothing, when cuBLASLt has no algorithm for this epilogue under these scale
  // modes (whether its vector-scaled kernels fuse bias / GELU is not documented); the caller then runs the GEMM
  // without the epilogue and applies it itself. The refusal is remembered per shape.
  bool run(const uint8_t* x8, const uint8_t* w8, const float* x_scale, const float* w_scale,
           const __nv_bfloat16* bias, __nv_bfloat16* y, int m, int n, int k, GemmEpilogue epilogue,
           Fp8Scaling scaling = Fp8Scaling::Tensor);
  // One algorithm per (N, K, epilogue, scaling) for every M (gemm_lt.h, kInvariantRows); switch before the first
  // GEMM.
  void set_batch_invariant(bool on) { invariant_ = on; }

 private:
  struct Operands {
    const uint8_t *x8, *w8;
    const float *x_scale, *w_scale;
    const __nv_bfloat16* bias;
    __nv_bfloat16* y;
    int m, n, k;
    GemmEpilogue epilogue;
    Fp8Scaling scaling;
  };
  LtPlan& plan_for(const Operands& o);
  // The descriptors of o's GEMM with m rows: FP8 "TN", no fast accumulation, o's scale modes and pointers.
  static void init_fp8_plan(LtPlan& plan, const Operands& o, int m);
  // Batch-invariant mode: the pinned algorithm, if cuBLASLt runs it on these operands (tried outside a capture).
  bool use_pinned(LtPlan& plan, const Operands& o);
  static void set_pointers(LtPlan& plan, const Operands& o);
  cublasStatus_t launch(const LtPlan& plan, const Operands& o, const cublasLtMatmulAlgo_t& algo);

  cudaStream_t stream_;
  cublasLtHandle_t handle_;
  void* workspace_;
  size_t workspace_bytes_;
  using Key = std::tuple<int, int, int, int, int>;  // m, n, k, epilogue, scaling
  std::map<Key, LtPlan> plans_;
  std::set<Key> refused_;
  bool invariant_ = false;
  std::map<std::tuple<int, int, int, int>, cublasLtMatmulAlgo_t> pinned_;  // n, k, epilogue, scaling  // fused epilogues cuBLASLt had no algorithm for (vector scales only)
};

}  // namespace fovea::cuda

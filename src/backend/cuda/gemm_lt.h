// y[M,N] = act(x[M,K] · w[N,K]^T + bias) through cuBLASLt: bf16 operands, f32 accumulation, bf16 output, bias
// and bias+GELU fused into the epilogue. One workspace, allocated at construction; the descriptors and the
// heuristic's algorithm are cached per (M, N, K, epilogue, pointer alignment), so a steady-state call only sets the bias pointer.
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

namespace fovea::cuda {

enum class GemmEpilogue : int { None, Bias, Gelu, BiasGelu };

class LtGemm {
 public:
  explicit LtGemm(cudaStream_t stream);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  void run(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias, __nv_bfloat16* y, int m, int n,
           int k, GemmEpilogue epilogue);
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int, int, int, int, unsigned>;
  Plan& plan_for(int m, int n, int k, GemmEpilogue epilogue, unsigned alignment);

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, Plan> plans_;
};

}  // namespace fovea::cuda

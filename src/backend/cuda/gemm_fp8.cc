#include "backend/cuda/gemm_fp8.h"

#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace fovea::cuda {

LtFp8Gemm::LtFp8Gemm(cudaStream_t stream, const LtGemm& bf16)
    : stream_(stream), handle_(bf16.handle()), workspace_(bf16.workspace()), workspace_bytes_(bf16.workspace_bytes()) {}

LtFp8Gemm::~LtFp8Gemm() {
  for (auto& [key, plan] : plans_) destroy_plan(plan);
}

// As in LtGemm: row-major y[M,N] = x[M,K] w[N,K]^T is column-major y^T[N,M] = w^T x^T, A = w (op T), B = x (op
// N), both with leading dimension K: the "TN" layout that Hopper's FP8 kernels require.
LtPlan& LtFp8Gemm::plan_for(int m, int n, int k, bool bias) {
  const auto key = std::make_tuple(m, n, k, bias);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  LtPlan plan;
  try {
    FOVEA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    FOVEA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
    FOVEA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
    const int8_t fast_accumulate = 0;
    FOVEA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accumulate,
                                                      sizeof(fast_accumulate)));
    if (bias) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType_t bias_type = CUDA_R_16BF;
      FOVEA_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
      FOVEA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                        sizeof(bias_type)));
    }
    FOVEA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_8F_E4M3, k, n, k));
    FOVEA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_8F_E4M3, k, m, k));
    FOVEA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_16BF, n, m, n));
    cublasLtMatmulPreference_t pref;
    FOVEA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    FOVEA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &workspace_bytes_, sizeof(workspace_bytes_)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, plan.op, plan.a, plan.b, plan.c, plan.c,
                                                                 pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    FOVEA_CHECK(status == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS,
                "cuBLASLt has no FP8 algorithm for linear_fp8 M=", m, " N=", n, " K=", k, " (status ", int(status),
                ")");
    plan.algo = result.algo;
  } catch (...) {
    destroy_plan(plan);
    throw;
  }
  return plans_.emplace(key, plan).first->second;
}

void LtFp8Gemm::run(const uint8_t* x8, const uint8_t* w8, const float* x_scale, const float* w_scale,
                    const __nv_bfloat16* bias, __nv_bfloat16* y, int m, int n, int k) {
  if (m == 0 || n == 0) return;
  LtPlan& plan = plan_for(m, n, k, bias != nullptr);
  // A is w, B is x: their scales follow them.
  FOVEA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof(w_scale)));
  FOVEA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof(x_scale)));
  if (bias)
    FOVEA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const float alpha = 1.f, beta = 0.f;
  FOVEA_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.op, &alpha, w8, plan.a, x8, plan.b, &beta, y, plan.c, y, plan.c,
                                    &plan.algo, workspace_, workspace_bytes_, stream_));
}

}  // namespace fovea::cuda

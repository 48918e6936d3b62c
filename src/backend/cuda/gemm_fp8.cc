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
//
// The first version asked the heuristic before setting the scale pointers, told it nothing of the operands'
// alignment and kept the scale 4 bytes into its buffer; on the H200 (cuBLASLt 13) every launch then failed with
// status 15 (NOT_SUPPORTED). Now, as every FP8 user of cuBLASLt does, the scale (and bias) pointers go into the
// descriptor before the heuristic is asked, the alignment preferences are set, the scale sits 16 bytes in, and
// outside a graph capture the candidates are launched in the heuristic's order on the real operands and the first
// one cuBLASLt accepts is kept. (Which of these cuBLASLt needed was not isolated: the fixed path passed at once.)
LtPlan& LtFp8Gemm::plan_for(const Operands& o) {
  const auto key = std::make_tuple(o.m, o.n, o.k, int(o.epilogue));
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
    const cublasLtEpilogue_t epilogue = lt_epilogue(o.epilogue);
    FOVEA_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (o.bias) {
      const cudaDataType_t bias_type = CUDA_R_16BF;
      FOVEA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                        sizeof(bias_type)));
    }
    set_pointers(plan, o);
    FOVEA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_8F_E4M3, o.k, o.n, o.k));
    FOVEA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_8F_E4M3, o.k, o.m, o.k));
    FOVEA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_16BF, o.n, o.m, o.n));
    cublasLtMatmulPreference_t pref;
    FOVEA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    FOVEA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &workspace_bytes_, sizeof(workspace_bytes_)));
    // The alignment these operands have; the heuristic otherwise assumes 256 bytes.
    const unsigned align = common_alignment({o.x8, o.w8, o.y, o.bias});
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      FOVEA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
    constexpr int kCandidates = 8;
    cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, plan.op, plan.a, plan.b, plan.c, plan.c,
                                                                 pref, kCandidates, results, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    FOVEA_CHECK(status == CUBLAS_STATUS_SUCCESS && found > 0, "cuBLASLt has no FP8 algorithm for linear_fp8 M=",
                o.m, " N=", o.n, " K=", o.k, " (status ", int(status), ")");
    int chosen = -1;
    cublasStatus_t last = CUBLAS_STATUS_NOT_SUPPORTED;
    for (int i = 0; i < found && chosen < 0; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
      if (stream_is_capturing(stream_)) {  // no trial launches inside a capture: trust the first
        chosen = i;
        break;
      }
      last = launch(plan, o, results[i].algo);
      if (last == CUBLAS_STATUS_SUCCESS) chosen = i;
    }
    FOVEA_CHECK(chosen >= 0, "cuBLASLt refused all ", found, " FP8 algorithms for linear_fp8 M=", o.m, " N=", o.n,
                " K=", o.k, " (last status ", int(last), ")");
    plan.algo = results[chosen].algo;
  } catch (...) {
    destroy_plan(plan);
    throw;
  }
  return plans_.emplace(key, plan).first->second;
}

void LtFp8Gemm::set_pointers(LtPlan& plan, const Operands& o) {
  // A is w, B is x: their scales follow them.
  FOVEA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &o.w_scale, sizeof(o.w_scale)));
  FOVEA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &o.x_scale, sizeof(o.x_scale)));
  if (o.bias)
    FOVEA_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &o.bias, sizeof(o.bias)));
}

cublasStatus_t LtFp8Gemm::launch(const LtPlan& plan, const Operands& o, const cublasLtMatmulAlgo_t& algo) {
  const float alpha = 1.f, beta = 0.f;
  return cublasLtMatmul(handle_, plan.op, &alpha, o.w8, plan.a, o.x8, plan.b, &beta, o.y, plan.c, o.y, plan.c,
                        &algo, workspace_, workspace_bytes_, stream_);
}

void LtFp8Gemm::run(const uint8_t* x8, const uint8_t* w8, const float* x_scale, const float* w_scale,
                    const __nv_bfloat16* bias, __nv_bfloat16* y, int m, int n, int k, GemmEpilogue epilogue) {
  if (m == 0 || n == 0) return;
  const Operands o{x8, w8, x_scale, w_scale, bias, y, m, n, k, epilogue};
  LtPlan& plan = plan_for(o);
  set_pointers(plan, o);
  FOVEA_CUBLAS_CHECK(launch(plan, o, plan.algo));
}

}  // namespace fovea::cuda

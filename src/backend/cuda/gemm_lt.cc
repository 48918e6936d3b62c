#include "backend/cuda/gemm_lt.h"

#include <cstdint>
#include <initializer_list>

#include "backend/cuda/cuda_check.h"

namespace fovea::cuda {
namespace {

// 32 MiB covers the split-K and stream-K variants the heuristic picks at prefill shapes on Hopper.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

cublasLtEpilogue_t lt_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::Gelu: return CUBLASLT_EPILOGUE_GELU;
    case GemmEpilogue::BiasGelu: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool has_bias(GemmEpilogue e) { return e == GemmEpilogue::Bias || e == GemmEpilogue::BiasGelu; }

// The largest power of two up to 256 dividing every operand address: the heuristic assumes 256-byte aligned
// operands unless told otherwise, and row views (Tensor::rows) can be less aligned than cudaMalloc's blocks.
unsigned common_alignment(std::initializer_list<const void*> ptrs) {
  unsigned alignment = 256;
  for (const void* p : ptrs)
    while (p && alignment > 2 && reinterpret_cast<uintptr_t>(p) % alignment) alignment /= 2;
  return alignment;
}

}  // namespace

LtGemm::LtGemm(cudaStream_t stream) : stream_(stream) {
  FOVEA_CUBLAS_CHECK(cublasLtCreate(&handle_));
  FOVEA_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  workspace_bytes_ = kWorkspaceBytes;
}

LtGemm::~LtGemm() {
  // Destructors must not throw: failures while tearing down are ignored.
  for (auto& [key, plan] : plans_) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.op);
  }
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

// Row-major y[M,N] = x[M,K] w[N,K]^T is column-major y^T[N,M] = w^T x^T with w read as a transposed K×N
// column-major matrix: A = w (op T), B = x (op N), both with leading dimension K; the bias runs along N, which
// is the column-major row dimension, exactly where cuBLASLt's epilogue bias goes.
LtGemm::Plan& LtGemm::plan_for(int m, int n, int k, GemmEpilogue epilogue, unsigned alignment) {
  const Key key{m, n, k, int(epilogue), alignment};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan plan;
  FOVEA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  FOVEA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  FOVEA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  const cublasLtEpilogue_t lt = lt_epilogue(epilogue);
  FOVEA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt, sizeof(lt)));
  if (has_bias(epilogue)) {
    const cudaDataType_t bias_type = CUDA_R_16BF;
    FOVEA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                      sizeof(bias_type)));
  }
  FOVEA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, k, n, k));
  FOVEA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, k, m, k));
  FOVEA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_16BF, n, m, n));

  cublasLtMatmulPreference_t pref;
  FOVEA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  FOVEA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &workspace_bytes_, sizeof(workspace_bytes_)));
  const uint32_t align32 = alignment;
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    FOVEA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align32, sizeof(align32)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle_, plan.op, plan.a, plan.b, plan.c, plan.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.op);
    FOVEA_FAIL("cuBLASLt has no algorithm for linear M=", m, " N=", n, " K=", k, " epilogue ", int(epilogue),
               " (status ", int(status), ")");
  }
  plan.algo = result.algo;
  return plans_.emplace(key, plan).first->second;
}

void LtGemm::run(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias, __nv_bfloat16* y, int m,
                 int n, int k, GemmEpilogue epilogue) {
  if (m == 0 || n == 0) return;
  Plan& plan = plan_for(m, n, k, epilogue, common_alignment({x, w, y, has_bias(epilogue) ? bias : nullptr}));
  if (has_bias(epilogue))
    FOVEA_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const float alpha = 1.f, beta = 0.f;
  FOVEA_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.op, &alpha, w, plan.a, x, plan.b, &beta, y, plan.c, y, plan.c,
                                    &plan.algo, workspace_, workspace_bytes_, stream_));
}

}  // namespace fovea::cuda

#include "backend/cuda/gemm_fp8.h"

#include <cstdio>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace fovea::cuda {
namespace {

// A is the weight, B the activation (see plan_for). OUTER_VEC_32F scales A's rows of the product (cuBLASLt's m:
// our N, per channel) and B's columns (cuBLASLt's n: our M, per token). For blocks, A (the weight, K-major) takes
// one scale per 128x128 block and B (the activation) one per 128 consecutive K elements of a token; both layouts
// as PyTorch's torch._scaled_mm and TransformerEngine's GEMM-ready block tensors hand them to cuBLASLt for
// DeepSeek-style scaling (fp8_recipe.h; the activation's token stride padded to 4 as TransformerEngine pads it).
void set_scale_modes(LtPlan& plan, Fp8Scaling scaling) {
  int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  if (scaling == Fp8Scaling::Channel) {
    a_mode = b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  } else if (scaling == Fp8Scaling::Block) {
    a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  }
  FOVEA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode)));
  FOVEA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode)));
}

}  // namespace

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
  const auto key = std::make_tuple(o.m, o.n, o.k, int(o.epilogue), int(o.scaling));
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  LtPlan plan;
  try {
    const bool bias_epilogue = o.epilogue == GemmEpilogue::Bias || o.epilogue == GemmEpilogue::BiasGelu;
    FOVEA_CHECK(bias_epilogue == (o.bias != nullptr), "linear_fp8: a bias pointer needs a bias epilogue and back");
    init_fp8_plan(plan, o, o.m);
    if (invariant_ && use_pinned(plan, o)) return plans_.emplace(key, plan).first->second;
    constexpr int kCandidates = 8;
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    const auto results = heuristic_candidates(handle_, plan, workspace_bytes_,
                                              common_alignment({o.x8, o.w8, o.y, o.bias}), kCandidates, status);
    FOVEA_CHECK(!results.empty(), "cuBLASLt has no FP8 algorithm for linear_fp8 (", fp8_scaling_name(o.scaling),
                " scales, ", gemm_epilogue_name(o.epilogue), ") M=", o.m, " N=", o.n, " K=", o.k, " (status ",
                int(status), ")");
    const int found = int(results.size());
    int chosen = -1;
    cublasStatus_t last = CUBLAS_STATUS_NOT_SUPPORTED;
    for (int i = 0; i < found && chosen < 0; ++i) {
      if (stream_is_capturing(stream_)) {  // no trial launches inside a capture: trust the first
        chosen = i;
        break;
      }
      last = launch(plan, o, results[i].algo);
      if (last == CUBLAS_STATUS_SUCCESS) chosen = i;
    }
    FOVEA_CHECK(chosen >= 0, "cuBLASLt refused all ", found, " FP8 algorithms for linear_fp8 (",
                fp8_scaling_name(o.scaling), " scales) M=", o.m, " N=", o.n, " K=", o.k, " (last status ", int(last),
                ")");
    plan.algo = results[chosen].algo;
    if (invariant_)
      std::fprintf(stderr, "fovea: batch-invariant: no shared FP8 GEMM algorithm for M=%d N=%d K=%d (%s scales, "
                   "%s): these rows may depend on their batch\n", o.m, o.n, o.k, fp8_scaling_name(o.scaling),
                   gemm_epilogue_name(o.epilogue));
  } catch (...) {
    destroy_plan(plan);
    throw;
  }
  return plans_.emplace(key, plan).first->second;
}

bool LtFp8Gemm::use_pinned(LtPlan& plan, const Operands& o) {
  const auto key = std::make_tuple(o.n, o.k, int(o.epilogue), int(o.scaling));
  auto it = pinned_.find(key);
  if (it == pinned_.end()) {
    LtPlan reference;
    try {
      init_fp8_plan(reference, o, kInvariantRows);
      cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
      const auto found =
          heuristic_candidates(handle_, reference, workspace_bytes_, kInvariantAlignment, 1, status);
      destroy_plan(reference);
      if (found.empty()) return false;
      it = pinned_.emplace(key, found[0].algo).first;
    } catch (...) {
      destroy_plan(reference);
      throw;
    }
  }
  if (!algo_fits(handle_, plan, it->second, workspace_bytes_)) return false;
  if (!stream_is_capturing(stream_) && launch(plan, o, it->second) != CUBLAS_STATUS_SUCCESS) return false;
  plan.algo = it->second;
  return true;
}

void LtFp8Gemm::init_fp8_plan(LtPlan& plan, const Operands& o, int m) {
  init_tn_plan(plan, CUDA_R_8F_E4M3, m, o.n, o.k, o.n, o.epilogue);
  const int8_t fast_accumulate = 0;
  FOVEA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accumulate,
                                                    sizeof(fast_accumulate)));
  set_scale_modes(plan, o.scaling);
  set_pointers(plan, o);
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

bool LtFp8Gemm::run(const uint8_t* x8, const uint8_t* w8, const float* x_scale, const float* w_scale,
                    const __nv_bfloat16* bias, __nv_bfloat16* y, int m, int n, int k, GemmEpilogue epilogue,
                    Fp8Scaling scaling) {
  if (m == 0 || n == 0) return true;
  const Operands o{x8, w8, x_scale, w_scale, bias, y, m, n, k, epilogue, scaling};
  const auto key = std::make_tuple(m, n, k, int(epilogue), int(scaling));
  if (refused_.count(key)) return false;
  // A vector-scaled GEMM with a fused epilogue may have no algorithm: fall back rather than fail (the plain one
  // then must work, and its own failure is the error reported).
  const bool may_refuse = scaling != Fp8Scaling::Tensor && epilogue != GemmEpilogue::None;
  if (may_refuse && !plans_.count(key)) {
    try {
      plan_for(o);
    } catch (const Error&) {
      refused_.insert(key);
      return false;
    }
  }
  LtPlan& plan = plan_for(o);
  set_pointers(plan, o);
  FOVEA_CUBLAS_CHECK(launch(plan, o, plan.algo));
  return true;
}

}  // namespace fovea::cuda

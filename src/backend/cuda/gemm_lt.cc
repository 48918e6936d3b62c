#include "backend/cuda/gemm_lt.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>

#include "backend/cuda/cuda_check.h"

namespace fovea::cuda {
namespace {

// 32 MiB covers the split-K and stream-K variants the heuristic picks at prefill shapes on Hopper.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

bool has_bias(GemmEpilogue e) { return e == GemmEpilogue::Bias || e == GemmEpilogue::BiasGelu; }

// Timing events of one tuning pass, destroyed however the pass ends.
struct TimingEvents {
  std::vector<cudaEvent_t> events;
  explicit TimingEvents(size_t count) : events(count, nullptr) {
    for (cudaEvent_t& e : events) FOVEA_CUDA_CHECK(cudaEventCreate(&e));
  }
  ~TimingEvents() {
    for (cudaEvent_t e : events)
      if (e) cudaEventDestroy(e);
  }
};

}  // namespace

cublasLtEpilogue_t lt_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::Gelu: return CUBLASLT_EPILOGUE_GELU;
    case GemmEpilogue::BiasGelu: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// The largest power of two up to 256 dividing every operand address: the heuristic assumes 256-byte aligned
// operands unless told otherwise, and row views (Tensor::rows) can be less aligned than cudaMalloc's blocks.
unsigned common_alignment(std::initializer_list<const void*> ptrs) {
  unsigned alignment = 256;
  for (const void* p : ptrs)
    while (p && alignment > 2 && reinterpret_cast<uintptr_t>(p) % alignment) alignment /= 2;
  return alignment;
}

bool stream_is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  FOVEA_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  return capture != cudaStreamCaptureStatusNone;
}


const char* gemm_epilogue_name(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::None: return "none";
    case GemmEpilogue::Bias: return "bias";
    case GemmEpilogue::Gelu: return "gelu";
    case GemmEpilogue::BiasGelu: return "bias+gelu";
  }
  return "?";
}

LtGemm::LtGemm(cudaStream_t stream, GemmTuning tuning) : stream_(stream), tuning_(tuning) {
  FOVEA_CUBLAS_CHECK(cublasLtCreate(&handle_));
  FOVEA_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  workspace_bytes_ = kWorkspaceBytes;
}

LtGemm::~LtGemm() {
  // Destructors must not throw: failures while tearing down are ignored.
  for (auto& [key, plan] : plans_) destroy_plan(plan);
  if (workspace_) cudaFree(workspace_);
  if (scratch_) cudaFree(scratch_);
  for (void* old : retired_scratch_) cudaFree(old);
  if (handle_) cublasLtDestroy(handle_);
}

void destroy_plan(LtPlan& plan) {
  if (plan.a) cublasLtMatrixLayoutDestroy(plan.a);
  if (plan.b) cublasLtMatrixLayoutDestroy(plan.b);
  if (plan.c) cublasLtMatrixLayoutDestroy(plan.c);
  if (plan.op) cublasLtMatmulDescDestroy(plan.op);
  plan = LtPlan{};
}

void init_tn_plan(LtPlan& plan, cudaDataType_t ab_type, int m, int n, int k, int ldy, GemmEpilogue epilogue) {
  FOVEA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  FOVEA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  FOVEA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  const cublasLtEpilogue_t lt = lt_epilogue(epilogue);
  FOVEA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt, sizeof(lt)));
  if (has_bias(epilogue)) {
    const cudaDataType_t bias_type = CUDA_R_16BF;
    FOVEA_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  }
  FOVEA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, ab_type, k, n, k));
  FOVEA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, ab_type, k, m, k));
  FOVEA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_16BF, n, m, ldy));
}

std::vector<cublasLtMatmulHeuristicResult_t> heuristic_candidates(cublasLtHandle_t handle, const LtPlan& plan,
                                                                  size_t workspace_bytes, unsigned alignment,
                                                                  int count, cublasStatus_t& status) {
  cublasLtMatmulPreference_t pref;
  FOVEA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
  int found = 0;
  try {
    FOVEA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &workspace_bytes, sizeof(workspace_bytes)));
    const uint32_t align32 = alignment;
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      FOVEA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align32, sizeof(align32)));
    status = cublasLtMatmulAlgoGetHeuristic(handle, plan.op, plan.a, plan.b, plan.c, plan.c, pref, count,
                                            results.data(), &found);
  } catch (...) {
    cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS) found = 0;
  results.resize(size_t(std::max(found, 0)));
  // The heuristic only returns usable entries, but a candidate that says otherwise is never run.
  results.erase(std::remove_if(results.begin(), results.end(),
                               [](const auto& r) { return r.state != CUBLAS_STATUS_SUCCESS; }),
                results.end());
  return results;
}

bool algo_fits(cublasLtHandle_t handle, const LtPlan& plan, const cublasLtMatmulAlgo_t& algo, size_t workspace_bytes) {
  cublasLtMatmulHeuristicResult_t result{};
  const cublasStatus_t status =
      cublasLtMatmulAlgoCheck(handle, plan.op, plan.a, plan.b, plan.c, plan.c, &algo, &result);
  return status == CUBLAS_STATUS_SUCCESS && result.workspaceSize <= workspace_bytes;
}

const cublasLtMatmulAlgo_t& LtGemm::pinned_algo(const Operands& o) {
  const auto key = std::make_tuple(o.n, o.k, int(o.epilogue), o.ldy);
  auto it = pinned_.find(key);
  if (it != pinned_.end()) return it->second;
  LtPlan reference;
  try {
    init_tn_plan(reference, CUDA_R_16BF, kInvariantRows, o.n, o.k, o.ldy, o.epilogue);
    Operands shape = o;
    shape.m = kInvariantRows;
    const auto found = candidates(reference, shape, kInvariantAlignment, 1);
    destroy_plan(reference);
    return pinned_.emplace(key, found[0].algo).first->second;
  } catch (...) {
    destroy_plan(reference);
    throw;
  }
}

std::vector<cublasLtMatmulHeuristicResult_t> LtGemm::candidates(const Plan& plan, const Operands& o,
                                                                unsigned alignment, int count) {
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  auto results = heuristic_candidates(handle_, plan, workspace_bytes_, alignment, count, status);
  if (results.empty())
    FOVEA_FAIL("cuBLASLt has no algorithm for linear M=", o.m, " N=", o.n, " K=", o.k, " epilogue ",
               gemm_epilogue_name(o.epilogue), " (status ", int(status), ")");
  return results;
}

cublasStatus_t LtGemm::launch(const Plan& plan, const Operands& o, const cublasLtMatmulAlgo_t& algo) {
  if (has_bias(o.epilogue)) {
    const cublasStatus_t status =
        cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &o.bias, sizeof(o.bias));
    if (status != CUBLAS_STATUS_SUCCESS) return status;
  }
  const float alpha = 1.f, beta = o.accumulate ? 1.f : 0.f;
  return cublasLtMatmul(handle_, plan.op, &alpha, o.w, plan.a, o.x, plan.b, &beta, o.y, plan.c, o.y, plan.c, &algo,
                        workspace_, workspace_bytes_, stream_);
}

// Each candidate: warm-ups, then timed calls between two events, all into the real output (the caller's own
// call recomputes it). One synchronization at the end. A candidate whose launch fails is skipped.
size_t LtGemm::fastest(const Plan& plan, const Operands& o,
                       const std::vector<cublasLtMatmulHeuristicResult_t>& found) {
  const auto host_start = std::chrono::steady_clock::now();
  TimingEvents timing(2 * found.size());
  const std::vector<cudaEvent_t>& events = timing.events;
  std::vector<bool> launched(found.size(), false);
  for (size_t i = 0; i < found.size(); ++i) {
    bool ok = true;
    for (int r = 0; ok && r < GemmTuning::kWarmups; ++r) ok = launch(plan, o, found[i].algo) == CUBLAS_STATUS_SUCCESS;
    if (!ok) continue;
    FOVEA_CUDA_CHECK(cudaEventRecord(events[2 * i], stream_));
    for (int r = 0; ok && r < GemmTuning::kTimedCalls; ++r)
      ok = launch(plan, o, found[i].algo) == CUBLAS_STATUS_SUCCESS;
    FOVEA_CUDA_CHECK(cudaEventRecord(events[2 * i + 1], stream_));
    launched[i] = ok;
  }
  const cudaError_t sync = cudaStreamSynchronize(stream_);
  std::vector<float> us(found.size(), std::numeric_limits<float>::infinity());
  for (size_t i = 0; sync == cudaSuccess && i < found.size(); ++i) {
    float ms = 0;
    if (launched[i] && cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]) == cudaSuccess)
      us[i] = 1000.f * ms / GemmTuning::kTimedCalls;
  }
  FOVEA_CUDA_CHECK(sync);
  const size_t best = size_t(std::min_element(us.begin(), us.end()) - us.begin());
  const size_t pick = us[best] < std::numeric_limits<float>::infinity() ? best : 0;
  tuning_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start).count();
  if (tuning_.log)
    std::fprintf(stderr,
                 "gemm tune: M=%d N=%d K=%d %s: %zu candidates, picked %zu, first pick %.1f us, best %.1f us "
                 "(tuning so far %.0f ms)\n",
                 o.m, o.n, o.k, gemm_epilogue_name(o.epilogue), found.size(), pick, double(us[0]),
                 double(us[pick]), tuning_ms_);
  return pick;
}

// Row-major y[M,N] = x[M,K] w[N,K]^T is column-major y^T[N,M] = w^T x^T with w read as a transposed K×N
// column-major matrix: A = w (op T), B = x (op N), both with leading dimension K; the bias runs along N, which
// is the column-major row dimension, exactly where cuBLASLt's epilogue bias goes.
LtGemm::Plan& LtGemm::plan_for(const Operands& o) {
  const unsigned alignment = common_alignment({o.x, o.w, o.y, has_bias(o.epilogue) ? o.bias : nullptr});
  const Key key{o.m, o.n, o.k, int(o.epilogue), alignment, o.ldy};  // accumulate: the same plan (beta is a scalar)
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan plan;
  try {
    init_tn_plan(plan, CUDA_R_16BF, o.m, o.n, o.k, o.ldy, o.epilogue);
    if (invariant_ && alignment >= kInvariantAlignment) {
      const cublasLtMatmulAlgo_t& algo = pinned_algo(o);
      if (algo_fits(handle_, plan, algo, workspace_bytes_)) {
        plan.algo = algo;
        return plans_.emplace(key, plan).first->second;
      }
    }
    if (invariant_)
      std::fprintf(stderr, "fovea: batch-invariant: no shared GEMM algorithm for M=%d N=%d K=%d %s (alignment %u): "
                   "these rows may depend on their batch\n", o.m, o.n, o.k, gemm_epilogue_name(o.epilogue), alignment);
    // Timing needs a synchronization, which a graph capture forbids: a plan first made while capturing keeps
    // the heuristic's first pick (decode_graphs.cc runs each step once before capturing it, so this is rare).
    const bool capturing = stream_is_capturing(stream_);
    const bool tune = !invariant_ && o.m <= GemmTuning::kMaxRows && !capturing && !o.accumulate;
    const auto found = candidates(plan, o, alignment, tune ? GemmTuning::kCandidates : 1);
    plan.algo = found[found.size() > 1 ? fastest(plan, o, found) : 0].algo;
    if (tuning_.log && o.m <= GemmTuning::kMaxRows && capturing)
      std::fprintf(stderr, "gemm tune: M=%d N=%d K=%d %s: first made while capturing a graph, not tuned\n", o.m,
                   o.n, o.k, gemm_epilogue_name(o.epilogue));
  } catch (...) {
    destroy_plan(plan);
    throw;
  }
  return plans_.emplace(key, plan).first->second;
}

LtGemm::Operands LtGemm::redirect(const Operands& o) {
  if (o.n % 8 == 0 || o.accumulate) return o;  // an accumulating GEMM reads y: it writes its own rows
  Operands padded = o;
  padded.ldy = (o.n + 7) / 8 * 8;
  const size_t needed = size_t(o.m) * size_t(padded.ldy);
  if (needed > scratch_elements_) {
    // Growing needs cudaMalloc, which a graph capture forbids: recorded without a big enough scratch (no eager
    // run of this shape before), the GEMM writes its unaligned rows directly, slower but the same result.
    if (stream_is_capturing(stream_)) return o;
    // The old buffer stays allocated: graphs recorded earlier may still write to it.
    if (scratch_) retired_scratch_.push_back(scratch_);
    scratch_ = nullptr;
    scratch_elements_ = 0;
    FOVEA_CUDA_CHECK(cudaMalloc(&scratch_, needed * sizeof(__nv_bfloat16)));
    scratch_elements_ = needed;
  }
  padded.y = scratch_;
  return padded;
}

// The GEMMs run() issues for o: one, or (unaligned N) the 64-aligned columns and the remainder.
std::vector<LtGemm::Operands> LtGemm::pieces(const Operands& o) const {
  const int main_n = o.n / 64 * 64;
  if (o.n % 8 == 0 || main_n == 0) return {o};
  Operands head = o, tail = o;
  head.n = main_n;
  tail.n = o.n - main_n;
  tail.w = o.w + int64_t(main_n) * o.k;
  tail.bias = o.bias ? o.bias + main_n : nullptr;
  tail.y = o.y + main_n;
  return {head, tail};
}

void LtGemm::prepare(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias, __nv_bfloat16* y,
                     int m, int n, int k, GemmEpilogue epilogue, bool accumulate) {
  if (m == 0 || n == 0) return;
  for (const Operands& piece : pieces(redirect({x, w, bias, y, m, n, k, epilogue, n, accumulate}))) plan_for(piece);
}

void LtGemm::run(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias, __nv_bfloat16* y, int m,
                 int n, int k, GemmEpilogue epilogue, bool accumulate) {
  if (m == 0 || n == 0) return;
  const Operands o = redirect({x, w, bias, y, m, n, k, epilogue, n, accumulate});
  for (const Operands& piece : pieces(o)) {
    const Plan& plan = plan_for(piece);
    FOVEA_CUBLAS_CHECK(launch(plan, piece, plan.algo));
  }
  if (o.y != y)
    FOVEA_CUDA_CHECK(cudaMemcpy2DAsync(y, size_t(n) * sizeof(__nv_bfloat16), o.y, size_t(o.ldy) * sizeof(__nv_bfloat16),
                                       size_t(n) * sizeof(__nv_bfloat16), size_t(m), cudaMemcpyDeviceToDevice,
                                       stream_));
}

}  // namespace fovea::cuda

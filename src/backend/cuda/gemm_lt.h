// y[M,N] = act(x[M,K] · w[N,K]^T + bias) through cuBLASLt: bf16 operands, f32 accumulation, bf16 output, bias
// and bias+GELU fused into the epilogue. One workspace, allocated at construction; the descriptors and the
// algorithm are cached per (M, N, K, epilogue, pointer alignment), so a steady-state call only sets the bias
// pointer.
//
// Small-M shapes (M <= 512: decode steps and short chunks) are memory-bound, and the heuristic's first pick is
// not always its fastest there: when such a plan is made outside a graph capture, up to 8 of the heuristic's
// algorithms are timed on the real operands and the fastest is kept for the life of the plan (so the choice is
// fixed per shape within a process).
//
// Outputs whose rows are not 16-byte aligned (N not a multiple of 8: the LM head's vocab of 92,553) make
// cuBLASLt fall back to slow kernels (865 GB/s for the M = 64 LM head on the H200); such a GEMM writes into an
// aligned scratch with a padded row stride and a 2-D copy moves the rows out (M x N x 2 bytes, a few µs). The
// columns are computed as two GEMMs, N rounded down to a multiple of 64 and the remainder, in case the kernels
// for an odd N are the slow part.
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <initializer_list>
#include <map>
#include <tuple>
#include <vector>

namespace fovea::cuda {

enum class GemmEpilogue : int { None, Bias, Gelu, BiasGelu };
const char* gemm_epilogue_name(GemmEpilogue e);
// The epilogue of a linear with or without a bias, GELU or not.
inline GemmEpilogue gemm_epilogue(bool bias, bool gelu) {
  return bias ? (gelu ? GemmEpilogue::BiasGelu : GemmEpilogue::Bias) : (gelu ? GemmEpilogue::Gelu : GemmEpilogue::None);
}
cublasLtEpilogue_t lt_epilogue(GemmEpilogue e);

struct GemmTuning {
  bool log = false;  // one stderr line per tuned shape
  // Heuristic candidates timed per shape (the heuristic may return fewer); shapes with more than kMaxRows rows
  // keep the heuristic's first pick.
  static constexpr int kCandidates = 8, kMaxRows = 512;
  static constexpr int kWarmups = 2, kTimedCalls = 5;
};

// The descriptors and algorithm of one cached GEMM shape (LtGemm and LtFp8Gemm); destroy_plan frees them.
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};
void destroy_plan(LtPlan& plan);
// The descriptors both GEMMs use: row-major y[m, n] = x[m, k] · w[n, k]^T as cuBLASLt's column-major
// y^T = w^T x^T with A = w (op T) and B = x (op N), both of `ab_type` with leading dimension k (the "TN" layout
// Hopper's FP8 kernels require), f32 compute, bf16 output with row stride ldy, and the epilogue (a bf16 bias when
// it has one). Throws on a cuBLASLt error; the caller destroys `plan` either way.
void init_tn_plan(LtPlan& plan, cudaDataType_t ab_type, int m, int n, int k, int ldy, GemmEpilogue epilogue);
// The heuristic's usable algorithms for `plan`, at most `count`, asked with the workspace size and the operands'
// common alignment (without it the heuristic assumes 256-byte aligned operands); `status` gets its status.
std::vector<cublasLtMatmulHeuristicResult_t> heuristic_candidates(cublasLtHandle_t handle, const LtPlan& plan,
                                                                  size_t workspace_bytes, unsigned alignment,
                                                                  int count, cublasStatus_t& status);
// Batch-invariant mode (Backend::set_batch_invariant): one algorithm per (N, K, epilogue, output stride), the
// heuristic's first pick for kInvariantRows rows asked with 16-byte operands, is used for every M. A fixed
// algorithm (tile shape, split-K count) sums each output element in the same order whatever M is, so a row's
// bits no longer depend on the other rows of the call; without it the heuristic's pick (and the tuned pick) change
// with M. algo_fits: whether cuBLASLt accepts `algo` for `plan`'s shapes within the workspace.
inline constexpr int kInvariantRows = 256;
inline constexpr unsigned kInvariantAlignment = 16;
bool algo_fits(cublasLtHandle_t handle, const LtPlan& plan, const cublasLtMatmulAlgo_t& algo, size_t workspace_bytes);
// The largest power of two up to 256 dividing every non-null address (cuBLASLt's alignment preferences).
unsigned common_alignment(std::initializer_list<const void*> ptrs);
bool stream_is_capturing(cudaStream_t stream);

class LtGemm {
 public:
  explicit LtGemm(cudaStream_t stream, GemmTuning tuning = {});
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // accumulate: y += the product (beta = 1, y read in place: the residual add of Backend::linear_residual).
  void run(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias, __nv_bfloat16* y, int m, int n,
           int k, GemmEpilogue epilogue, bool accumulate = false);
  // Makes (and tunes) the plan run() would use for these operands, without the final call: lets a caller time
  // run() alone. Tuning writes y (accumulating plans are never tuned: it would add to y).
  void prepare(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias, __nv_bfloat16* y, int m,
               int n, int k, GemmEpilogue epilogue, bool accumulate = false);
  size_t workspace_bytes() const { return workspace_bytes_; }
  // See kInvariantRows. Plans made before the switch keep their algorithms: switch before the first GEMM.
  void set_batch_invariant(bool on) { invariant_ = on; }
  // Shared with LtFp8Gemm, which runs on the same stream.
  cublasLtHandle_t handle() const { return handle_; }
  void* workspace() const { return workspace_; }

 private:
  struct Operands {
    const __nv_bfloat16 *x, *w, *bias;
    __nv_bfloat16* y;
    int m, n, k;
    GemmEpilogue epilogue;
    int ldy;  // elements between output rows (n, or n padded for the aligned scratch)
    bool accumulate = false;  // y += (beta = 1)
  };
  using Plan = LtPlan;
  using Key = std::tuple<int, int, int, int, unsigned, int>;
  Plan& plan_for(const Operands& o);
  // The algorithm every M of this (N, K, epilogue, ldy) uses in batch-invariant mode (made on first use).
  const cublasLtMatmulAlgo_t& pinned_algo(const Operands& o);
  std::vector<cublasLtMatmulHeuristicResult_t> candidates(const Plan& plan, const Operands& o, unsigned alignment,
                                                          int count);
  // Index of the fastest candidate on the real operands (0 when none could be timed).
  size_t fastest(const Plan& plan, const Operands& o, const std::vector<cublasLtMatmulHeuristicResult_t>& found);
  cublasStatus_t launch(const Plan& plan, const Operands& o, const cublasLtMatmulAlgo_t& algo);
  // The operands as launched: unaligned output rows redirected to the scratch (grown here, outside captures).
  Operands redirect(const Operands& o);
  std::vector<Operands> pieces(const Operands& o) const;

  cudaStream_t stream_;
  GemmTuning tuning_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, Plan> plans_;
  bool invariant_ = false;
  std::map<std::tuple<int, int, int, int>, cublasLtMatmulAlgo_t> pinned_;  // n, k, epilogue, ldy
  double tuning_ms_ = 0;  // host time spent tuning, reported in the log lines
  __nv_bfloat16* scratch_ = nullptr;  // aligned output rows for unaligned N
  size_t scratch_elements_ = 0;
  std::vector<void*> retired_scratch_;  // outgrown scratches, kept for graphs that recorded them
};

}  // namespace fovea::cuda

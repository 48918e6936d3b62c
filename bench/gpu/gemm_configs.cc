// Is there a faster cuBLASLt configuration than the heuristic's for a GEMM shape? For each shape (the ViT's by
// default), Fovea's bf16 "TN" linear (row-major y[M,N] = x[M,K] w[N,K]^T + bias, GELU optional; f32 compute, bf16
// output, 32 MiB workspace) is timed with
//   1. the heuristic's candidates (up to 64, in its order: Fovea takes the first, or the fastest of 8 at M <= 512);
//   2. every configuration cuBLASLt lists for this type combination: each algorithm id x its tile and stage
//      capabilities x CTA swizzling x custom option, split-K 1, cluster shape automatic, kept if
//      cublasLtMatmulAlgoCheck accepts it for the shape within the workspace.
// Each candidate: 2 warm-up launches, then 5 between two CUDA events. Prints, per shape, the heuristic's first pick,
// its best, and the 5 fastest configurations with their ids. A measurement tool (bench/gpu/gemm_configs.sh builds
// and runs it), not part of the engine.
//
//   gemm_configs [--heuristic-only] [M,N,K,EPILOGUE ...]   EPILOGUE: none | bias | bias+gelu
//   (default: InternViT-300M's four linears at 32 tiles; --heuristic-only skips step 2)
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

namespace {

#define CHECK_CUDA(x)                                                                \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)
#define CHECK_LT(x)                                                          \
  do {                                                                       \
    cublasStatus_t s_ = (x);                                                 \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                       \
      std::fprintf(stderr, "%s:%d cuBLASLt status %d\n", __FILE__, __LINE__, \
                   int(s_));                                                 \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

constexpr size_t kWorkspace = size_t(32) << 20;

struct Shape {
  int m, n, k;
  bool bias, gelu;
  const char* name() const { return gelu ? "bias+gelu" : bias ? "bias" : "none"; }
};

struct Gemm {
  cublasLtHandle_t handle;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c;
  const void *x, *w, *bias;
  void *y, *workspace;
  cudaStream_t stream;

  cublasStatus_t launch(const cublasLtMatmulAlgo_t& algo) const {
    const float alpha = 1.f, beta = 0.f;
    return cublasLtMatmul(handle, op, &alpha, w, a, x, b, &beta, y, c, y, c, &algo, workspace, kWorkspace, stream);
  }
  bool fits(const cublasLtMatmulAlgo_t& algo) const {
    cublasLtMatmulHeuristicResult_t r{};
    return cublasLtMatmulAlgoCheck(handle, op, a, b, c, c, &algo, &r) == CUBLAS_STATUS_SUCCESS &&
           r.workspaceSize <= kWorkspace;
  }
  // Mean microseconds of one launch, infinity if a launch fails.
  float time(const cublasLtMatmulAlgo_t& algo, cudaEvent_t start, cudaEvent_t stop) const {
    for (int i = 0; i < 2; ++i)
      if (launch(algo) != CUBLAS_STATUS_SUCCESS) return std::numeric_limits<float>::infinity();
    CHECK_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < 5; ++i)
      if (launch(algo) != CUBLAS_STATUS_SUCCESS) {
        CHECK_CUDA(cudaStreamSynchronize(stream));
        return std::numeric_limits<float>::infinity();
      }
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    return 1000.f * ms / 5;
  }
};

template <typename T>
std::vector<T> cap_array(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS || bytes == 0)
    return {};
  std::vector<T> values(bytes / sizeof(T));
  CHECK_LT(cublasLtMatmulAlgoCapGetAttribute(&algo, attr, values.data(), bytes, &bytes));
  return values;
}

template <typename T>
T cap_value(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  size_t bytes = 0;
  cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof(v), &bytes);
  return v;
}

template <typename T>
void set_config(cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr, T v) {
  CHECK_LT(cublasLtMatmulAlgoConfigSetAttribute(&algo, attr, &v, sizeof(v)));
}

struct Timed {
  float us;
  std::string what;
};

// 2. Every configuration cuBLASLt lists for bf16, timed; the five fastest printed.
template <typename Rate>
void search_configs(const Gemm& g, cublasLtEpilogue_t epilogue, float first, cudaEvent_t start, cudaEvent_t stop,
                    const Rate& rate) {
  cublasLtHandle_t handle = g.handle;
  std::vector<int> ids(256);
  int id_count = 0;
  CHECK_LT(cublasLtMatmulAlgoGetIds(handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF,
                                    CUDA_R_16BF, int(ids.size()), ids.data(), &id_count));
  std::vector<Timed> timed;
  int tried = 0;
  for (int n = 0; n < id_count; ++n) {
    cublasLtMatmulAlgo_t algo;
    if (cublasLtMatmulAlgoInit(handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF,
                               CUDA_R_16BF, ids[size_t(n)], &algo) != CUBLAS_STATUS_SUCCESS)
      continue;
    const uint32_t epilogues = cap_value<uint32_t>(algo, CUBLASLT_ALGO_CAP_EPILOGUE_MASK);
    if ((epilogues & uint32_t(epilogue)) != uint32_t(epilogue)) continue;
    std::vector<uint32_t> tiles = cap_array<uint32_t>(algo, CUBLASLT_ALGO_CAP_TILE_IDS);
    std::vector<uint32_t> stages = cap_array<uint32_t>(algo, CUBLASLT_ALGO_CAP_STAGES_IDS);
    if (tiles.empty()) tiles = {CUBLASLT_MATMUL_TILE_UNDEFINED};
    if (stages.empty()) stages = {CUBLASLT_MATMUL_STAGES_UNDEFINED};
    const int swizzles = cap_value<uint32_t>(algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT) ? 2 : 1;
    const int customs = std::min(cap_value<int32_t>(algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX), 3) + 1;
    for (uint32_t tile : tiles)
      for (uint32_t stage : stages)
        for (int swizzle = 0; swizzle < swizzles; ++swizzle)
          for (int custom = 0; custom < customs; ++custom) {
            set_config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, tile);
            set_config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, stage);
            set_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, int32_t(1));
            set_config(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, uint32_t(swizzle));
            set_config(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, uint32_t(custom));
            if (!g.fits(algo)) continue;
            ++tried;
            const float us = g.time(algo, start, stop);
            if (us < std::numeric_limits<float>::infinity())
              timed.push_back({us, "id " + std::to_string(ids[size_t(n)]) + " tile " + std::to_string(tile) +
                                       " stages " + std::to_string(stage) + " swizzle " + std::to_string(swizzle) +
                                       " custom " + std::to_string(custom)});
          }
  }
  std::sort(timed.begin(), timed.end(), [](const Timed& p, const Timed& q) { return p.us < q.us; });
  std::printf("  %d algorithm ids, %d configurations accepted, %zu ran; fastest:\n", id_count, tried, timed.size());
  for (size_t i = 0; i < std::min<size_t>(5, timed.size()); ++i)
    std::printf("    %.1f us (%.0f TFLOP/s, %.3f x the heuristic's first)  %s\n", timed[i].us, rate(timed[i].us),
                timed[i].us / first, timed[i].what.c_str());
}

void run_shape(cublasLtHandle_t handle, const Shape& s, void* workspace, cudaStream_t stream, bool exhaustive) {
  const size_t x_elems = size_t(s.m) * s.k, w_elems = size_t(s.n) * s.k, y_elems = size_t(s.m) * s.n;
  std::vector<__nv_bfloat16> host(std::max({x_elems, w_elems, size_t(s.n)}));
  for (size_t i = 0; i < host.size(); ++i) host[i] = __float2bfloat16(float((i * 2654435761u) % 2001) / 1000.f - 1.f);
  void *x, *w, *bias, *y;
  CHECK_CUDA(cudaMalloc(&x, x_elems * 2));
  CHECK_CUDA(cudaMalloc(&w, w_elems * 2));
  CHECK_CUDA(cudaMalloc(&bias, size_t(s.n) * 2));
  CHECK_CUDA(cudaMalloc(&y, y_elems * 2));
  CHECK_CUDA(cudaMemcpy(x, host.data(), x_elems * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(w, host.data(), w_elems * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(bias, host.data(), size_t(s.n) * 2, cudaMemcpyHostToDevice));

  Gemm g{handle, nullptr, nullptr, nullptr, nullptr, x, w, bias, y, workspace, stream};
  CHECK_LT(cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  CHECK_LT(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)));
  CHECK_LT(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)));
  const cublasLtEpilogue_t epilogue =
      s.gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : s.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  CHECK_LT(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  if (s.bias) {
    const cudaDataType_t bias_type = CUDA_R_16BF;
    CHECK_LT(
        cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    CHECK_LT(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  CHECK_LT(cublasLtMatrixLayoutCreate(&g.a, CUDA_R_16BF, s.k, s.n, s.k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&g.b, CUDA_R_16BF, s.k, s.m, s.k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&g.c, CUDA_R_16BF, s.n, s.m, s.n));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  const double flop = 2.0 * s.m * double(s.n) * s.k;
  const auto rate = [&](float us) { return flop / (double(us) * 1e-6) / 1e12; };

  // 1. The heuristic's candidates.
  cublasLtMatmulPreference_t pref;
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                                sizeof(kWorkspace)));
  std::vector<cublasLtMatmulHeuristicResult_t> found(64);
  int count = 0;
  CHECK_LT(cublasLtMatmulAlgoGetHeuristic(handle, g.op, g.a, g.b, g.c, g.c, pref, int(found.size()), found.data(),
                                          &count));
  cublasLtMatmulPreferenceDestroy(pref);
  float first = std::numeric_limits<float>::infinity(), heuristic_best = first;
  int best_index = -1;
  for (int i = 0; i < count; ++i) {
    const float us = g.time(found[size_t(i)].algo, start, stop);
    if (i == 0) first = us;
    if (us < heuristic_best) heuristic_best = us, best_index = i;
  }
  std::printf("shape M=%d N=%d K=%d %s: heuristic first %.1f us (%.0f TFLOP/s), best of %d: #%d %.1f us (%.0f)\n",
              s.m, s.n, s.k, s.name(), first, rate(first), count, best_index, heuristic_best, rate(heuristic_best));

  if (exhaustive) search_configs(g, epilogue, first, start, stop, rate);
  std::fflush(stdout);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cublasLtMatrixLayoutDestroy(g.a);
  cublasLtMatrixLayoutDestroy(g.b);
  cublasLtMatrixLayoutDestroy(g.c);
  cublasLtMatmulDescDestroy(g.op);
  cudaFree(x);
  cudaFree(w);
  cudaFree(bias);
  cudaFree(y);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes;
  bool exhaustive = true;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--heuristic-only") {
      exhaustive = false;
      continue;
    }
    Shape s{};
    char epi[32] = {0};
    const std::string e = std::sscanf(argv[i], "%d,%d,%d,%31s", &s.m, &s.n, &s.k, epi) == 4 ? epi : "";
    if (e != "none" && e != "bias" && e != "bias+gelu") {
      std::fprintf(stderr, "usage: gemm_configs [--heuristic-only] [M,N,K,none|bias|bias+gelu ...]\n");
      return 2;
    }
    s.bias = e != "none";
    s.gelu = e == "bias+gelu";
    shapes.push_back(s);
  }
  if (shapes.empty())  // InternViT-300M's four linears at 32 tiles of 1,025 tokens
    shapes = {{32800, 3072, 1024, true, false}, {32800, 4096, 1024, true, true}, {32800, 1024, 4096, true, false},
              {32800, 1024, 1024, true, false}};
  cublasLtHandle_t handle;
  CHECK_LT(cublasLtCreate(&handle));
  void* workspace;
  CHECK_CUDA(cudaMalloc(&workspace, kWorkspace));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  for (const Shape& s : shapes) run_shape(handle, s, workspace, stream, exhaustive);
  return 0;
}

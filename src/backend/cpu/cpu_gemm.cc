// Outer-product ("BLIS style") blocking: a task owns an MB×NB block of y; for each KC-slice of k it packs the
// NB rows of w into NR-wide panels laid out k-major, then a register micro-kernel updates MR×NR outputs with
// one broadcast of x per row and two vector loads of the panel per k. Each output sums k in order within a
// slice and the slices in order, so the result does not depend on the thread count (it may differ in the last
// bits between CPUs with and without FMA: the kernel is cloned for AVX+FMA).
#include "backend/cpu/cpu_gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_util.h"

namespace fovea::cpu {
namespace {

constexpr int kMR = 6;    // rows of x per micro-kernel
constexpr int kNR = 16;   // columns of y per micro-kernel (two 8-float vectors)
constexpr int kKC = 256;  // k-slice packed at a time
constexpr int kMB = 72;   // rows of y per task (multiple of kMR)
constexpr int kNB = 128;  // columns of y per task (multiple of kNR)

typedef float v8f __attribute__((vector_size(32)));

// An FMA clone and a default one, chosen at load time through an ifunc. Its resolver runs while the loader
// relocates the binary, before ThreadSanitizer's runtime is up, and TSan's instrumentation of it crashed every
// program that links this file: a TSan build takes the default code only.
#if defined(__SANITIZE_THREAD__)
#define FOVEA_GEMM_CLONES
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FOVEA_GEMM_CLONES
#endif
#endif
#ifndef FOVEA_GEMM_CLONES
#define FOVEA_GEMM_CLONES __attribute__((target_clones("fma", "default")))
#endif

// acc[r*kNB + j] += sum_k x_rows[r][k] * panel[k*kNR + j] for r < kMR, j < kNR.
FOVEA_GEMM_CLONES void micro_kernel(const float* const* x_rows, const float* panel, int kc, float* acc) {
  v8f c[kMR][2];
  for (int r = 0; r < kMR; ++r) c[r][0] = c[r][1] = v8f{};
  for (int k = 0; k < kc; ++k) {
    v8f b0, b1;
    std::memcpy(&b0, panel + k * kNR, sizeof(v8f));
    std::memcpy(&b1, panel + k * kNR + 8, sizeof(v8f));
    for (int r = 0; r < kMR; ++r) {
      const float a = x_rows[r][k];
      c[r][0] += a * b0;
      c[r][1] += a * b1;
    }
  }
  for (int r = 0; r < kMR; ++r)
    for (int j = 0; j < 8; ++j) {
      acc[r * kNB + j] += c[r][0][j];
      acc[r * kNB + 8 + j] += c[r][1][j];
    }
}

// panel[p][k][j] = w[n0 + p*kNR + j][k0 + k], zero past N.
void pack_panels(const float* w, int64_t N, int64_t K, int64_t n0, int nb, int64_t k0, int kc, float* panel) {
  for (int p = 0; p < nb / kNR; ++p) {
    float* dst = panel + int64_t(p) * kc * kNR;
    for (int j = 0; j < kNR; ++j) {
      const int64_t n = n0 + p * kNR + j;
      if (n < N) {
        const float* src = w + n * K + k0;
        for (int k = 0; k < kc; ++k) dst[k * kNR + j] = src[k];
      } else {
        for (int k = 0; k < kc; ++k) dst[k * kNR + j] = 0.0f;
      }
    }
  }
}

struct GemmArgs {
  const float* x;
  const float* w;
  const float* bias;
  float* y;
  int64_t M, N, K;
  Activation act;
};

void run_block(const GemmArgs& g, int64_t m0, int64_t n0) {
  const int mb = int(std::min<int64_t>(kMB, g.M - m0));
  const int nb_valid = int(std::min<int64_t>(kNB, g.N - n0));
  const int nb = (nb_valid + kNR - 1) / kNR * kNR;
  thread_local std::vector<float> acc, panel;
  acc.assign(size_t(kMB) * kNB, 0.0f);
  panel.resize(size_t(kKC) * kNB);
  for (int64_t k0 = 0; k0 < g.K; k0 += kKC) {
    const int kc = int(std::min<int64_t>(kKC, g.K - k0));
    pack_panels(g.w, g.N, g.K, n0, nb, k0, kc, panel.data());
    for (int r0 = 0; r0 < mb; r0 += kMR) {
      // Rows past the block's end re-read its last row; their sums land in unused rows of acc.
      const float* x_rows[kMR];
      for (int r = 0; r < kMR; ++r) x_rows[r] = g.x + (m0 + std::min(r0 + r, mb - 1)) * g.K + k0;
      for (int p = 0; p < nb / kNR; ++p)
        micro_kernel(x_rows, panel.data() + int64_t(p) * kc * kNR, kc, acc.data() + r0 * kNB + p * kNR);
    }
  }
  for (int r = 0; r < mb; ++r) {
    float* out = g.y + (m0 + r) * g.N + n0;
    const float* sum = acc.data() + r * kNB;
    for (int j = 0; j < nb_valid; ++j) {
      float v = sum[j] + (g.bias ? g.bias[n0 + j] : 0.0f);
      out[j] = g.act == Activation::Gelu ? gelu_erf(v) : v;
    }
  }
}

}  // namespace

void gemm_nt(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N, int64_t K,
             Activation act, bool parallel) {
  if (M == 0 || N == 0) return;
  const GemmArgs args{x, w, bias, y, M, N, K, act};
  const int64_t m_blocks = (M + kMB - 1) / kMB;
  const int64_t n_blocks = (N + kNB - 1) / kNB;
  const double block_flops =
      2.0 * double(std::min<int64_t>(M, kMB)) * double(std::min<int64_t>(N, kNB)) * double(std::max<int64_t>(K, 1));
  auto blocks = [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) run_block(args, (b / n_blocks) * kMB, (b % n_blocks) * kNB);
  };
  if (parallel) {
    parallel_rows(m_blocks * n_blocks, block_flops, blocks);
  } else {
    blocks(0, m_blocks * n_blocks);
  }
}

}  // namespace fovea::cpu

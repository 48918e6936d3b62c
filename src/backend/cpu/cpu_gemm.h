// The one matrix product the CPU backend needs: y[M,N] = act(x[M,K] · w[N,K]^T + bias[N]), float32 in and out,
// float32 accumulation in order of k. Blocked for the cache and split over the global thread pool.
#pragma once
#include <cstdint>

#include "backend/backend.h"

namespace fovea::cpu {

// bias may be null. x, w, y are row-major and contiguous; y must not alias x or w. With parallel = false it
// runs on the calling thread only (for callers already inside a parallel loop: the pool does not nest).
void gemm_nt(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N, int64_t K,
             Activation act, bool parallel = true);

}  // namespace fovea::cpu

// Helpers shared by the CPU ops: argument checks that name the op, 2-D views of row-major tensors, the
// parallel row loop, and a dot product whose per-lane float accumulators the compiler can vectorise without
// reassociating a single sum.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace fovea::cpu {

// Throws unless t is a non-null CPU tensor of `dtype`.
void check_host(const Tensor& t, DType dtype, const char* op, const char* what);
// Rows of t seen as a matrix [numel / last dim, last dim].
int64_t rows_of(const Tensor& t);
int64_t cols_of(const Tensor& t);
// Throws unless t is a CPU F32 matrix [rows, cols] (any rank whose last dim is cols and numel = rows * cols).
void check_matrix(const Tensor& t, int64_t rows, int64_t cols, const char* op, const char* what);
void check_vector(const Tensor& t, int64_t n, DType dtype, const char* op, const char* what);

// Runs body(begin, end) over [0, n) on the global pool; `work_per_item` (rough flops) sets the chunk size so
// tiny ops stay on the calling thread.
void parallel_rows(int64_t n, double work_per_item, const std::function<void(int64_t, int64_t)>& body);

inline float dot(const float* a, const float* b, int64_t n) {
  constexpr int kLanes = 16;
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += a[i + l] * b[i + l];
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  for (int l = 0; l < kLanes; ++l) tail += lane[l];
  return tail;
}

inline float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

}  // namespace fovea::cpu

namespace fovea::cpu {

// scores[j] <- exp(scores[j] - max) for j < n; returns 1 / sum (summed in double). Softmax = scores * result.
inline float exp_normalize(float* scores, int64_t n) {
  float max_score = -INFINITY;
  for (int64_t j = 0; j < n; ++j) max_score = scores[j] > max_score ? scores[j] : max_score;
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  return float(1.0 / sum);
}

// out[d] = scale * sum_j weights[j] * rows[j][d], rows[j] = base + j * stride.
inline void weighted_row_sum(const float* weights, int64_t n, const float* base, int64_t stride, int64_t dim,
                             float scale, float* out) {
  for (int64_t d = 0; d < dim; ++d) out[d] = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    const float w = weights[j];
    const float* row = base + j * stride;
    for (int64_t d = 0; d < dim; ++d) out[d] += w * row[d];
  }
  for (int64_t d = 0; d < dim; ++d) out[d] *= scale;
}

}  // namespace fovea::cpu

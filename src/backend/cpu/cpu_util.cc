#include "backend/cpu/cpu_util.h"

#include <algorithm>

namespace fovea::cpu {

void check_host(const Tensor& t, DType dtype, const char* op, const char* what) {
  FOVEA_CHECK(t.device == Device::CPU, op, ": ", what, " is not a CPU tensor");
  FOVEA_CHECK(t.dtype == dtype, op, ": ", what, " has dtype ", dtype_name(t.dtype), ", expected ", dtype_name(dtype));
  FOVEA_CHECK(t.data != nullptr || t.numel() == 0, op, ": ", what, " is empty");
}

int64_t rows_of(const Tensor& t) {
  if (t.rank() == 0) return 1;
  const int64_t cols = t.dim(-1);
  return cols ? t.numel() / cols : 0;
}

int64_t cols_of(const Tensor& t) { return t.rank() == 0 ? 1 : t.dim(-1); }

void check_matrix(const Tensor& t, int64_t rows, int64_t cols, const char* op, const char* what) {
  check_host(t, DType::F32, op, what);
  FOVEA_CHECK(t.rank() >= 1 && cols_of(t) == cols && rows_of(t) == rows, op, ": ", what, " has shape ",
              shape_str(t.shape), ", expected [", rows, ", ", cols, "]");
}

void check_vector(const Tensor& t, int64_t n, DType dtype, const char* op, const char* what) {
  check_host(t, dtype, op, what);
  FOVEA_CHECK(t.numel() == n, op, ": ", what, " has shape ", shape_str(t.shape), ", expected ", n, " elements");
}

void parallel_rows(int64_t n, double work_per_item, const std::function<void(int64_t, int64_t)>& body) {
  // About 64k flops per chunk keeps the pool's overhead (a few microseconds per task) negligible.
  const double per_item = std::max(work_per_item, 1.0);
  const int64_t min_chunk = std::max<int64_t>(1, int64_t(65536.0 / per_item));
  ThreadPool::global().parallel_for(n, body, min_chunk);
}

}  // namespace fovea::cpu

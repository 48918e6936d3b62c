// The host-side argument checks and pointer casts of CudaBackend's ops (cuda_ops.cc, cuda_fp8_ops.cc): each op
// checks device, dtype and shape before it launches, and throws fovea::Error naming what did not match.
#pragma once
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"
#include "core/tensor.h"

namespace fovea::cuda {

inline const bf16* cbf(const Tensor& t) { return static_cast<const bf16*>(t.data); }
inline bf16* mbf(Tensor& t) { return static_cast<bf16*>(t.data); }
inline const int* ci32(const Tensor& t) { return static_cast<const int*>(t.data); }

// Checks device, dtype and element count; returns rows when viewed as [rows, cols] (cols = last dimension).
inline int64_t rows_of(const Tensor& t, DType dtype, int64_t cols, const char* what) {
  FOVEA_CHECK(t.device == Device::CUDA && !t.empty(), what, " must be a CUDA tensor");
  FOVEA_CHECK(t.dtype == dtype, what, ": dtype ", dtype_name(t.dtype), ", expected ", dtype_name(dtype));
  FOVEA_CHECK(t.rank() >= 1 && t.dim(-1) == cols, what, ": shape ", shape_str(t.shape), ", expected last dim ",
              cols);
  return t.numel() / cols;
}

inline void expect(const Tensor& t, DType dtype, const Shape& shape, const char* what) {
  FOVEA_CHECK(t.device == Device::CUDA && (!t.empty() || t.numel() == 0), what, " must be a CUDA tensor");
  check_tensor(t, dtype, shape, what);
}

// The label of an op whose cost follows its row count.
inline std::string rows_label(const char* op, int64_t rows) { return str(op, " rows=", rows); }

inline void expect_numel(const Tensor& t, DType dtype, int64_t numel, const char* what) {
  FOVEA_CHECK(t.device == Device::CUDA && !t.empty(), what, " must be a CUDA tensor");
  FOVEA_CHECK(t.dtype == dtype, what, ": dtype ", dtype_name(t.dtype), ", expected ", dtype_name(dtype));
  FOVEA_CHECK(t.numel() == numel, what, ": shape ", shape_str(t.shape), ", expected ", numel, " elements");
}

// A norm's per-column parameters over `cols` columns: the layer scale (may be empty) and gamma, bf16 [cols]; beta
// bf16 [cols] for LayerNorm, empty for RMSNorm. `op` names the op in the errors (scale_add_norm and its FP8 form).
inline void expect_norm_params(const std::string& op, int64_t cols, NormKind kind, const Tensor& scale,
                               const Tensor& gamma, const Tensor& beta) {
  if (!scale.empty()) expect_numel(scale, DType::BF16, cols, (op + " scale").c_str());
  expect_numel(gamma, DType::BF16, cols, (op + " gamma").c_str());
  if (kind == NormKind::Layer) expect_numel(beta, DType::BF16, cols, (op + " beta").c_str());
  else FOVEA_CHECK(beta.empty(), op, ": RMSNorm takes no beta");
}

}  // namespace fovea::cuda

// Every CUDA runtime and cuBLASLt call in the backend goes through these checks: a failure becomes a
// fovea::Error naming the call and the code, never an abort. Host-side header (no device code).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "core/error.h"

namespace fovea::cuda {

[[noreturn]] void throw_cuda_error(const char* file, int line, const char* call, cudaError_t code);
[[noreturn]] void throw_cublas_error(const char* file, int line, const char* call, cublasStatus_t code);

}  // namespace fovea::cuda

#define FOVEA_CUDA_CHECK(call)                                                                   \
  do {                                                                                           \
    cudaError_t fovea_cuda_status_ = (call);                                                     \
    if (fovea_cuda_status_ != cudaSuccess)                                                       \
      ::fovea::cuda::throw_cuda_error(__FILE__, __LINE__, #call, fovea_cuda_status_);             \
  } while (0)

#define FOVEA_CUBLAS_CHECK(call)                                                                 \
  do {                                                                                           \
    cublasStatus_t fovea_cublas_status_ = (call);                                                \
    if (fovea_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                           \
      ::fovea::cuda::throw_cublas_error(__FILE__, __LINE__, #call, fovea_cublas_status_);         \
  } while (0)

// After a kernel launch: launch-configuration errors surface here; faults inside the kernel surface at the
// next synchronising call, which is checked too.
#define FOVEA_CUDA_CHECK_LAUNCH() FOVEA_CUDA_CHECK(cudaGetLastError())

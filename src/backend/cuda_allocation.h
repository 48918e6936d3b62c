// Device bytes one cudaMalloc of `bytes` takes, for planning memory without a GPU (runtime/memory_plan.h). Measured on
// an H100 with CUDA 13 (cudaMemGetInfo's drop over 64 to 1,024 equal allocations): above 1 MiB an allocation takes
// whole 2 MiB pages (1 MiB + 1 byte takes 2 MiB, 7,569,408 bytes take 8 MiB); up to 1 MiB allocations share 2 MiB
// pages, a 16-byte one taking 2 KiB, 20,480 bytes 22 KiB, 300,000 bytes 342 KiB, 700,000 bytes 1 MiB. This rounds the
// small ones up to a power of two (at least 2 KiB), which bounds every measured case. The rounding of the ~1,700
// tensors of a 78B model (InternVL3-78B, 4-bit) comes to ~700 MiB, more than the planner's 512 MiB slack that was to
// cover it: a plan that filled an 80 GB H100 ran out of memory at start-up.
#pragma once
#include <cstddef>

namespace fovea {

inline constexpr size_t kCudaPageBytes = size_t(2) << 20;

constexpr size_t cuda_allocation_bytes(size_t bytes) {
  if (bytes > kCudaPageBytes / 2) return (bytes + kCudaPageBytes - 1) / kCudaPageBytes * kCudaPageBytes;
  size_t rounded = 2048;
  while (rounded < bytes) rounded *= 2;
  return rounded;
}

static_assert(cuda_allocation_bytes(16) == 2048 && cuda_allocation_bytes(20480) == 32768);
static_assert(cuda_allocation_bytes(size_t(1) << 20) == size_t(1) << 20);
static_assert(cuda_allocation_bytes((size_t(1) << 20) + 1) == kCudaPageBytes);
static_assert(cuda_allocation_bytes(484442112) == 484442112);  // 231 pages exactly

}  // namespace fovea

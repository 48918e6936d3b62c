// HostStager: host->device uploads through pinned staging memory. Copies from pageable memory are slow (the
// driver bounces them through its own small pinned buffer) and the old upload synchronised the stream on every
// call; here the source is copied (or dtype-converted) into pinned memory by several CPU threads and sent with
// cudaMemcpyAsync on the backend's stream, chunk by chunk, so the CPU fills chunk i+1 while chunk i is in flight.
//
// Layout: two halves of kHalfBytes. Chunks are placed front to back in the current half; when the next chunk
// does not fit, the stager switches to the other half after waiting for that half's last copy (one event per
// half). upload() returns once every byte of the source is in pinned memory: the caller may then reuse the host
// source at once, while the device copies may still be queued behind earlier work on the stream.
//
// Not thread-safe by itself beyond a mutex around upload(); like every op it is meant for one issuing thread.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "core/tensor.h"

namespace fovea::cuda {

class HostStager {
 public:
  static constexpr size_t kHalfBytes = size_t(64) << 20;
  static constexpr size_t kChunkBytes = size_t(8) << 20;  // one cudaMemcpyAsync; a half holds 8 of them

  // Allocates the pinned memory and the events on the current device; copies go to `stream`.
  explicit HostStager(cudaStream_t stream);
  ~HostStager();  // the owner synchronises the stream first
  HostStager(const HostStager&) = delete;
  HostStager& operator=(const HostStager&) = delete;

  // Copies host_src into dst (a device pointer to numel elements of dst_dtype), converting between float
  // dtypes (F32/F16/BF16) when they differ. The caller has checked shapes and dtypes.
  void upload(void* dst, DType dst_dtype, const Tensor& host_src);

 private:
  // Pinned space for `bytes` (<= kChunkBytes), switching halves (and waiting) when the current one is full.
  uint8_t* reserve(size_t bytes);
  void release();  // frees what the constructor took; safe on a half-built object
  // Enqueues the copy of the last reserved region and records the half's event after it.
  void send(uint8_t* staged, void* dst, size_t bytes);

  cudaStream_t stream_;
  uint8_t* pinned_ = nullptr;                      // 2 * kHalfBytes
  cudaEvent_t half_done_[2] = {nullptr, nullptr};  // recorded after the latest copy out of each half
  int half_ = 0;                                   // the half being filled
  size_t cursor_ = 0;                              // bytes of it already handed out since it was last waited on
  std::mutex mutex_;
};

// Writes count elements of src (src_dtype) to dst as dst_dtype: a byte copy when the dtypes match, else a
// conversion between float dtypes (F32/F16/BF16) rounding to nearest even, as the host conversions do.
void convert_elements(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t count);

}  // namespace fovea::cuda

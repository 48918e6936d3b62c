// HostStager: pinned double-half staging for host->device uploads (see host_stager.h for the scheme).
#include "backend/cuda/host_stager.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "core/thread_pool.h"

namespace fovea::cuda {
namespace {

// Below this many bytes a chunk is filled by the calling thread: waking the pool costs more than it saves.
constexpr size_t kParallelFillBytes = size_t(1) << 20;
// Smallest piece of a chunk one pool thread fills.
constexpr size_t kMinFillBytes = size_t(256) << 10;

float load_float(const void* src, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::F32:
      return static_cast<const float*>(src)[i];
    case DType::BF16:
      return bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
    case DType::F16:
      return f16_to_f32(static_cast<const uint16_t*>(src)[i]);
    default:
      FOVEA_FAIL("upload: cannot convert from ", dtype_name(dtype));
  }
}

// One loop per destination dtype keeps the F32 -> BF16 case (the common conversion) a tight loop.
void convert_to(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t count) {
  if (dst_dtype == DType::F32) {
    float* out = static_cast<float*>(dst);
    for (int64_t i = 0; i < count; ++i) out[i] = load_float(src, src_dtype, i);
  } else if (dst_dtype == DType::BF16) {
    uint16_t* out = static_cast<uint16_t*>(dst);
    if (src_dtype == DType::F32) {
      const float* in = static_cast<const float*>(src);
      for (int64_t i = 0; i < count; ++i) out[i] = f32_to_bf16(in[i]);
    } else {
      for (int64_t i = 0; i < count; ++i) out[i] = f32_to_bf16(load_float(src, src_dtype, i));
    }
  } else if (dst_dtype == DType::F16) {
    uint16_t* out = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < count; ++i) out[i] = f32_to_f16(load_float(src, src_dtype, i));
  } else {
    FOVEA_FAIL("upload: cannot convert ", dtype_name(src_dtype), " to ", dtype_name(dst_dtype));
  }
}

}  // namespace

void convert_elements(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t count) {
  if (count <= 0) return;
  if (src_dtype == dst_dtype) {
    std::memcpy(dst, src, size_t(count) * dtype_size(src_dtype));
    return;
  }
  convert_to(src, src_dtype, dst, dst_dtype, count);
}

HostStager::HostStager(cudaStream_t stream) : stream_(stream) {
  try {
    for (cudaEvent_t& event : half_done_) FOVEA_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    // Portable: usable whatever device is current when the copy runs. No write-combining: the CPU only writes
    // here, but WC memory makes any accidental read very slow and gains little over cached stores.
    void* p = nullptr;
    FOVEA_CUDA_CHECK(cudaHostAlloc(&p, 2 * kHalfBytes, cudaHostAllocPortable));
    pinned_ = static_cast<uint8_t*>(p);
  } catch (...) {
    release();  // the destructor does not run for a half-built object
    throw;
  }
}

HostStager::~HostStager() { release(); }

void HostStager::release() {  // must not throw
  for (cudaEvent_t& event : half_done_) {
    if (event) cudaEventDestroy(event);
    event = nullptr;
  }
  if (pinned_) cudaFreeHost(pinned_);
  pinned_ = nullptr;
}

uint8_t* HostStager::reserve(size_t bytes) {
  // Regions start 256-byte aligned: aligned stores for any dtype, and the DMA engine prefers it.
  bytes = (bytes + 255) & ~size_t(255);
  if (cursor_ + bytes > kHalfBytes) {
    // The other half is reused only once its last copy (and so every earlier one, same stream) has finished.
    half_ ^= 1;
    cursor_ = 0;
    FOVEA_CUDA_CHECK(cudaEventSynchronize(half_done_[half_]));
  }
  uint8_t* staged = pinned_ + size_t(half_) * kHalfBytes + cursor_;
  cursor_ += bytes;
  return staged;
}

void HostStager::send(uint8_t* staged, void* dst, size_t bytes) {
  FOVEA_CUDA_CHECK(cudaMemcpyAsync(dst, staged, bytes, cudaMemcpyHostToDevice, stream_));
  FOVEA_CUDA_CHECK(cudaEventRecord(half_done_[half_], stream_));
}

void HostStager::upload(void* dst, DType dst_dtype, const Tensor& host_src) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t total = host_src.numel();
  const size_t src_size = dtype_size(host_src.dtype), dst_size = dtype_size(dst_dtype);
  // Chunks hold whole elements of both dtypes, so each chunk converts on its own.
  const int64_t chunk_elements = int64_t(kChunkBytes / std::max(src_size, dst_size));
  const uint8_t* src_bytes = static_cast<const uint8_t*>(host_src.data);
  uint8_t* dst_bytes = static_cast<uint8_t*>(dst);
  for (int64_t first = 0; first < total; first += chunk_elements) {
    const int64_t count = std::min(chunk_elements, total - first);
    const size_t staged_bytes = size_t(count) * dst_size;
    uint8_t* staged = reserve(staged_bytes);
    const uint8_t* src = src_bytes + size_t(first) * src_size;
    if (staged_bytes < kParallelFillBytes) {
      convert_elements(src, host_src.dtype, staged, dst_dtype, count);
    } else {
      const int64_t min_elements = int64_t(kMinFillBytes / dst_size);
      ThreadPool::global().parallel_for(
          count,
          [&](int64_t begin, int64_t end) {
            convert_elements(src + size_t(begin) * src_size, host_src.dtype, staged + size_t(begin) * dst_size,
                             dst_dtype, end - begin);
          },
          min_elements);
    }
    // While this chunk is in flight, the next loop iteration fills the next region of pinned memory.
    send(staged, dst_bytes + size_t(first) * dst_size, staged_bytes);
  }
}

}  // namespace fovea::cuda

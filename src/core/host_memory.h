// Bytes of host memory held by tensors made by Tensor::host, now and at the peak since the last reset: the one
// path the loader's transient buffers (layout changes, dequantization, repacking, FP8 quantization) take, so
// tests measure what loading holds besides the backend's own memory (tests/runtime/test_streaming_load.cc).
// Process-wide counters: two atomic updates per host tensor.
#pragma once
#include <cstddef>

namespace fovea {

size_t host_tensor_bytes();
size_t host_tensor_peak_bytes();
void reset_host_tensor_peak();  // the peak starts again from what is held now

}  // namespace fovea

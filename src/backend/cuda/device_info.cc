#include "backend/cuda/device_info.h"

#include <cuda_runtime.h>

#include <atomic>

#include "backend/cuda/cuda_check.h"

namespace fovea::cuda {

int current_device() {
  int device = 0;
  FOVEA_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

int sm_count(int device_index) {
  static std::atomic<int> cached[64] = {};
  std::atomic<int>* slot = device_index >= 0 && device_index < 64 ? &cached[device_index] : nullptr;
  if (slot && slot->load() > 0) return slot->load();
  int sms = 0;
  FOVEA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_index));
  if (slot) slot->store(sms);
  return sms;
}

}  // namespace fovea::cuda

// Device attributes the kernels' launch rules read, asked once per device (they never change). Host-side header.
#pragma once

namespace fovea::cuda {

int current_device();
// Multiprocessors of the device (132 on an H100 SXM / H200): grids are sized in blocks per multiprocessor.
int sm_count(int device_index);
inline int current_sm_count() { return sm_count(current_device()); }

}  // namespace fovea::cuda

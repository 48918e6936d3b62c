// Linked instead of the CUDA backend in builds without nvcc.
#include "backend/backend.h"

namespace fovea {

std::unique_ptr<Backend> make_cuda_backend(int) { FOVEA_FAIL("this build of fovea has no CUDA backend"); }
bool cuda_backend_available() { return false; }
int cuda_device_count() { return 0; }
void bind_cuda_device(int) {}

}  // namespace fovea
